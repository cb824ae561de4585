//! The `.proto` files a distributed run ships with its scenario (#14): a
//! coordinator sends them to its agents in the assignment, `perfops k8s`
//! puts them in the Secret beside the scenario, as both do with CSV
//! files. Each goes by its path relative to the scenario's folder, which
//! is where an agent (or the coordinator's pod) puts it back, so the
//! scenario's `proto:` paths and the files' own imports resolve there as
//! they did on the user's machine.
//!
//! Gathered by compiling the steps' files (`perfops_engine::proto_sources`):
//! what is shipped is exactly what the compiler read, imports included. A
//! file outside the scenario's folder cannot be put back at the same
//! relative path, so it is refused, with the reason. A step without
//! `proto:` ships nothing: each agent asks the server's reflection itself.

use std::path::{Component, Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use perfops_core::input::{self, Cap};
use perfops_core::scenario::Scenario;

use crate::exit::UsageError;

fn usage(message: String) -> anyhow::Error {
    anyhow::Error::new(UsageError(message))
}

/// Every `.proto` file the scenario's gRPC steps (setup's too) read, once
/// each, as (path relative to `folder` with `/` separators, text), in the
/// order first read.
pub(crate) fn gather(scenario: &Scenario, folder: &Path) -> Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::new();
    let steps = scenario.setup.iter().chain(scenario.flows.iter().flat_map(|f| f.steps.iter()));
    for step in steps {
        let Some(call) = &step.grpc else { continue };
        if call.protos.is_empty() {
            continue;
        }
        let protos: Vec<PathBuf> = call.protos.iter().map(|p| folder.join(p)).collect();
        let files = perfops_engine::proto_sources(&protos).map_err(|e| usage(format!("step `{}`: {e}", step.name)))?;
        for path in files {
            let rel = relative(&path, folder).ok_or_else(|| {
                usage(format!(
                    "step `{}`: {} is outside the scenario's folder: a distributed run (coordinator, k8s) ships the \
                     .proto files at their paths relative to the scenario, so they must be inside its folder",
                    step.name,
                    path.display()
                ))
            })?;
            if out.iter().any(|(p, _)| *p == rel) {
                continue;
            }
            // As the compiler read it (#31): inside the scenario's folder, a regular file, capped.
            let bytes = input::read(folder, Path::new(&rel), Cap::PROTO).map_err(|e| usage(e.to_string()))?;
            let text = String::from_utf8(bytes).with_context(|| format!("reading {}", path.display()))?;
            out.push((rel, text));
        }
    }
    Ok(out)
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

/// A folder of shipped `.proto` files, put back at their relative paths;
/// removed when dropped (the compiled descriptors are in memory by then).
pub(crate) struct Unpacked(PathBuf);

impl Unpacked {
    /// Write `files` (relative path, text) under a fresh folder of the
    /// temporary directory. A path that would leave it is refused.
    pub(crate) fn new<'a>(files: impl IntoIterator<Item = (&'a String, &'a String)>) -> Result<Unpacked> {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("perfops-protos-{}-{nanos}", std::process::id()));
        let unpacked = Unpacked(dir);
        for (rel, text) in files {
            let Some(clean) = safe(Path::new(rel)) else {
                anyhow::bail!("the coordinator sent a .proto file at `{rel}`, outside the scenario's folder");
            };
            let path = unpacked.0.join(clean);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
            }
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(unpacked)
    }

    /// The folder: the scenario's, for its `proto:` paths.
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
}
