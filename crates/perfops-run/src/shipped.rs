//! The files a scenario reads beside itself, as a distributed run ships
//! them: a coordinator sends them to its agents in the assignment, `perfops
//! k8s` puts them in the Secret beside the scenario. One list, gathered here
//! from a [`Scenario`] by one rule for every kind of file:
//!
//! - **By its path relative to the scenario's folder**, `/`-separated, `./`
//!   dropped: that is where an agent (or the coordinator's pod) puts it back
//!   ([`Unpacked`]), so the scenario's paths (`csv:`, `proto:`, `file:`) and
//!   a `.proto` file's imports resolve there as they did on the user's
//!   machine. A file outside the folder (`../shared/users.csv`,
//!   `/data/x.proto`) cannot be put back at the same relative path: refused,
//!   naming what names it.
//! - **Read through `perfops_core::input`**: no symbolic link followed out of
//!   the folder, regular files only, each under its kind's size cap, UTF-8.
//! - **Once each**: two feeders of one CSV file, or a `.proto` file imported
//!   twice, ship one copy.
//! - **Every path checked before any file is read**, so a file with no place
//!   beside the scenario is what is said first.
//!
//! What a scenario reads is said by [`KINDS`], a row per kind of file
//! (CSV feeders, `.proto` files, the replay's recording, script files): a new kind is a
//! row there, a cap in `input::Cap`, and the function that lists the paths
//! a scenario names. The `.proto` files are gathered by compiling the steps'
//! files (`perfops_engine::proto_sources`): what is shipped is exactly what
//! the compiler read, imports included; a step without `proto:` ships
//! nothing, each agent asks the server's reflection itself.
//!
//! Not here: what the files mean (the loaders read them back from the
//! folder as `run` does), how they travel (the fleet's wire, a Secret's
//! size limit, `k8s`'s own key for the scenario: each caller's).

use std::collections::BTreeMap;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Component, Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use perfops_core::input::{self, Cap};
use perfops_core::scenario::Scenario;

use crate::exit::UsageError;

fn usage(message: String) -> anyhow::Error {
    anyhow::Error::new(UsageError(message))
}

/// The files of one kind a scenario reads, each as (what names it, for
/// errors, e.g. data `users`; its path as the scenario resolves it: joined to its
/// folder, or where the compiler found it).
type Named = Vec<(String, PathBuf)>;

/// One kind of file a scenario reads beside itself.
struct Kind {
    /// Its cap (and its name in messages: `CSV file`).
    cap: Cap,
    /// The files of this kind `scenario`, in `folder`, reads.
    named: fn(scenario: &Scenario, folder: &Path) -> Result<Named>,
}

/// Every kind of file a scenario ships, in the order they are listed.
const KINDS: &[Kind] = &[
    Kind { cap: Cap::CSV, named: csv_files },
    Kind { cap: Cap::PROTO, named: proto_files },
    Kind { cap: Cap::REPLAY, named: replay_file },
    Kind { cap: Cap::SCRIPT, named: script_files },
];

/// The JavaScript files of `scripts:`.
fn script_files(scenario: &Scenario, folder: &Path) -> Result<Named> {
    let files = scenario.scripts.iter().flat_map(|s| s.files.iter());
    Ok(files.map(|(name, _)| ("scripts".to_owned(), folder.join(name))).collect())
}

/// The CSV files of the feeders (`data: { users: { csv: users.csv } }`).
fn csv_files(scenario: &Scenario, folder: &Path) -> Result<Named> {
    Ok(scenario.data.iter().map(|f| (format!("data `{}`", f.name), folder.join(&f.csv))).collect())
}

/// The `.proto` files of the gRPC steps (setup's too) and every file they
/// import, as the compiler read them.
fn proto_files(scenario: &Scenario, folder: &Path) -> Result<Named> {
    let mut out = Vec::new();
    let steps = scenario.setup.iter().chain(scenario.flows.iter().flat_map(|f| f.steps.iter()));
    for step in steps {
        let Some(call) = &step.grpc else { continue };
        if call.protos.is_empty() {
            continue;
        }
        let protos: Vec<PathBuf> = call.protos.iter().map(|p| folder.join(p)).collect();
        let files = perfops_engine::proto_sources(&protos).map_err(|e| usage(format!("step `{}`: {e}", step.name)))?;
        out.extend(files.into_iter().map(|path| (format!("step `{}`", step.name), path)));
    }
    Ok(out)
}

/// A replay's recording (`load: { model: replay, file: recording.csv }`).
fn replay_file(scenario: &Scenario, folder: &Path) -> Result<Named> {
    Ok(scenario.load.replay().map(|r| ("load.file".to_owned(), folder.join(&r.file))).into_iter().collect())
}

/// The files a scenario ships: path relative to its folder -> text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shipped(BTreeMap<String, String>);

