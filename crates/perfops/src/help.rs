//! The CLI helping itself: the examples each command's `--help` ends with,
//! `perfops completions SHELL` (clap_complete) and `perfops man [COMMAND]`
//! (clap_mangen), all drawn from the one clap definition in `main.rs`, so a
//! flag added there is completed and documented without a second list.
//!
//! The examples are commands a user can paste: they name files under
//! `examples/` and loopback addresses. A unit test parses every one of them,
//! and every `perfops ...` line of the README and `docs/`, with the same clap
//! definition, so none names a flag or command that does not exist.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, CommandFactory};

use crate::Cli;
use crate::exit::{Exit, UsageError};

/// `perfops completions SHELL`.
#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// `perfops man [COMMAND]`.
#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// A command's own page (perfops-run(1), ...); default: perfops(1).
    command: Option<String>,
    /// Write every page (perfops.1 and perfops-COMMAND.1) into DIR instead.
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    out_dir: Option<PathBuf>,
}

/// Print the completion script for `args.shell` on stdout.
pub(crate) fn completions(args: CompletionsArgs) -> Result<Exit> {
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "perfops", &mut buf);
    perfops_run::say::out(&String::from_utf8_lossy(&buf));
    Ok(Exit::Passed)
}

/// Print a man page (roff) on stdout, or write them all into a folder.
pub(crate) fn man(args: ManArgs) -> Result<Exit> {
    let mut cli = Cli::command();
    cli.build();
    if let Some(dir) = args.out_dir {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        clap_mangen::generate_to(cli, &dir).with_context(|| format!("writing man pages into {}", dir.display()))?;
        eprintln!("perfops: man pages written into {}", dir.display());
        return Ok(Exit::Passed);
    }
    let page = match args.command {
        None => cli,
        Some(name) => {
            let Some(sub) = cli.get_subcommands().find(|c| c.get_name() == name && !c.is_hide_set()) else {
                let names: Vec<&str> =
                    cli.get_subcommands().filter(|c| !c.is_hide_set()).map(|c| c.get_name()).collect();
                return Err(UsageError(format!("no command `{name}`; one of: {}", names.join(", "))).into());
            };
            let display = format!("perfops-{name}");
            sub.clone().display_name(display).bin_name(format!("perfops {name}"))
        }
    };
    let mut buf = Vec::new();
    clap_mangen::Man::new(page).render(&mut buf).context("rendering the man page")?;
    buf.flush().ok();
    perfops_run::say::out(&String::from_utf8_lossy(&buf));
    Ok(Exit::Passed)
}

// The examples that end each command's `--help` (clap's `after_help`).

pub(crate) const RUN: &str = "\
Examples:
  perfops run examples/orders.yaml
  perfops run examples/orders.yaml --set load.steps.hold=2s --junit junit.xml
  perfops run examples/ramp.yaml --target http://127.0.0.1:8080 --out results";

pub(crate) const LIMIT: &str = "\
Examples:
  perfops limit examples/capacity.yaml
  perfops limit examples/capacity.yaml --from 50 --max 2000 --hold 5s --cooldown 10s";

pub(crate) const SWEEP: &str = "\
Examples:
  perfops sweep examples/sweep.yaml
  perfops sweep examples/sweep.yaml --concurrency 1,2,4,8,16,32 --hold 5s";

pub(crate) const SETUP: &str = "\
Examples:
  perfops setup examples/orders.yaml --target http://127.0.0.1:8080 --out values.json
  perfops run examples/orders.yaml --target http://127.0.0.1:8080 --setup-values values.json";

pub(crate) const COORDINATOR: &str = "\
Examples:
  perfops coordinator examples/orders.yaml --agents 2 --listen 127.0.0.1:7070   # generates a token, prints it
  export PERFOPS_TOKEN=$(openssl rand -hex 16)                                    # or bring one: 128 bits at least
  perfops coordinator examples/orders.yaml --agents 3 --listen 0.0.0.0:7070 --tls-cert cert.pem --tls-key key.pem

The channel is always TLS: without --tls-cert, a self-signed certificate made at start.";

pub(crate) const AGENT: &str = "\
Examples:
  PERFOPS_TOKEN=$TOKEN perfops agent --join https://127.0.0.1:7070   # the coordinator's token
  perfops agent --join https://coordinator:7070 --tls-ca ca.pem --index 1

