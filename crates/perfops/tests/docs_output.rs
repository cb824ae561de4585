//! What the docs quote is what the program prints (#32, want 8): every
//! output block of README.md and docs/guide/ is produced again by the real
//! binary, and every message quoted in their prose is found in the source.
//!
//! **Marking a block** (the line right before its fence):
//!
//! ```text
//! <!-- perfops-output: perfops check bad.yaml; exit: 2 -->
//! <!-- perfops-output: perfops run examples/ci-gate.yaml -q; exit: 1; excerpt -->
//! <!-- illustrative: a diagram of the search, not an output -->
//! ```
//!
//! The command runs in a fresh folder holding a copy of `examples/` and of
//! `tests/docs-fixtures/` (the files a page names but does not show, like
//! `bad.yaml`); `A && B` runs A, then B, and compares B's output; a `*` in
//! an argument is expanded there. Options, after `;`:
//!
//! | option | meaning |
//! |---|---|
//! | `exit: N` | the exit code of the (last) command; default 0; `exit: any` for a block about files, whatever the verdict |
//! | `stderr` | compare stderr (default stdout); `tty` runs under a terminal (`script(1)`), stdout and stderr as one |
//! | `excerpt` | the block's lines appear in the output in this order, others left out; a line `...` says so, a line ending in `...` is cut short (it stands for a line that starts so) |
//! | `scrape` | the block is what the command's `--metrics-listen` endpoint serves two seconds into the run |
//! | `files` | the block lists a results directory: the first word of each line but the first names a file the run wrote (unless the line says `only)`), and every file it wrote is listed |
//! | `file: PATH` | compare a file the command wrote, not its output (`RUN/` is its results directory) |
//! | `json-keys` | the block is JSON (or JSON lines): every key it shows is one the file has, with a value of the same type |
//!
//! **What is masked.** Numbers (`329.2`, `-8.22`, `20261124T233656Z`'s digits, a port)
//! become `#`, a duration's unit `t` (`85.7ms` and `1.55s` are both `#t`: the
//! unit follows the size), and runs of blanks one blank: timings, dates and
//! column widths differ from one run to the next. What is left still catches
//! drift: the words, their order, the other units (`/s`, `%`, `pp`, `ms` where
//! no number leads it), punctuation, the columns and the lines. A run whose
//! verdict depends on the machine's load (a stage at the edge of the pool) is
//! tried three times before it fails; a block that drifted fails every time,
//! with a diff.
//!
//! **Prose quotes** (`achieved 193.5/s is 96.8% of the target 200.0/s (needs
//! 97%)` in slo.md) are in [`QUOTES`]: the message's format string as the
//! source spells it, which must still be in the source, and the quote, which
//! must fit it (each `{...}` any text) and still be on its page.
//!
//! `UPDATE_GOLDEN=1 cargo test -p perfops --test docs_output` rewrites each
//! marked block from the program's real output (an excerpt keeps its lines,
//! each replaced by the line it stands for); `json-keys` blocks are left as
//! they are.

mod common;
#[path = "docs_output/matching.rs"]
mod matching;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Workdir, exclusive};
use matching::{compare, compare_keys, fits, skeleton};