impl Shipped {
    /// Every file `scenario`, whose file is in `folder`, reads besides
    /// itself (see the module doc); a usage error naming the first that
    /// cannot be shipped and why.
    pub fn gather(scenario: &Scenario, folder: &Path) -> Result<Shipped> {
        // Every path checked before any file is read: a file that has no place beside the
        // scenario is said first, whatever else is missing.
        let mut named = Vec::new();
        for kind in KINDS {
            for (by, path) in (kind.named)(scenario, folder)? {
                let rel = relative(&path, folder).ok_or_else(|| {
                    usage(format!(
                        "{by}: {} is outside the scenario's folder; a distributed run (coordinator, k8s) puts the \
                         {} back at its path relative to the scenario, so it must be inside the scenario's folder",
                        path.display(),
                        kind.cap.kind
                    ))
                })?;
                named.push((kind.cap, by, path, rel));
            }
        }
        let mut files = BTreeMap::new();
        for (cap, by, path, rel) in named {
            if files.contains_key(&rel) {
                continue;
            }
            let bytes = input::read(folder, Path::new(&rel), cap).map_err(|e| usage(format!("{by}: {e}")))?;
            let text =
                String::from_utf8(bytes).map_err(|_| usage(format!("{by}: {} is not UTF-8 text", path.display())))?;
            files.insert(rel, text);
        }
        Ok(Shipped(files))
    }

    /// The files as they travel: relative path -> text.
    pub fn into_map(self) -> BTreeMap<String, String> {
        self.0
    }

    /// The files, by relative path, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &String)> {
        self.0.iter()
    }

    /// How many bytes of paths and texts.
    pub fn bytes(&self) -> usize {
        self.0.iter().map(|(p, t)| p.len() + t.len()).sum()
    }
}

/// `path` relative to `folder`, `/`-separated, if it lies inside it.
fn relative(path: &Path, folder: &Path) -> Option<String> {
    let inside = if folder.as_os_str().is_empty() || folder == Path::new(".") {
        path
    } else {
        path.strip_prefix(folder).ok()?
    };
    safe(inside)
}

