//! Opening a file that someone else may have prepared (#31): a results
//! directory handed over for `report`, `compare`, `runs` or `merge`; a CSV
//! feeder or a `.proto` file beside a scenario. Every such file goes through
//! [`read`] (or [`read_beside`] for a path a scenario writes), which holds
//! one rule:
//!
//! - **Inside its folder.** The path is resolved (every symbolic link along
//!   it followed) and must still lie inside the folder it is read from. A
//!   link that stays inside (`users.csv -> data/users-2026.csv`) is read; a
//!   link out of it (`scenario.yaml -> /etc/passwd`, `series.jsonl ->
//!   /dev/zero`) is refused, naming the file, where it leads and the rule.
//!   The resolved path is then opened with `O_NOFOLLOW`, so a link swapped
//!   in for the last component between the check and the open is refused
//!   too. (A folder swapped for a link in that instant is not caught: the
//!   rule is about files handed over, not a race with a local attacker.)
//! - **Regular files only.** A FIFO, a socket, a device or a folder is
//!   refused before it is opened (`symlink_metadata` of the resolved path),
//!   and the open itself is `O_NONBLOCK`, with `fstat` after it, so that a
//!   FIFO put there in between can neither block the open nor be read:
//!   nothing here waits on a writer that never comes.
//! - **A size cap per kind** ([`Cap`]), checked on the open file's size and
//!   again while reading (a file that grows past it is refused, never read
//!   without end). The caps are far above what real runs write; each says
//!   what it is measured against.
//!
//! This is the one module of the core that touches the file system: it
//! stands here because every reader (perfops-report's results readers, the
//! binary's feeders, the engine's `.proto` compiler) depends on the core
//! and on nothing else in common. It opens and reads; what the bytes mean
//! is the caller's business.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

const MIB: u64 = 1024 * 1024;

/// The largest file of one kind that is read. Each is far above what a real
/// run or scenario holds: a cap is there to stop an endless or hostile file,
/// never a real one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cap {
    /// What the file is, for the error (`results file`, `CSV file`).
    pub kind: &'static str,
    /// The most bytes read.
    pub max_bytes: u64,
}

impl Cap {
    /// `series.jsonl`, `watch.jsonl`, `probe.jsonl`: 2 GiB. A second of
    /// `series.jsonl` is under 1 KiB with one step (777 bytes at most in the
    /// committed fixture of a stepped run), a few KiB with many: a 24 h run
    /// (86,400 lines) writes under 100 MiB, and would still fit at 24 KiB a
    /// line. Watch and probe lines are smaller and fewer.
    pub const RESULTS_STREAM: Cap = Cap { kind: "results file", max_bytes: 2048 * MIB };
    /// `latency.hlog`: 4 GiB. Two compressed histograms a second of about
    /// 300 bytes each (the fixture: 38 KiB for 62 seconds): a
    /// 24 h run writes about 50 MiB; a wide-ranged histogram is larger, never
    /// 80 times so.
    pub const RESULTS_HLOG: Cap = Cap { kind: "results file", max_bytes: 4096 * MIB };
    /// `meta.json`, `summary.json`, `scenario.yaml` of a results directory:
    /// 64 MiB. They hold a few KiB to a few MiB (a summary per stage).
    pub const RESULTS_DOCUMENT: Cap = Cap { kind: "results file", max_bytes: 64 * MIB };
    /// A CSV feeder: 256 MiB, a table held in memory whole (a million rows
    /// of 100 bytes is 100 MiB).
    pub const CSV: Cap = Cap { kind: "CSV file", max_bytes: 256 * MIB };
    /// A replay file: 256 MiB, read whole and kept as 8 bytes an arrival
    /// (~10 million arrivals of 25 bytes a line), plus its value columns.
    pub const REPLAY: Cap = Cap { kind: "replay file", max_bytes: 256 * MIB };
    /// A `.proto` file: 16 MiB (the largest public ones are a few hundred KiB).
    pub const PROTO: Cap = Cap { kind: ".proto file", max_bytes: 16 * MIB };
    /// A script file (`scripts:`): 16 MiB, evaluated once per worker (a hand-written hook is a few KiB).
    pub const SCRIPT: Cap = Cap { kind: "script file", max_bytes: 16 * MIB };
}

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// Not there, not permitted, or another error of the system.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file, as asked for.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// A symbolic link (on the way or at the end) leads out of the folder.
    #[error(
        "{} is a symbolic link that leads out of {} (to {}): a {} is read only inside its folder",
        path.display(), folder.display(), target.display(), cap.kind
    )]
    Outside {
        /// The file, as asked for.
        path: PathBuf,
        /// The folder it must stay in.
        folder: PathBuf,
        /// Where the links lead.
        target: PathBuf,
        /// What kind of file it was read as.
        cap: Cap,
    },
    /// A FIFO, socket, device or folder.
    #[error("{} is {what}, not a regular file: a {} is read only as a regular file", path.display(), cap.kind)]
    NotRegular {
        /// The file, as asked for.
        path: PathBuf,
        /// `a FIFO`, `a device`, ...
        what: &'static str,
        /// What kind of file it was read as.
        cap: Cap,
    },
    /// Larger than its kind's cap.
    #[error("{} is larger than {}, the most perfops reads of a {}", path.display(), size(cap.max_bytes), cap.kind)]
    TooLarge {
        /// The file, as asked for.
        path: PathBuf,
        /// Its cap.
        cap: Cap,
    },
}