/// The longest one command of a marker may run.
const LIMIT: Duration = Duration::from_secs(120);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The pages whose output blocks are checked: README.md and docs/guide/*.md.
fn pages() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md")];
    let mut guide: Vec<PathBuf> = std::fs::read_dir(root().join("docs/guide"))
        .expect("docs/guide")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    guide.sort();
    out.extend(guide);
    out
}

/// How a block is marked.
#[derive(Debug, Clone, PartialEq)]
enum Mark {
    /// `<!-- perfops-output: ... -->`.
    Output(Marker),
    /// `<!-- illustrative: WHY -->`.
    Illustrative,
    /// Nothing: only a block in a language of input (`sh`, `yaml`, ...) may be so.
    None,
}

/// A parsed `perfops-output` marker.
#[derive(Debug, Clone, PartialEq, Default)]
struct Marker {
    command: String,
    /// `None`: any exit code (`exit: any`), for a block about files whatever the verdict.
    exit: Option<i32>,
    stderr: bool,
    tty: bool,
    excerpt: bool,
    file: Option<String>,
    json_keys: bool,
    files: bool,
    scrape: bool,
}

/// A fenced block of a page.
#[derive(Debug)]
struct Block {
    page: PathBuf,
    /// 0-based index of the opening fence's line.
    fence: usize,
    lang: String,
    /// The block's lines (fence indentation removed).
    lines: Vec<String>,
    mark: Mark,
}

impl Block {
    fn at(&self) -> String {
        format!("{}:{}", self.page.strip_prefix(root()).unwrap_or(&self.page).display(), self.fence + 1)
    }
}

/// The marker text of `line`, if it is a perfops-output or illustrative comment.
fn parse_mark(line: &str) -> Result<Mark, String> {
    let t = line.trim();
    let Some(inner) = t.strip_prefix("<!--").and_then(|r| r.strip_suffix("-->")).map(str::trim) else {
        return Ok(Mark::None);
    };
    if inner.starts_with("illustrative") {
        return Ok(Mark::Illustrative);
    }
    let Some(spec) = inner.strip_prefix("perfops-output:") else {
        return Ok(Mark::None);
    };
    let mut parts = spec.split(';').map(str::trim);
    let mut m = Marker { command: parts.next().unwrap_or_default().to_string(), exit: Some(0), ..Marker::default() };
    if !m.command.starts_with("perfops ") {
        return Err(format!("a marker's command starts with `perfops `: {line}"));
    }
    for opt in parts.filter(|p| !p.is_empty()) {
        let (key, value) = opt.split_once(':').map_or((opt, ""), |(k, v)| (k.trim(), v.trim()));
        match key {
            "exit" if value == "any" => m.exit = None,
            "exit" => m.exit = Some(value.parse().map_err(|_| format!("`exit: {value}` is no exit code"))?),
            "stderr" => m.stderr = true,
            "tty" => m.tty = true,
            "excerpt" => m.excerpt = true,
            "file" => m.file = Some(value.to_string()),
            "json-keys" => m.json_keys = true,
            "files" => m.files = true,
            "scrape" => m.scrape = true,
            _ => return Err(format!("unknown option `{opt}` in {line}")),
        }
    }
    Ok(Mark::Output(m))
}

/// The fenced blocks of `text`, each with the mark on the line right before its fence.
fn blocks(page: &Path, text: &str) -> Result<Vec<Block>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim_start();
        let Some(lang) = t.strip_prefix("```") else {
            i += 1;
            continue;
        };
        let indent = lines[i].len() - t.len();
        let fence = i;
        let mut body = Vec::new();
        i += 1;
        while i < lines.len() && !lines[i].trim_start().starts_with("```") {
            let cut = (lines[i].len() - lines[i].trim_start().len()).min(indent);
            body.push(lines[i][cut..].to_string());
            i += 1;
        }
        let mark = if fence > 0 { parse_mark(lines[fence - 1]) } else { Ok(Mark::None) }
            .map_err(|e| format!("{}:{fence}: {e}", page.display()))?;
        out.push(Block { page: page.to_path_buf(), fence, lang: lang.trim().to_string(), lines: body, mark });
        i += 1;
    }
    Ok(out)
}

/// Words of a command line, as a shell splits them (quotes, no variables).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    let mut any = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                any = false;
            }
            (None, c) => word.push(c),
        }
    }
    if any || !word.is_empty() {
        words.push(word);
    }
    words
}

/// `runs/*-ab-threads` in `dir`: the matching names, sorted (a `*` in the last part only).
fn glob(dir: &Path, word: &str) -> Vec<String> {
    if !word.contains('*') {
        return vec![word.to_string()];
    }
    let (parent, pattern) = word.rsplit_once('/').map_or(("", word), |(p, n)| (p, n));
    let (head, tail) = pattern.split_once('*').unwrap_or((pattern, ""));
    let mut found: Vec<String> = std::fs::read_dir(dir.join(parent))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(head) && n.ends_with(tail) && n.len() >= head.len() + tail.len())
                .map(|n| if parent.is_empty() { n } else { format!("{parent}/{n}") })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create a folder");
    for entry in std::fs::read_dir(from).expect("read a folder") {
        let p = entry.expect("entry").path();
        let dest = to.join(p.file_name().expect("a name"));
        if p.is_dir() {
            copy_dir(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).expect("copy a file");
        }
    }
}

/// What one marker's commands produced.
struct Produced {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    /// The newest results directory of the run (the folder itself if none).
    dir: PathBuf,
    /// The folder it ran in (removed when the result goes).
    work: Workdir,
}

/// Run a marker's commands in a fresh folder.
fn produce(m: &Marker) -> Produced {
    let work = Workdir::new("docs-output");
    copy_dir(&root().join("examples"), &work.path.join("examples"));
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/docs-fixtures"), &work.path);
    let bin = env!("CARGO_BIN_EXE_perfops");
    let mut last = None;
    for command in m.command.split(" && ") {
        let words = shell_words(command);
        let args: Vec<String> = words[1..].iter().flat_map(|w| glob(&work.path, w)).collect();
        let mut c = if m.tty {
            // A terminal: the live line is printed only to one. script(1) runs the command on a
            // pseudo-terminal and exits with its code (-e).
            let line = std::iter::once(bin.to_string())
                .chain(args.iter().map(|a| format!("'{}'", a.replace('\'', "'\\''"))))
                .collect::<Vec<_>>()
                .join(" ");
            let mut c = Command::new("script");
            c.args(["-qefc", &line, "/dev/null"]);
            c
        } else {
            let mut c = Command::new(bin);
            c.args(&args);
            c
        };
        c.current_dir(&work.path)
            .env("NO_COLOR", "1")
            .env("COLUMNS", "200")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("spawn perfops");
        if m.scrape {
            let scraped = scrape(&mut child);
            let (code, _, stderr) = wait(child, command);
            last = Some((code, scraped, stderr));
        } else {
            last = Some(wait(child, command));
        }
    }
    let (code, stdout, stderr) = last.expect("a command");
    let dir = glob(&work.path, "runs/*").last().map(|d| work.path.join(d)).unwrap_or_else(|| work.path.clone());
    Produced { code, stdout, stderr, dir, work }
}

/// What the `--metrics-listen` endpoint of `child` serves two seconds after it says where it is
/// (`perfops: metrics for Prometheus at URL` on stderr, which is then left to [`wait`]).
fn scrape(child: &mut std::process::Child) -> String {
    use std::io::{BufRead, Read, Write};
    let stderr = child.stderr.take().expect("piped stderr");
    let mut reader = std::io::BufReader::new(stderr);
    let mut seen = String::new();
    let url = loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return format!("(no metrics address on stderr: {seen})");
        }
        seen.push_str(&line);
        if let Some(url) = line.trim().strip_prefix("perfops: metrics for Prometheus at ") {
            break url.to_string();
        }
    };
    // The rest of stderr, drained so that the child never blocks on it.
    std::thread::spawn(move || {
        let _ = reader.read_to_end(&mut Vec::new());
    });
    std::thread::sleep(Duration::from_secs(2));
    let rest = url.strip_prefix("http://").unwrap_or(&url);
    let (addr, path) = rest.split_once('/').map_or((rest, "/"), |(a, _)| (a, "/metrics"));
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else { return format!("(no answer at {url})") };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.split_once("\r\n\r\n").map_or(answer.clone(), |(_, body)| body.to_string())
}

/// Wait for `child` at most [`LIMIT`]; its exit code, stdout and stderr.
fn wait(mut child: std::process::Child, command: &str) -> (Option<i32>, String, String) {
    use std::io::Read;
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut r) = r {
                let mut bytes = Vec::new();
                let _ = r.read_to_end(&mut bytes);
                s = String::from_utf8_lossy(&bytes).into_owned();
            }
            s
        })
    };
    let out = drain(child.stdout.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let err = drain(child.stderr.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`{command}` still running after {LIMIT:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status.code(), out.join().unwrap_or_default(), err.join().unwrap_or_default())
}

/// Terminal output as a reader sees it: escapes gone, `\r` redraws applied.
fn as_seen(text: &str) -> Vec<String> {
    let mut clean = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ params final-byte.
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        clean.push(c);
    }
    clean
        .split('\n')
        .map(|l| {
            let l = l.strip_suffix('\r').unwrap_or(l);
            l.rsplit('\r').next().unwrap_or(l).to_string()
        })
        .collect()
}

/// Check one marked block against a run; `Err(diff)` when it differs. With `update`, also the
/// block's new lines.
// With UPDATE_GOLDEN, what was rewritten goes to stderr (shown with --nocapture).
#[allow(clippy::print_stderr)]
fn check_block(m: &Marker, b: &Block, p: &Produced) -> Result<Option<Vec<String>>, String> {
    if m.exit.is_some() && p.code != m.exit {
        return Err(format!(
            "`{}` exited {:?}, the marker says {:?}\nstdout:\n{}\nstderr:\n{}",
            m.command, p.code, m.exit, p.stdout, p.stderr
        ));
    }
    let (actual, what) = match &m.file {
        Some(f) => {
            let path = match f.strip_prefix("RUN/") {
                Some(rest) => p.dir.join(rest),
                None => p.work.path.join(f),
            };
            match std::fs::read_to_string(&path) {
                Ok(t) => (t, format!("file {f}")),
                Err(e) => return Err(format!("{}: {e}", path.display())),
            }
        }
        None if m.stderr && !m.tty => (p.stderr.clone(), "stderr".to_string()),
        None => (p.stdout.clone(), if m.tty { "the terminal" } else { "stdout" }.to_string()),
    };
    if m.files {
        let listed: Vec<&str> = b.lines.iter().skip(1).filter_map(|l| l.split_whitespace().next()).collect();
        // A file written only by some runs says so: `(coordinator only)`.
        let optional = |f: &str| b.lines.iter().any(|l| l.split_whitespace().next() == Some(f) && l.contains("only)"));
        let mut written: Vec<String> = std::fs::read_dir(&p.dir)
            .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        written.sort();
        let missing: Vec<&&str> = listed.iter().filter(|f| !written.iter().any(|w| w == **f) && !optional(f)).collect();
        let unlisted: Vec<&String> = written.iter().filter(|w| !listed.contains(&w.as_str())).collect();
        return if missing.is_empty() && unlisted.is_empty() {
            Ok(None)
        } else {
            Err(format!("listed but not written: {missing:?}; written but not listed: {unlisted:?}"))
        };
    }
    if m.json_keys {
        return match compare_keys(&b.lines.join("\n"), &actual) {
            None => Ok(None),
            Some(d) => Err(d),
        };
    }
    let mut lines = as_seen(&actual);
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    let lead = lines.iter().take_while(|l| l.trim().is_empty()).count();
    lines.drain(..lead);
    let (diff, found) = compare(&b.lines, &lines, m.excerpt);
    // A rewrite changes only what drifted: a line that matches keeps its numbers, which the
    // prose around the block may quote.
    let same = |doc: &str, out: &str| {
        let (d, o) = (skeleton(doc), skeleton(out));
        d == o || d.strip_suffix("...").is_some_and(|head| !head.is_empty() && o.starts_with(head))
    };
    let rewritten: Vec<String> = if m.excerpt {
        b.lines
            .iter()
            .zip(&found)
            .map(|(l, f)| match f {
                Some(j) if !same(l, &lines[*j]) => lines[*j].clone(),
                _ => l.clone(),
            })
            .collect()
    } else {
        lines
            .iter()
            .enumerate()
            .map(|(i, out)| match b.lines.get(i) {
                Some(doc) if same(doc, out) => doc.clone(),
                _ => out.clone(),
            })
            .collect()
    };
    match diff {
        None => Ok(Some(rewritten)),
        Some(d) if std::env::var_os("UPDATE_GOLDEN").is_some() => {
            eprintln!("{}: rewritten from {what}:\n{d}", b.at());
            Ok(Some(rewritten))
        }
        Some(d) => Err(format!("{what} of `{}` (- the docs, + the program; numbers masked):\n{d}", m.command)),
    }
}

fn all_blocks() -> Vec<Block> {
    let mut out = Vec::new();
    let mut bad = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("read a page");
        match blocks(&page, &text) {
            Ok(b) => out.extend(b),
            Err(e) => bad.push(e),
        }
    }
    assert!(bad.is_empty(), "markers that do not parse:\n{}", bad.join("\n"));
    out
}

/// Languages a block of which is something to type, not something shown (`csv`: a file to
/// write, a feeder's or a replay's; `js`: a scenario's script).
const INPUT_LANGS: [&str; 8] = ["sh", "yaml", "bash", "promql", "dockerfile", "toml", "csv", "js"];

/// Every block that shows an output is marked: checked against the program, or illustrative.
#[test]
fn every_output_block_is_marked() {
    let blocks = all_blocks();
    let unmarked: Vec<String> = blocks
        .iter()
        .filter(|b| b.mark == Mark::None && !INPUT_LANGS.contains(&b.lang.as_str()))
        .map(|b| format!("{} (```{})", b.at(), b.lang))
        .collect();
    assert!(
        unmarked.is_empty(),
        "output blocks without `<!-- perfops-output: COMMAND -->` or `<!-- illustrative: WHY -->` on the line \
         before their fence:\n{}",
        unmarked.join("\n")
    );
    let checked = blocks.iter().filter(|b| matches!(b.mark, Mark::Output(_))).count();
    let illustrative = blocks.iter().filter(|b| b.mark == Mark::Illustrative).count();
    // Illustrative is for what no loopback run can print (diagrams, a formula): few.
    assert!(checked >= 12 && illustrative <= 8, "{checked} blocks checked, {illustrative} illustrative");
}

/// Each marked block is what its command prints (numbers masked); UPDATE_GOLDEN=1 rewrites them.
#[test]
fn marked_blocks_are_what_the_program_prints() {
    let _cpu = exclusive();
    let blocks = all_blocks();
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut failures = Vec::new();
    // (page, fence, new lines) to write back, with UPDATE_GOLDEN.
    let mut rewrites: Vec<(PathBuf, usize, Vec<String>)> = Vec::new();
    // One run serves every block that names the same command.
    let mut runs: Vec<(String, Produced)> = Vec::new();
    for b in &blocks {
        let Mark::Output(m) = &b.mark else { continue };
        let key = format!("{}{}", m.command, if m.tty { " (tty)" } else { "" });
        if !runs.iter().any(|(k, _)| *k == key) {
            runs.push((key.clone(), produce(m)));
        }
        let index = runs.iter().position(|(k, _)| *k == key).expect("just run");
        let mut result = check_block(m, b, &runs[index].1);
        for _ in 0..2 {
            if result.is_ok() || update {
                break;
            }
            // Again, fresh: a verdict at the edge of the pool may land the other way on a busy
            // machine; a drifted block differs every time.
            runs[index].1 = produce(m);
            result = check_block(m, b, &runs[index].1);
        }
        match result {
            Ok(Some(lines)) if update && lines != b.lines => rewrites.push((b.page.clone(), b.fence, lines)),
            Ok(_) => {}
            Err(d) => failures.push(format!("{}: {d}", b.at())),
        }
    }
    // Bottom-up per page, so that earlier fences keep their line numbers.
    rewrites.sort_by(|a, b| (&a.0, b.1).cmp(&(&b.0, a.1)));
    for (page, fence, lines) in rewrites {
        let text = std::fs::read_to_string(&page).expect("read");
        let mut all: Vec<String> = text.lines().map(str::to_string).collect();
        let indent: String = all[fence].chars().take_while(|c| c.is_whitespace()).collect();
        let end = (fence + 1..all.len()).find(|&i| all[i].trim_start().starts_with("```")).expect("a closing fence");
        all.splice(fence + 1..end, lines.into_iter().map(|l| if l.is_empty() { l } else { format!("{indent}{l}") }));
        std::fs::write(&page, all.join("\n") + "\n").expect("write the page");
    }
    assert!(
        failures.is_empty(),
        "blocks of the docs that the program does not print (UPDATE_GOLDEN=1 rewrites them):\n\n{}",
        failures.join("\n\n")
    );
}

/// Messages quoted in prose: (the format string as the source spells it, the page, the quote).
/// Each `{...}` of the format string stands for any text.
const QUOTES: &[(&str, &str, &str)] = &[
    (
        "achieved {:.1}/s is {}% of {of} (needs {:.0}%)",
        "docs/guide/slo.md",
        "achieved 193.5/s is 96.8% of the target 200.0/s (needs 97%)",
    ),
    (
        "achieved {:.1}/s is {}% of {of} (needs {:.0}%)",
        "docs/guide/diagnoses.md",
        "achieved 193.5/s is 96.8% of the target 200.0/s (needs 97%)",
    ),
    (
        "liveness probe tripped at t={t:.0}s: Kubernetes would restart the pod",
        "docs/guide/diagnoses.md",
        "liveness probe tripped at t=42s: Kubernetes would restart the pod",
    ),
    (
        "readiness probe tripped at t={t:.0}s: Kubernetes would stop sending it traffic",
        "docs/guide/diagnoses.md",
        "readiness probe tripped at t=42s: Kubernetes would stop sending it traffic",
    ),
    ("the generator used {:.0}% of its CPU", "docs/guide/diagnoses.md", "the generator used 95% of its CPU"),
    (
        "{} arrivals dropped at max_in_flight: the stage did not get its load, the generator was the limit",
        "docs/guide/diagnoses.md",
        "120 arrivals dropped at max_in_flight: the stage did not get its load, the generator was the limit",
    ),
    (
        "{} arrivals were also dropped at max_in_flight: it failed under less load than planned",
        "docs/guide/diagnoses.md",
        "120 arrivals were also dropped at max_in_flight: it failed under less load than planned",
    ),
    ("PASSED: every stage held", "docs/guide/diagnoses.md", "PASSED: every stage held"),
    (
        "output {}: {lost} of {} second{} not delivered to {} ({})",
        "docs/guide/prometheus-grafana.md",
        "output prometheus-rw: 12 of 61 seconds not delivered to http://127.0.0.1:9090/api/v1/write (HTTP 503 Service Unavailable, 7 tries)",
    ),
    (
        "holds at least {}/s (the highest rate tried)",
        "docs/guide/diagnoses.md",
        "holds at least 800/s (the highest rate tried)",
    ),
    ("no rate held, down to {}/s{}", "docs/guide/diagnoses.md", "no rate held, down to 3.1/s"),
    ("best measured {:.1}/s at {} users", "docs/guide/diagnoses.md", "best measured 192.0/s at 8 users"),
    ("aborting: {reason}", "docs/guide/slo.md", "aborting: `p50 > 5ms for 2s` held for 2 s (t=0s..2s)"),
    (
        "{bn} holds {ratio:.1}x the capacity of {an}: {figures}",
        "README.md",
        "B async holds 4.0x the capacity of A threads: 800/s vs 200/s",
    ),
];

/// Every source file of the workspace's crates, as one text to search.
fn sources() -> String {
    fn walk(dir: &Path, out: &mut String) {
        for entry in std::fs::read_dir(dir).expect("a source folder") {
            let p = entry.expect("entry").path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push_str(&std::fs::read_to_string(&p).expect("read a source"));
            }
        }
    }
    let mut out = String::new();
    for entry in std::fs::read_dir(root().join("crates")).expect("crates/") {
        let src = entry.expect("entry").path().join("src");
        if src.is_dir() {
            walk(&src, &mut out);
        }
    }
    out
}

/// Quoted messages are still printed as quoted: the format string in the source, the quote on
/// its page, the quote fitting the format (#32: slo.md and getting-started quoted rate
/// messages the program no longer printed).
#[test]
fn quoted_messages_are_in_the_source() {
    let src = sources();
    let mut bad = Vec::new();
    for (format, page, quote) in QUOTES {
        if !src.contains(&format!("\"{format}\"")) {
            bad.push(format!("the source prints no longer `{format}` (quoted in {page}: `{quote}`)"));
        }
        let text = std::fs::read_to_string(root().join(page)).expect("read a page");
        // Prose wraps: a quote may run over two lines.
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if !flat.contains(quote) {
            bad.push(format!("{page} no longer quotes `{quote}`: remove it from QUOTES"));
        }
        if !fits(format, quote) {
            bad.push(format!("{page}: `{quote}` is not what `{format}` prints"));
        }
    }
    assert!(bad.is_empty(), "quoted messages out of step with the program:\n{}", bad.join("\n"));
}

/// The comparison itself, one case per kind of drift (and of what is no drift).
#[test]
fn comparison_masks_numbers_and_catches_drift() {
    let v = |s: &str| s.lines().map(str::to_string).collect::<Vec<_>>();
    let run = "stage  target/s  achieved\n100/s     100.0      98.0  holds\n300/s     300.0     197.0  FAILS\n";
    let cases: [(&str, &str, bool, bool); 13] = [
        // A duration reads in the unit its size calls for: 85.7ms then 1.55s is no drift...
        ("p99 85.7ms", "p99 1.55s", false, true),
        // ... but a rate where a duration was is.
        ("p99 85.7ms", "p99 1.55/s", false, false),
        // A line cut short with `...` stands for the line that starts so.
        ("stage target/s achieved\n300/s 300.0 1...", run, true, true),
        ("stage target/s achieved\n300/s 300.0 1... holds", run, true, false),
        // Other numbers, other widths: the same output.
        ("stage target/s achieved\n100/s 100.0 99.5 holds\n300/s 300.0 201.0 FAILS", run, false, true),
        // A word changed (a renamed verdict): drift.
        ("stage target/s achieved\n100/s 100.0 98.0 passes\n300/s 300.0 197.0 FAILS", run, false, false),
        // A unit changed: drift.
        ("stage target/s achieved\n100/s 100.0 98.0ms holds\n300/s 300.0 197.0 FAILS", run, false, false),
        // A column gone: drift.
        ("stage target/s\n100/s 100.0 holds\n300/s 300.0 FAILS", run, false, false),
        // A line too many or too few in a whole block: drift.
        ("stage target/s achieved\n100/s 100.0 98.0 holds", run, false, false),
        // The same as an excerpt: fine.
        ("stage target/s achieved\n100/s 100.0 98.0 holds", run, true, true),
        // An excerpt keeps the order of the output.
        ("300/s 300.0 197.0 FAILS\nstage target/s achieved", run, true, false),
        // `...` marks lines left out.
        ("stage target/s achieved\n...\n300/s 300.0 197.0 FAILS", run, true, true),
        // A number where there was a word is drift too (`#/s` is not `#ms`).
        ("stage target/s achieved\n100/s 100.0 98.0 holds\n300ms 300.0 197.0 FAILS", run, true, false),
    ];
    for (i, (doc, out, excerpt, same)) in cases.iter().enumerate() {
        let (diff, _) = compare(&v(doc), &v(out), *excerpt);
        assert_eq!(diff.is_none(), *same, "case {i}: {diff:?}");
        if let Some(d) = diff {
            let marked = d.lines().any(|l| l.starts_with("- ") || l.starts_with("+ "));
            assert!(marked, "case {i}: a diff marks the lines that differ: {d}");
        }
    }
    // Markers: (line, what it parses to).
    let m = |s: &str| parse_mark(s);
    assert_eq!(m("<!-- illustrative: a diagram -->"), Ok(Mark::Illustrative));
    assert_eq!(m("plain text"), Ok(Mark::None));
    let Ok(Mark::Output(o)) = m("<!-- perfops-output: perfops check bad.yaml; exit: 2; excerpt -->") else {
        panic!("a marker parses")
    };
    assert_eq!((o.command.as_str(), o.exit, o.excerpt, o.stderr), ("perfops check bad.yaml", Some(2), true, false));
    assert!(m("<!-- perfops-output: perfops run x.yaml; colour -->").is_err(), "an unknown option is an error");
    assert!(m("<!-- perfops-output: ls -l -->").is_err(), "only perfops is run");
    // Quotes: (format, quote, fits).
    for (format, quote, ok) in [
        (
            "achieved {:.1}/s is {}% of {of} (needs {:.0}%)",
            "achieved 9.2/s is 92% of the target 10.0/s (needs 97%)",
            true,
        ),
        // The old wording of the rate message no longer fits.
        ("achieved {:.1}/s is {}% of {of} (needs {:.0}%)", "achieved 92% of the target (needs 97%)", false),
        ("no rate held, down to {}/s{}", "no rate held, down to 0.6/s", true),
        ("PASSED: every stage held", "PASSED: every stage held; holds 300/s", false),
    ] {
        assert_eq!(fits(format, quote), ok, "`{quote}` against `{format}`");
    }
}