/// A relative path of plain names only (`./` dropped), `/`-separated; none
/// for one that climbs out (`..`) or starts at a root.
fn safe(path: &Path) -> Option<String> {
    let mut parts = Vec::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::Normal(p) => parts.push(p.to_str()?.to_string()),
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Shipped files put back at their relative paths under a fresh folder,
/// which stands for the scenario's folder while the plan is built (CSV
/// tables, the recording and the compiled descriptors are in memory after
/// it); removed when dropped. The folder is its owner's only (0700): a CSV
/// file may hold passwords.
pub(crate) struct Unpacked(PathBuf);

impl Unpacked {
    /// Write `files` (relative path, text) under a fresh folder of the
    /// temporary directory. A path that would leave it is refused: what
    /// arrives from a coordinator is not trusted to be what it sent.
    pub(crate) fn new<'a>(files: impl IntoIterator<Item = (&'a String, &'a String)>) -> Result<Unpacked> {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("perfops-shipped-{}-{nanos}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let unpacked = Unpacked(dir);
        for (rel, text) in files {
            let Some(clean) = safe(Path::new(rel)) else {
                anyhow::bail!("the coordinator sent a file at `{}`, outside the scenario's folder", rel.escape_debug());
            };
            let path = unpacked.0.join(clean);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
            }
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(unpacked)
    }

    /// The folder: the scenario's, for its relative paths.
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Unpacked {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn paths_relative_to_the_scenario() {
        // (file as the compiler read it, the scenario's folder, the path shipped)
        let cases = [
            ("echo.proto", "", Some("echo.proto")),   // scenario in the working directory
            ("./echo.proto", "", Some("echo.proto")), // protox's include `.`
            ("sub/protos/echo.proto", "sub", Some("protos/echo.proto")), // beside a scenario elsewhere
            ("/srv/s/common/msg.proto", "/srv/s", Some("common/msg.proto")), // an import, absolute folder
            ("sub/../other/x.proto", "sub", None),    // climbs out of the folder
            ("/etc/x.proto", "/srv/s", None),         // another folder entirely
        ];
        for (path, folder, want) in cases {
            assert_eq!(relative(Path::new(path), Path::new(folder)).as_deref(), want, "{path} in {folder:?}");
        }
    }

    #[test]
    fn unpacking_puts_files_back_and_refuses_escapes() {
        let files = [
            ("echo.proto".to_string(), "syntax = \"proto3\";".to_string()),
            ("common/msg.proto".to_string(), "// msg".to_string()),
        ];
        let u = Unpacked::new(files.iter().map(|(a, b)| (a, b))).unwrap();
        assert_eq!(std::fs::read_to_string(u.path().join("common/msg.proto")).unwrap(), "// msg");
        let dir = u.path().to_path_buf();
        drop(u);
        assert!(!dir.exists(), "removed when dropped");
        let evil = [("../../etc/x.proto".to_string(), String::new())];
        assert!(Unpacked::new(evil.iter().map(|(a, b)| (a, b))).is_err());
    }

    /// A recording of one arrival.
    const REC: &str = "# perfops replay v1\noffset_ms,flow\n0,a\n";

    /// A fresh folder holding a scenario's files, removed when dropped.
    struct Dir(PathBuf);

    impl Dir {
        fn new(name: &str) -> Dir {
            let d = std::env::temp_dir().join(format!("perfops-shipped-test-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(d.join("s/data")).unwrap();
            std::fs::write(d.join("s/users.csv"), "id\n1\n").unwrap();
            std::fs::write(d.join("s/data/pages.csv"), "path\n/\n").unwrap();
            std::fs::write(d.join("s/rec.csv"), REC).unwrap();
            std::fs::write(d.join("outside.csv"), "secret\n1\n").unwrap();
            symlink(d.join("outside.csv"), d.join("s/link.csv")).unwrap();
            std::fs::write(d.join("s/bad.csv"), b"\xff\xfe\n").unwrap();
            Dir(d)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// `data:` with the CSV paths given, and a replay of `rec.csv` when asked.
    fn scenario(csvs: &[&str], replay: Option<&str>) -> Scenario {
        let mut text = String::from("name: s\ntarget: http://127.0.0.1:1\n");
        if !csvs.is_empty() {
            text.push_str("data:\n");
            for (i, c) in csvs.iter().enumerate() {
                text.push_str(&format!("  f{i}: {{ csv: \"{c}\" }}\n"));
            }
        }
        text.push_str("flows:\n  a: { steps: [ { request: GET / } ] }\n");
        match replay {
            Some(file) => text.push_str(&format!("load: {{ model: replay, file: \"{file}\" }}\n")),
            None => text.push_str("load: { stages: [ { rate: 1, hold: 1s } ] }\n"),
        }
        perfops_core::scenario::parse_partial("s.yaml", &text, &[]).map_err(|(d, _)| d.render(&text)).unwrap()
    }

    /// What one scenario ships, every kind in one list, and what is refused.
    #[test]
    fn gathered_from_a_scenario() {
        let d = Dir::new("gather");
        let folder = d.0.join("s");
        // (feeders' csv:, replay file:, the relative paths shipped, or the words of the refusal)
        type Case<'a> = (&'a [&'a str], Option<&'a str>, Result<&'a [&'a str], &'a str>);
        let cases: &[Case<'_>] = &[
            // Nothing beside the scenario: nothing shipped.
            (&[], None, Ok(&[])),
            // Feeders and the recording in one list, by their paths relative to the folder.
            (&["users.csv", "./data/pages.csv"], Some("rec.csv"), Ok(&["data/pages.csv", "rec.csv", "users.csv"])),
            // One file named twice (two feeders, written two ways) ships once.
            (&["users.csv", "./users.csv"], None, Ok(&["users.csv"])),
            // The replay's file alone.
            (&[], Some("./rec.csv"), Ok(&["rec.csv"])),
            // A feeder outside the folder cannot be put back beside the scenario.
            (&["../outside.csv"], None, Err("data `f0`: ")),
            // Nor a recording named by an absolute path.
            (&[], Some("/etc/hostname"), Err("load.file: /etc/hostname is outside the scenario's folder")),
            // A link out of the folder is not followed.
            (&["link.csv"], None, Err("outside")),
            // A file that is not text.
            (&["bad.csv"], None, Err("is not UTF-8 text")),
            // A file that is not there.
            (&[], Some("missing.csv"), Err("load.file: ")),
        ];
        for (csvs, replay, want) in cases {
            let got = Shipped::gather(&scenario(csvs, *replay), &folder);
            match (got, want) {
                (Ok(s), Ok(paths)) => {
                    let got: Vec<&str> = s.iter().map(|(p, _)| p.as_str()).collect();
                    assert_eq!(got, *paths, "{csvs:?} {replay:?}");
                }
                (Err(e), Err(words)) => {
                    let e = format!("{e:#}");
                    assert!(e.contains(words), "{csvs:?} {replay:?}: {e}");
                    assert!(!e.contains("secret"), "{e}");
                }
                (got, _) => panic!("{csvs:?} {replay:?}: {got:?}"),
            }
        }
        // The texts are the files'.
        let s = Shipped::gather(&scenario(&["users.csv"], Some("rec.csv")), &folder).unwrap();
        assert_eq!(s.iter().find(|(p, _)| *p == "users.csv").map(|(_, t)| t.as_str()), Some("id\n1\n"));
        assert_eq!(s.bytes(), "rec.csv".len() + REC.len() + "users.csv".len() + "id\n1\n".len());
    }
}
