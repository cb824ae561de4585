//! The documentation against the binary it documents (#20): the scenario
//! reference is what `perfops schema --markdown` prints, every scenario shown
//! in a Markdown page passes `perfops check`, every relative link leads to a
//! file of the repository, nothing user-facing points outside it, and the
//! CLI's completions and man pages come out. (That every `perfops ...` line
//! of the docs parses with the CLI is a unit test of the binary, `help.rs`,
//! where its clap definition is.)
//!
//! `UPDATE_GOLDEN=1 cargo test -p perfops --test docs` rewrites
//! `docs/scenario-reference.md` from the schema.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Workdir, spawn_perfops};

const LIMIT: Duration = Duration::from_secs(20);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every Markdown page a user reads: README.md, docs/ (and its folders), examples/.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> =
            std::fs::read_dir(dir).expect("read a docs folder").map(|e| e.expect("entry").path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let mut out = vec![root().join("README.md")];
    walk(&root().join("docs"), &mut out);
    walk(&root().join("examples"), &mut out);
    out
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The code blocks of a Markdown page: (language, first line number, text).
fn code_blocks(text: &str) -> Vec<(String, usize, String)> {
    let mut out = Vec::new();
    // (language, first line, text, the fence's indentation)
    let mut open: Option<(String, usize, String, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        match (&mut open, t.strip_prefix("```")) {
            (None, Some(lang)) => open = Some((lang.trim().to_string(), i + 2, String::new(), line.len() - t.len())),
            (Some(_), Some(_)) => out.extend(open.take().map(|(l, n, b, _)| (l, n, b))),
            (Some((_, _, body, indent)), None) => {
                // A block indented in a list: its lines lose the fence's indentation.
                let cut = line.len() - line.trim_start().len();
                body.push_str(&line[cut.min(*indent)..]);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

#[test]
fn scenario_reference_is_generated_from_the_schema() {
    let out = spawn_perfops(&["schema", "--markdown"], |_| {}).wait(LIMIT);
    out.assert_exit(0);
    let path = root().join("docs/scenario-reference.md");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &out.stdout).expect("write the reference");
    }
    let committed = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} ({e}); create it with UPDATE_GOLDEN=1", path.display()));
    assert!(
        committed == out.stdout,
        "docs/scenario-reference.md is not what `perfops schema --markdown` prints: \
         run UPDATE_GOLDEN=1 cargo test -p perfops --test docs"
    );
    // Every field the parser knows is on the page (the schema's own sync test keeps the schema whole).
    let schema: serde_json::Value = serde_json::from_str(&read(&root().join("schema/scenario.schema.json"))).unwrap();
    for key in schema["properties"].as_object().expect("top-level properties").keys() {
        assert!(committed.contains(&format!("### `{key}`")), "top-level field `{key}` is missing from the page");
    }
    assert!(committed.contains("### `load.max_in_flight`") && committed.contains("- **Default**: `1000`"));
}

/// Every ```yaml block with `flows:` and `load:` in a page is a whole scenario: `perfops check` accepts it.
#[test]
fn scenarios_in_the_docs_pass_check() {
    let work = Workdir::new("docs-yaml");
    // What the documented scenarios read besides themselves.
    std::fs::write(work.path.join("users.csv"), "email,password\na@example.com,x\n").unwrap();
    std::fs::copy(root().join("examples/echo.proto"), work.path.join("echo.proto")).unwrap();
    let recording = "# perfops replay v1\noffset_ms,flow,user\n0,orders,\n40,login,alice\n";
    std::fs::write(work.path.join("recording.csv"), recording).unwrap();
    let mut checked = 0;
    let mut bad = Vec::new();
    for page in pages() {
        for (lang, line, body) in code_blocks(&read(&page)) {
            // A whole scenario, not a snippet of one (the reference's examples are snippets).
            let top = |key: &str| body.lines().any(|l| l.starts_with(key));
            if lang != "yaml" || !top("load:") || !top("flows:") {
                continue;
            }
            let file = work.scenario(&format!("block-{checked}.yaml"), &body);
            checked += 1;
            let out = spawn_perfops(&["check", &file.display().to_string()], |c| {
                c.env("PORT", "8080").env("PROM_TOKEN", "t").env("PASSWORD", "p").env("TOKEN", "t");
            })
            .wait(LIMIT);
            if out.code != Some(0) {
                bad.push(format!("{}:{line}: {}{}", page.display(), out.stdout, out.stderr));
            }
        }
    }
    assert!(bad.is_empty(), "scenarios in the docs that `perfops check` refuses:\n{}", bad.join("\n"));
    assert!(checked >= 5, "only {checked} scenarios found in the docs");
}

/// Relative links (`[text](path)`, `path#anchor`) lead to files that exist in the repository.
#[test]
fn relative_links_resolve() {
    let repo = root().canonicalize().expect("the repository");
    let mut bad = Vec::new();
    let mut n = 0;
    for page in pages() {
        let text = read(&page);
        let dir = page.parent().expect("a folder");
        let mut rest = text.as_str();
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = &rest[..end];
            rest = &rest[end..];
            if target.contains("://")
                || target.starts_with('#')
                || target.starts_with("mailto:")
                || target.contains(' ')
            {
                continue;
            }
            let file = target.split('#').next().unwrap_or_default();
            n += 1;
            // It exists, and inside the repository: a reader of a clone has nothing else.
            match dir.join(file).canonicalize() {
                Ok(p) if p.starts_with(&repo) => {}
                _ => bad.push(format!("{}: ({target})", page.display())),
            }
        }
    }
    assert!(bad.is_empty(), "links to files that do not exist:\n{}", bad.join("\n"));
    assert!(n >= 20, "only {n} relative links found");
}

/// Nothing a user reads points outside the repository (#20, point 5): not
/// the README, the docs, the examples nor any command's --help.
#[test]
fn nothing_user_facing_points_outside_the_repository() {
    let outside = ["../shared", "shared/DESIGN", "DESIGN.md"];
    let mut texts: Vec<(String, String)> = pages().iter().map(|p| (p.display().to_string(), read(p))).collect();
    for entry in std::fs::read_dir(root().join("examples")).expect("examples/") {
        let p = entry.expect("entry").path();
        if p.is_file() {
            texts.push((p.display().to_string(), read(&p)));
        }
    }
    let help = spawn_perfops(&["--help"], |_| {}).wait(LIMIT);
    let commands: Vec<String> = help
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A description that wraps continues on a line indented further.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    assert!(commands.len() >= 15, "commands in --help: {commands:?}");
    texts.push(("perfops --help".into(), help.stdout));
    for c in &commands {
        let out = spawn_perfops(&[c, "--help"], |_| {}).wait(LIMIT);
        out.assert_exit(0);
        assert!(
            out.stdout.contains("\nExamples:\n  ") && out.stdout.contains(&format!("perfops {c} ")),
            "`perfops {c} --help` ends without examples"
        );
        texts.push((format!("perfops {c} --help"), out.stdout));
    }
    let bad: Vec<String> = texts
        .iter()
        .flat_map(|(name, text)| outside.iter().filter(|o| text.contains(*o)).map(move |o| format!("{name}: {o}")))
        .collect();
    assert!(bad.is_empty(), "user-facing text that points outside the repository:\n{}", bad.join("\n"));
}

#[test]
fn completions_for_every_shell() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef perfops"),
        ("fish", "complete -c perfops"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let out = spawn_perfops(&["completions", shell], |_| {}).wait(LIMIT);
        out.assert_exit(0);
        assert!(
            out.stdout.contains(marker),
            "{shell}: no `{marker}` in:\n{}",
            &out.stdout[..out.stdout.len().min(500)]
        );
        for sub in ["run", "limit", "sweep", "quick", "compare", "coordinator", "k8s"] {
            assert!(out.stdout.contains(sub), "{shell} completions do not mention `{sub}`");
        }
        assert!(out.stdout.contains("max-in-flight"), "{shell}: flags of subcommands are completed");
    }
    let bad = spawn_perfops(&["completions", "tcsh"], |_| {}).wait(LIMIT);
    bad.assert_exit(2);
}