The channel is always TLS (http:// is refused). Without --tls-ca the coordinator's certificate is not
verified: the token handshake, bound to the TLS session, proves the coordinator.";

pub(crate) const CHECK: &str = "\
Examples:
  perfops check examples/orders.yaml
  perfops check examples/*.yaml";

pub(crate) const QUICK: &str = "\
Examples:
  perfops quick -c 50 -d 10s http://127.0.0.1:8080/
  perfops quick -r 500 -d 30s http://127.0.0.1:8080/orders
  perfops quick -n 1000 -c 1 -m POST -H 'Content-Type: application/json' -b '{\"id\": 1}' http://127.0.0.1:8080/auth";

pub(crate) const REPORT: &str = "\
Examples:
  perfops report runs/20261124T230000Z-orders
  perfops report runs/20261124T230000Z-orders -o orders.html";

pub(crate) const RUNS: &str = "\
Examples:
  perfops runs
  perfops runs --dir results --json";

pub(crate) const COMPARE: &str = "\
Examples:
  perfops compare runs/*-ab-threads runs/*-ab-async
  perfops compare runs/A runs/B --json --no-html";

pub(crate) const MERGE: &str = "\
Examples:
  perfops merge a/runs/*-orders b/runs/*-orders --out merged
  perfops merge shard-0 shard-1 shard-2 --out merged --junit junit.xml";

pub(crate) const IMPORT: &str = "\
Examples:
  perfops import access-log /var/log/nginx/access.log --out imported.yaml
  perfops import access-log access.log.gz --scale 3 --target http://127.0.0.1:8080 --out x3.yaml
  perfops import har recording.har --out recorded.yaml";

pub(crate) const IMPORT_ACCESS_LOG: &str = "\
The summary (endpoints and their shares, the mean and peak rates, the lines
not read and why) goes to stderr; the scenario to --out or stdout.

Examples:
  perfops import access-log /var/log/nginx/access.log --out imported.yaml
  perfops import access-log access.log.gz --scale 3 --out x3.yaml
  perfops import access-log access.jsonl --field path=uri,time=ts --out imported.yaml
  perfops import access-log access.log -H 'Authorization: Bearer ${env.TOKEN}' --out imported.yaml
  perfops import access-log access.log --replay recorded.csv --out replay.yaml";

pub(crate) const IMPORT_HAR: &str = "\
Examples:
  perfops import har recording.har --out recorded.yaml
  perfops import har recording.har --include-host api.example.com --out recorded.yaml
  perfops import har recording.har --replay recorded.csv --out replay.yaml";

pub(crate) const DEMO: &str = "\
Routes (the same in both models):
  POST /auth          {\"user\":\"x\"} -> 200 {\"token\":...}
  GET  /orders        a page of 25 orders        (Bearer token; io_wait + cpu_work)
  GET  /me            who the token belongs to   (Bearer token; io_wait + cpu_work)
  GET  /products      the catalogue              (Bearer token; io_wait + cpu_work)
  POST /orders        {\"sku\":\"SKU-00042\",\"qty\":3} -> 201 {\"id\":...}; a qty that is no JSON
                      integer -> 422 naming the field (Bearer token; io_wait + cpu_work)
  GET  /orders/{id}   an order POSTed before     (Bearer token; io_wait + cpu_work)
  GET  /health, GET /metrics (Prometheus), GET /

Examples:
  perfops demo
  perfops demo --model async --listen 127.0.0.1:8081
  perfops demo --model threads --workers 2 --threads 5 --io-wait 50ms";

pub(crate) const SCHEMA: &str = "\
Examples:
  perfops schema > scenario.schema.json
  perfops schema --markdown > docs/scenario-reference.md";

pub(crate) const K8S: &str = "\
Examples:
  perfops k8s examples/k8s/orders.yaml --agents 3 --image registry.example.com/perfops:0.1.0 --out k8s/orders
  perfops k8s examples/k8s/orders.yaml --agents 3 --image registry.example.com/perfops:0.1.0 --namespace perfops --agent-cpu 250m --out k8s/orders";

pub(crate) const CTL: &str = "\
Exit codes: 0 applied, 1 refused by the run (e.g. no stage after this one), 2 a bad action or a
missing/wrong token, 3 nothing answered at ADDR. Off loopback the run asks for its token: set
PERFOPS_LIVE_TOKEN (never a flag: shell histories keep those).

Examples:
  perfops run examples/orders.yaml --live          # the page at http://127.0.0.1:5665/
  perfops ctl 127.0.0.1:5665 rate 300
  perfops ctl 127.0.0.1:5665 hold
  PERFOPS_LIVE_TOKEN=... perfops ctl 10.0.0.5:5665 stop";

pub(crate) const COMPLETIONS: &str = "\
Examples:
  perfops completions bash > ~/.local/share/bash-completion/completions/perfops
  perfops completions zsh > ~/.zfunc/_perfops
  perfops completions fish > ~/.config/fish/completions/perfops.fish";

pub(crate) const MAN: &str = "\
Examples:
  perfops man | man -l -
  perfops man run | man -l -
  perfops man --out-dir /usr/local/share/man/man1";

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    /// A shell line as words: quotes removed, stopped at a pipe, a
    /// redirection, `&&`, `;` or a comment. Enough for the lines docs show.
    fn words(line: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut cur = String::new();
        let mut quote: Option<char> = None;
        let mut any = false;
        for c in line.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), c) => cur.push(c),
                (None, '\'' | '"') => {
                    quote = Some(c);
                    any = true;
                }
                (None, ' ' | '\t') => {
                    if any || !cur.is_empty() {
                        out.push(std::mem::take(&mut cur));
                    }
                    any = false;
                }
                (None, '|' | '>' | ';' | '&' | '#' | '<') if cur.is_empty() && !any => break,
                (None, c) => cur.push(c),
            }
        }
        if any || !cur.is_empty() {
            out.push(cur);
        }
        out
    }

    /// Every `perfops ...` command in `text` (a help text or a Markdown
    /// file's shell code blocks), `VAR=value` prefixes and `$ ` prompts dropped,
    /// `\` continuations joined.
    fn commands(text: &str, markdown: bool) -> Vec<String> {
        let mut out = Vec::new();
        let mut in_code = !markdown;
        let mut pending = String::new();
        for line in text.lines() {
            // Shell blocks only: a `text` block shows output, not commands.
            if markdown && let Some(lang) = line.trim_start().strip_prefix("```") {
                in_code = !in_code && matches!(lang.trim(), "sh" | "bash" | "shell" | "console");
                continue;
            }
            if !in_code {
                continue;
            }
            let line = line.trim();
            if let Some(head) = line.strip_suffix('\\') {
                pending.push_str(head);
                pending.push(' ');
                continue;
            }
            let full = format!("{pending}{line}");
            pending.clear();
            let full = full.trim_start_matches("$ ");
            // `a && perfops b`, `x | perfops y`: each part that is a perfops command.
            for part in full.split("&&").flat_map(|p| p.split(" | ")).flat_map(|p| p.split("; ")) {
                let mut w = part.trim();
                while let Some((head, rest)) = w.split_once(' ') {
                    if head.contains('=') && !head.starts_with('-') {
                        w = rest.trim_start();
                    } else {
                        break;
                    }
                }
                for prefix in ["./target/release/perfops ", "perfops "] {
                    if let Some(rest) = w.strip_prefix(prefix) {
                        out.push(format!("perfops {rest}"));
                    }
                }
            }
        }
        out
    }

    fn parses(cmd: &str) -> Result<(), String> {
        // A word that is a shell expansion (`$T`, `$(date ...)`) stands for a value the
        // shell computes: one that is a number, a time (unix seconds) and a path at once.
        let argv: Vec<String> =
            words(cmd).into_iter().map(|w| if w.starts_with('$') { "1795543200".into() } else { w }).collect();
        Cli::try_parse_from(&argv).map(|_| ()).map_err(|e| {
            let text = e.to_string();
            text.lines().next().unwrap_or_default().to_string()
        })
    }

    #[test]
    fn words_split_like_a_shell() {
        let cases: [(&str, &[&str]); 5] = [
            // Plain words.
            ("perfops run a.yaml", &["perfops", "run", "a.yaml"]),
            // Single quotes keep spaces and double quotes.
            (r#"perfops quick -b '{"a": 1}' URL"#, &["perfops", "quick", "-b", r#"{"a": 1}"#, "URL"]),
            // A pipe, a redirection and a comment end the command.
            ("perfops man | man -l -", &["perfops", "man"]),
            ("perfops schema > x.json  # the schema", &["perfops", "schema"]),
            // Double quotes, an empty word.
            (r#"perfops quick -H "K: V" "" URL"#, &["perfops", "quick", "-H", "K: V", "", "URL"]),
        ];
        for (line, want) in cases {
            assert_eq!(words(line), want, "{line}");
        }
    }

    /// Every example of every `--help`: clap parses it (a renamed flag
    /// breaks this test, not the user's paste).
    #[test]
    fn help_examples_parse() {
        let all = [
            RUN,
            LIMIT,
            SWEEP,
            SETUP,
            COORDINATOR,
            AGENT,
            CHECK,
            QUICK,
            REPORT,
            RUNS,
            COMPARE,
            MERGE,
            IMPORT,
            IMPORT_ACCESS_LOG,
            IMPORT_HAR,
            DEMO,
            SCHEMA,
            K8S,
            COMPLETIONS,
            MAN,
        ];
        let mut n = 0;
        for text in all {
            for cmd in commands(text, false) {
                n += 1;
                parses(&cmd).unwrap_or_else(|e| panic!("`{cmd}` does not parse: {e}"));
            }
        }
        assert!(n >= 30, "only {n} examples found: the extraction broke");
    }

    /// Every `perfops ...` line in a shell code block of the README, docs/,
    /// docs/guide/ and examples/README.md parses with this CLI.
    #[test]
    fn documented_commands_parse() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files = vec![root.join("README.md"), root.join("examples/README.md")];
        for dir in [root.join("docs"), root.join("docs/guide")] {
            let mut docs: Vec<_> = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "md"))
                .collect();
            docs.sort();
            files.extend(docs);
        }
        let mut bad = Vec::new();
        let mut n = 0;
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            for cmd in commands(&text, true) {
                n += 1;
                if let Err(e) = parses(&cmd) {
                    bad.push(format!("{}: `{cmd}`: {e}", file.display()));
                }
            }
        }
        assert!(bad.is_empty(), "documented commands that do not parse:\n{}", bad.join("\n"));
        assert!(n >= 40, "only {n} commands found in the docs: the extraction broke");
    }
}
