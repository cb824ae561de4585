//! `perfops tar DIR`: a folder as a tar archive on stdout, and
//! `perfops tar DIR --hold 1h`: a process that only waits. Together they copy
//! a run's results out of a cluster: the image has no shell and no `tar`, so
//! `kubectl cp` (which runs `tar` in the container) cannot, and `kubectl logs`
//! is not a binary-safe channel (the runtime splits and rotates log lines).
//! The fetch pod's main process holds (`--hold`), and
//! `kubectl exec POD -- perfops tar /results | tar -x -C results` streams the
//! archive through the exec stream, which carries bytes as they are.
//!
//! The archive holds the folder's contents as relative paths, in name order,
//! with their modes and modification times; owners are written as 0 so that
//! extracting never hands files to the pod's user id. A volume's `lost+found`
//! at the top is left out (it is root's, and unreadable to the pod's user).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tar::{Builder, EntryType, Header, HeaderMode};

use crate::exit::{Exit, UsageError};

/// Flags of `perfops tar`.
#[derive(Debug, Clone)]
pub struct TarArgs {
    /// The folder whose contents to archive.
    pub dir: PathBuf,
    /// Write nothing: wait this long, or until SIGTERM, for `kubectl exec
    /// POD -- perfops tar DIR` (the main process of the fetch pod).
    pub hold: Option<Duration>,
}

/// `perfops tar`: a folder as a tar archive on stdout.
pub fn run(args: TarArgs) -> Result<Exit> {
    if !args.dir.is_dir() {
        return Err(anyhow::Error::new(UsageError(format!("{} is not a folder", args.dir.display()))));
    }
    if let Some(limit) = args.hold {
        return hold(&args.dir, limit);
    }
    if io::IsTerminal::is_terminal(&io::stdout()) {
        return Err(anyhow::Error::new(UsageError(
            "perfops tar writes an archive to stdout: pipe it into `tar -x -C FOLDER`".into(),
        )));
    }
    let stdout = io::stdout().lock();
    match archive(&args.dir, io::BufWriter::with_capacity(1 << 16, stdout)) {
        Ok(()) => Ok(Exit::Passed),
        // The reader has what it wanted, as for every command.
        Err(e) if e.downcast_ref::<io::Error>().is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe) => {
            Ok(Exit::Passed)
        }
        Err(e) => Err(e),
    }
}

/// Wait until `limit` has passed or a SIGTERM/SIGINT came (as PID 1 of a
/// container, an unhandled SIGTERM would be ignored: the pod's deletion would
/// wait out its grace period).
fn hold(dir: &Path, limit: Duration) -> Result<Exit> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, stop.clone()).context("installing signal handlers")?;
    }
    note!(
        "holding for up to {:.0} s: `kubectl exec POD -- perfops tar {}` writes the archive",
        limit.as_secs_f64(),
        dir.display()
    );
    let end = Instant::now() + limit;
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(Exit::Passed)
}

/// Write `dir`'s contents as a tar archive into `out`.
pub(crate) fn archive(dir: &Path, out: impl Write) -> Result<()> {
    let mut b = Builder::new(out);
    walk(&mut b, dir, Path::new(""))?;
    let mut out = b.into_inner()?;
    out.flush()?;
    Ok(())
}

fn walk<W: Write>(b: &mut Builder<W>, root: &Path, rel: &Path) -> Result<()> {
    let dir = root.join(rel);
    let mut names: Vec<_> = fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<io::Result<_>>()
        .with_context(|| format!("reading {}", dir.display()))?;
    names.sort();
    for name in names {
        if rel.as_os_str().is_empty() && name == "lost+found" {
            continue;
        }
        let path = dir.join(&name);
        let entry = rel.join(&name);
        let meta = fs::symlink_metadata(&path).with_context(|| format!("reading {}", path.display()))?;
        let mut h = Header::new_gnu();
        h.set_metadata_in_mode(&meta, HeaderMode::Complete);
        h.set_uid(0);
        h.set_gid(0);
        let ft = meta.file_type();
        if ft.is_dir() {
            h.set_entry_type(EntryType::Directory);
            h.set_size(0);
            b.append_data(&mut h, &entry, io::empty()).with_context(|| format!("archiving {}", path.display()))?;
            walk(b, root, &entry)?;
        } else if ft.is_file() {
            let f = fs::File::open(&path).with_context(|| format!("reading {}", path.display()))?;
            b.append_data(&mut h, &entry, f).with_context(|| format!("archiving {}", path.display()))?;
        } else if ft.is_symlink() {
            let target = fs::read_link(&path).with_context(|| format!("reading {}", path.display()))?;
            h.set_size(0);
            b.append_link(&mut h, &entry, &target).with_context(|| format!("archiving {}", path.display()))?;
        } else {
            note!("{} is neither a file, a folder nor a link: left out", path.display());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What an archive holds, read back with the same crate's reader.
    fn entries(bytes: &[u8]) -> Vec<(String, EntryType, String)> {
        let mut a = tar::Archive::new(bytes);
        a.entries()
            .unwrap()
            .map(|e| {
                let mut e = e.unwrap();
                let path = e.path().unwrap().to_string_lossy().into_owned();
                let kind = e.header().entry_type();
                let mut body = String::new();
                if kind == EntryType::Link || kind == EntryType::Symlink {
                    body = e.link_name().unwrap().unwrap().to_string_lossy().into_owned();
                } else {
                    io::Read::read_to_string(&mut e, &mut body).unwrap();
                }
                assert_eq!((e.header().uid().unwrap(), e.header().gid().unwrap()), (0, 0), "{path}");
                (path, kind, body)
            })
            .collect()
    }

    /// Files, folders and links in name order, relative; `lost+found` at
    /// the top left out; a long name kept whole.
    #[test]
    fn archives_a_results_folder() {
        let root = std::env::temp_dir().join(format!("perfops-tar-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let run = root.join("20261124T180000Z-orders");
        fs::create_dir_all(&run).unwrap();
        fs::create_dir_all(root.join("lost+found")).unwrap();
        fs::write(run.join("summary.json"), "{}").unwrap();
        fs::write(run.join("meta.json"), "{\"v\":1}").unwrap();
        let long = "n".repeat(150);
        fs::write(run.join(&long), "long").unwrap();
        std::os::unix::fs::symlink("20261124T180000Z-orders", root.join("latest")).unwrap();
        let mut bytes = Vec::new();
        archive(&root, &mut bytes).unwrap();
        fs::remove_dir_all(&root).unwrap();
        let got = entries(&bytes);
        let want = vec![
            ("20261124T180000Z-orders".to_string(), EntryType::Directory, String::new()),
            ("20261124T180000Z-orders/meta.json".to_string(), EntryType::Regular, "{\"v\":1}".to_string()),
            (format!("20261124T180000Z-orders/{long}"), EntryType::Regular, "long".to_string()),
            ("20261124T180000Z-orders/summary.json".to_string(), EntryType::Regular, "{}".to_string()),
            ("latest".to_string(), EntryType::Symlink, "20261124T180000Z-orders".to_string()),
        ];
        assert_eq!(got, want);
    }
}
