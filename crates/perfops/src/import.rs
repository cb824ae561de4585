//! `perfops import access-log|har FILE`: glue around `perfops_import`. The
//! library reads the file and returns the scenario, its feeders and a
//! summary; this writes them (the scenario to `--out` or standard output, the
//! feeders beside it) and prints the summary on stderr.
//!
//! Exit codes: 0 written, 2 the input (or a flag) is wrong, 3 a file could
//! not be written.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use perfops_import::{ImportError, Imported};
use perfops_run::exit::{Exit, UsageError};

use crate::cli::import::{ImportCommand, ImportFlags, OutFlags};

/// Run `perfops import ...`.
pub(crate) fn run(flags: ImportFlags) -> Result<Exit> {
    let (imported, out) = match flags.what {
        ImportCommand::AccessLog(f) if f.replay.is_some() => {
            let prefix = data_prefix(&f.out);
            let (file, options) = f.options(prefix).map_err(UsageError)?;
            let name = options.replay.clone().unwrap_or_default();
            let imported = replay(&folder(f.out.out.as_deref()).join(name), |out| {
                perfops_import::access_log::import_replay(&file, &options, out)
            })?;
            return write(&imported, f.out.out.as_deref());
        }
        ImportCommand::Har(f) if f.replay.is_some() => {
            let (file, options) = f.options().map_err(UsageError)?;
            let name = f.replay.clone().unwrap_or_default();
            let imported = replay(&folder(f.out.out.as_deref()).join(&name), |out| {
                perfops_import::har::replay::import_replay(&file, &options, &name, out)
            })?;
            return write(&imported, f.out.out.as_deref());
        }
        ImportCommand::AccessLog(f) => {
            let prefix = data_prefix(&f.out);
            let (file, options) = f.options(prefix).map_err(UsageError)?;
            (perfops_import::access_log::import(&file, &options), f.out)
        }
        ImportCommand::Har(f) => {
            let (file, options) = f.options().map_err(UsageError)?;
            (perfops_import::har::import(&file, &options), f.out)
        }
    };
    let imported = imported.map_err(|e: ImportError| UsageError(e.to_string()))?;
    write(&imported, out.out.as_deref())
}

/// `--replay`: the scenario, and the replay file `import` writes, written to
/// a temporary file beside `path`, renamed to it once whole (a file cut short
/// is never left where `run` would read it).
fn replay(
    path: &Path,
    import: impl FnOnce(
        std::io::BufWriter<std::fs::File>,
    ) -> Result<(Imported, perfops_import::replay::Written), ImportError>,
) -> Result<Imported> {
    let name = path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let file = std::fs::File::create(&tmp).with_context(|| format!("writing {}", tmp.display()))?;
    let result = import(std::io::BufWriter::new(file));
    let imported = match result {
        Ok((imported, _)) => imported,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(match e {
                ImportError::Replay(_) => anyhow::anyhow!("{e} ({})", path.display()),
                e => UsageError(e.to_string()).into(),
            });
        }
    };
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    let mut imported = imported;
    imported.summary.push(format!("wrote {}", path.display()));
    Ok(imported)
}

/// The folder the scenario (and what goes beside it) is written to.
fn folder(out: Option<&Path>) -> PathBuf {
    let dir: PathBuf = out.and_then(Path::parent).map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir }
}

/// What the feeders' file names start with: the scenario file's stem, or `import` on stdout.
fn data_prefix(out: &OutFlags) -> String {
    out.out
        .as_deref()
        .and_then(Path::file_stem)
        .map_or_else(|| "import".to_string(), |s| s.to_string_lossy().into_owned())
}

fn write(imported: &Imported, out: Option<&Path>) -> Result<Exit> {
    let dir = folder(out);
    let mut lines: Vec<String> = imported.summary.iter().map(|l| format!("  {l}")).collect();
    for f in &imported.files {
        // The names are ours (`STEM-WORDS.csv`); a separator in one would be a bug, not a path to follow.
        if f.name.contains(['/', '\\']) || f.name.starts_with('.') {
            anyhow::bail!("refusing to write a feeder named {:?}", f.name);
        }
        let path = dir.join(&f.name);
        std::fs::write(&path, &f.text).with_context(|| format!("writing {}", path.display()))?;
        lines.push(format!("  wrote {}", path.display()));
    }
    let yaml = imported.draft.render();
    match out {
        Some(path) => {
            std::fs::write(path, &yaml).with_context(|| format!("writing {}", path.display()))?;
            lines.push(format!("  wrote {}", path.display()));
        }
        None => perfops_run::say::out(&yaml),
    }
    let joined = lines.join("\n");
    let text = perfops_core::printable::lines(&joined);
    perfops_run::say::tell(&format!("perfops import:\n{text}\n"));
    Ok(Exit::Passed)
}