impl InputError {
    /// Whether the file is simply not there (a reader may treat it as absent).
    pub fn is_not_found(&self) -> bool {
        matches!(self, InputError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

impl From<InputError> for io::Error {
    /// For readers that speak `io::Error` (the CSV feeders' callback): the
    /// kind is kept where there is one, the message always.
    fn from(e: InputError) -> io::Error {
        let kind = match &e {
            InputError::Io { source, .. } => source.kind(),
            InputError::TooLarge { .. } => io::ErrorKind::FileTooLarge,
            InputError::Outside { .. } | InputError::NotRegular { .. } => io::ErrorKind::PermissionDenied,
        };
        io::Error::new(kind, Message(e.to_string()))
    }
}

/// `16 MiB`, or bytes below one MiB.
fn size(bytes: u64) -> String {
    if bytes >= MIB { format!("{} MiB", bytes / MIB) } else { format!("{bytes} bytes") }
}

/// An error whose text is the whole message (`io::Error::new` with a
/// `String` would do, but says nothing of why).
#[derive(Debug)]
struct Message(String);

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Message {}

/// The bytes of `folder/name`, under the rule of this module and `cap`.
/// `name` is relative to `folder` (a plain name or a path below it).
pub fn read(folder: &Path, name: &Path, cap: Cap) -> Result<Vec<u8>, InputError> {
    let folder = if folder.as_os_str().is_empty() { Path::new(".") } else { folder };
    let path = folder.join(name);
    let io_err = |source| InputError::Io { path: path.clone(), source };
    let real = fs::canonicalize(&path).map_err(io_err)?;
    let root = fs::canonicalize(folder).map_err(io_err)?;
    if !real.starts_with(&root) {
        return Err(InputError::Outside { path, folder: folder.to_path_buf(), target: real, cap });
    }
    // Before the open: a device is never opened (opening one may do things).
    let before = fs::symlink_metadata(&real).map_err(io_err)?;
    if let Some(what) = not_regular(&before.file_type()) {
        return Err(InputError::NotRegular { path, what, cap });
    }
    let file = OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(&real).map_err(
        |e| match e.raw_os_error() {
            // O_NOFOLLOW met a link put there since the check.
            Some(libc::ELOOP) => {
                InputError::Outside { path: path.clone(), folder: folder.to_path_buf(), target: real.clone(), cap }
            }
            _ => io_err(e),
        },
    )?;
    let meta = file.metadata().map_err(io_err)?;
    if let Some(what) = not_regular(&meta.file_type()) {
        return Err(InputError::NotRegular { path, what, cap });
    }
    if meta.len() > cap.max_bytes {
        return Err(InputError::TooLarge { path, cap });
    }
    read_capped(file, meta.len(), cap).map_err(|e| match e {
        None => InputError::TooLarge { path: path.clone(), cap },
        Some(e) => io_err(e),
    })
}

/// A file a scenario names (`csv: data/users.csv`, `proto: echo.proto`, an
/// import), `rel` as written and relative to `scenario_folder`. What the
/// scenario writes is taken as written, since a reader of the scenario sees
/// it: a path below the scenario's folder is read inside that folder; one
/// written outside it (`../shared/users.csv`, `/data/users.csv`) inside
/// the folder it names. Links are followed only where they stay inside.
pub fn read_beside(scenario_folder: &Path, rel: &Path, cap: Cap) -> Result<Vec<u8>, InputError> {
    let below = rel.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if below {
        return read(scenario_folder, rel, cap);
    }
    let path = scenario_folder.join(rel);
    let (folder, name) = match (path.parent(), path.file_name()) {
        (Some(folder), Some(name)) => (folder.to_path_buf(), PathBuf::from(name)),
        // `..` or `/` as a file: let the system say what it is.
        _ => (PathBuf::from("/"), path.clone()),
    };
    read(&folder, &name, cap)
}

/// The file's contents, at most `cap.max_bytes`; `Err(None)`: more than that.
fn read_capped(file: File, len_hint: u64, cap: Cap) -> Result<Vec<u8>, Option<io::Error>> {
    let mut out = Vec::with_capacity(usize::try_from(len_hint.min(cap.max_bytes)).unwrap_or(0));
    file.take(cap.max_bytes + 1).read_to_end(&mut out).map_err(Some)?;
    if out.len() as u64 > cap.max_bytes {
        return Err(None);
    }
    Ok(out)
}

/// What a file that is not regular is, in words.
fn not_regular(t: &fs::FileType) -> Option<&'static str> {
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a folder")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_socket() {
        Some("a socket")
    } else if t.is_char_device() || t.is_block_device() {
        Some("a device")
    } else if t.is_symlink() {
        Some("a symbolic link")
    } else {
        Some("not a regular file")
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    /// A fresh folder under the temporary directory, removed when dropped.
    struct Dir(PathBuf);

    impl Dir {
        fn new(name: &str) -> Dir {
            let d = std::env::temp_dir().join(format!("perfops-input-{name}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&d);
            fs::create_dir_all(d.join("sub")).unwrap();
            fs::write(d.join("ok.txt"), "hello").unwrap();
            fs::write(d.join("sub/deep.txt"), "deep").unwrap();
            Dir(d)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn mkfifo(path: &Path) {
        let made = std::process::Command::new("mkfifo").arg(path).status().expect("mkfifo runs");
        assert!(made.success(), "mkfifo {}", path.display());
    }

    const SMALL: Cap = Cap { kind: "test file", max_bytes: 8 };

    /// One folder with every kind of entry; each read under the rule.
    #[test]
    fn the_rule_per_kind_of_entry() {
        let d = Dir::new("rule");
        let p = &d.0;
        symlink("ok.txt", p.join("link-inside")).unwrap();
        symlink("sub/deep.txt", p.join("link-down")).unwrap();
        symlink("/etc/passwd", p.join("link-out")).unwrap();
        symlink("/dev/zero", p.join("zero")).unwrap();
        symlink("../ok.txt", p.join("sub/link-up-inside")).unwrap();
        symlink(p.parent().unwrap(), p.join("dir-out")).unwrap();
        symlink("missing", p.join("dangling")).unwrap();
        fs::write(p.join("nine.txt"), "123456789").unwrap();
        mkfifo(&p.join("fifo"));
        // (name, Ok(contents) or the start of the error's kind)
        let cases: [(&str, Result<&str, &str>); 12] = [
            ("ok.txt", Ok("hello")),        // a plain file
            ("sub/deep.txt", Ok("deep")),   // a path below the folder
            ("link-inside", Ok("hello")),   // a link that stays inside
            ("link-down", Ok("deep")),      // a link into a sub-folder
            ("link-out", Err("outside")),   // a link to a system file
            ("zero", Err("outside")),       // a link to an endless device
            ("dir-out/x", Err("io")),       // through a linked folder, to nothing
            ("dangling", Err("io")),        // a link to nothing: not found
            ("fifo", Err("not regular")),   // a FIFO: refused without blocking
            ("sub", Err("not regular")),    // a folder
            ("nine.txt", Err("too large")), // one byte over the cap
            ("..", Err("outside")),         // a name that climbs out
        ];
        for (name, want) in cases {
            let got = read(p, Path::new(name), SMALL);
            match (got, want) {
                (Ok(bytes), Ok(text)) => assert_eq!(bytes, text.as_bytes(), "{name}"),
                (Err(e), Err(kind)) => {
                    let is = match e {
                        InputError::Io { .. } => "io",
                        InputError::Outside { .. } => "outside",
                        InputError::NotRegular { .. } => "not regular",
                        InputError::TooLarge { .. } => "too large",
                    };
                    assert_eq!(is, kind, "{name}: {e}");
                }
                (got, _) => panic!("{name}: {got:?}, expected {want:?}"),
            }
        }
        // A link inside a sub-folder that climbs back up, still inside.
        assert_eq!(read(p, Path::new("sub/link-up-inside"), SMALL).unwrap(), b"hello");
        assert!(read(p, Path::new("dangling"), SMALL).unwrap_err().is_not_found());
    }

    /// The message names the file, where it leads and the rule.
    #[test]
    fn errors_name_the_file_and_the_rule() {
        let d = Dir::new("messages");
        symlink("/dev/zero", d.0.join("series.jsonl")).unwrap();
        mkfifo(&d.0.join("probe.jsonl"));
        let link = read(&d.0, Path::new("series.jsonl"), Cap::RESULTS_STREAM).unwrap_err().to_string();
        assert!(link.contains("series.jsonl is a symbolic link that leads out of "), "{link}");
        assert!(link.contains("(to /dev/zero): a results file is read only inside its folder"), "{link}");
        let fifo = read(&d.0, Path::new("probe.jsonl"), Cap::RESULTS_STREAM).unwrap_err().to_string();
        assert!(
            fifo.ends_with("probe.jsonl is a FIFO, not a regular file: a results file is read only as a regular file"),
            "{fifo}"
        );
        let big = read(&d.0, Path::new("ok.txt"), Cap { kind: "CSV file", max_bytes: 1 }).unwrap_err().to_string();
        assert!(big.ends_with("ok.txt is larger than 1 bytes, the most perfops reads of a CSV file"), "{big}");
    }

    /// A scenario's path as written: below its folder, beside it, absolute.
    #[test]
    fn paths_a_scenario_writes() {
        let d = Dir::new("beside");
        let p = &d.0;
        symlink("/etc/passwd", p.join("sub/users.csv")).unwrap();
        fs::create_dir_all(p.join("x")).unwrap();
        // (folder, path as written, Ok(contents) or Err)
        let absolute = format!("{}/ok.txt", p.display());
        let cases: [(PathBuf, &str, Result<&str, ()>); 5] = [
            (p.clone(), "ok.txt", Ok("hello")),         // beside the scenario
            (p.join("sub"), "../ok.txt", Ok("hello")),  // written outside: read in the folder it names
            (p.join("sub"), &absolute, Ok("hello")),    // absolute
            (p.clone(), "sub/users.csv", Err(())),      // a link out of the scenario's folder
            (p.join("x"), "../sub/users.csv", Err(())), // the same link, written from elsewhere
        ];
        for (folder, rel, want) in cases {
            let got = read_beside(&folder, Path::new(rel), SMALL);
            match (got, want) {
                (Ok(b), Ok(t)) => assert_eq!(b, t.as_bytes(), "{rel}"),
                (Err(e), Err(())) => assert!(matches!(e, InputError::Outside { .. }), "{rel}: {e}"),
                (got, want) => panic!("{rel}: {got:?}, expected {want:?}"),
            }
        }
    }
}