#[test]
fn man_pages_are_roff() {
    let top = spawn_perfops(&["man"], |_| {}).wait(LIMIT);
    top.assert_exit(0);
    assert!(top.stdout.contains(".TH perfops 1"), "{}", top.stdout);
    assert!(top.stdout.contains("coordinator"), "the commands are listed");
    let run = spawn_perfops(&["man", "run"], |_| {}).wait(LIMIT);
    run.assert_exit(0);
    assert!(run.stdout.contains(".TH perfops-run 1") && run.stdout.contains("max_in_flight"), "{}", run.stdout);
    assert!(run.stdout.contains("Examples:"), "the --help examples are in the page");
    let unknown = spawn_perfops(&["man", "nope"], |_| {}).wait(LIMIT);
    unknown.assert_exit(2);
    // man(1) renders it without a warning, when it is installed.
    if std::process::Command::new("man").arg("--version").output().is_ok_and(|o| o.status.success()) {
        let work = Workdir::new("man");
        let page = work.path.join("perfops-run.1");
        std::fs::write(&page, &run.stdout).unwrap();
        let shown = std::process::Command::new("man")
            .args(["-l", &page.display().to_string()])
            .env("MANWIDTH", "100")
            .env("MAN_KEEP_FORMATTING", "0")
            .output()
            .expect("run man");
        // Without a terminal man overstrikes bold (`N\x08N`): keep the last of each pair.
        let raw = String::from_utf8_lossy(&shown.stdout);
        let mut text = String::new();
        for c in raw.chars() {
            if c == '\u{8}' {
                text.pop();
            } else {
                text.push(c);
            }
        }
        assert!(shown.status.success() && text.contains("--wait-in-flight"), "man -l: {text}");
    }
    // --out-dir writes one page per visible command.
    let work = Workdir::new("man-dir");
    let dir = work.path.join("man1");
    let all = spawn_perfops(&["man", "--out-dir", &dir.display().to_string()], |_| {}).wait(LIMIT);
    all.assert_exit(0);
    for page in ["perfops.1", "perfops-run.1", "perfops-k8s.1", "perfops-completions.1"] {
        assert!(dir.join(page).is_file(), "{page} not written into {}", dir.display());
    }
}
