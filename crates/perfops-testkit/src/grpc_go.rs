//! A gRPC server with server reflection (#14): grpc-go's own
//! `reflection` package, so that perfops' reflection client is tested
//! against an implementation that is not ours (Debian's python3-grpcio
//! ships no `grpc_reflection`). The server (`go/grpc-reflection/main.go`)
//! serves `bench.Echo` (`Say`, every `unavailable_every`-th call
//! `UNAVAILABLE`; `Count`, a stream of three) from descriptors it builds
//! itself, `bench/echo.proto` importing `bench/msg.proto`, and one of the
//! reflection services or none ([`Reflect`]).
//!
//! Built once with `go build` into `~/.cache/perfops-testkit/` (its
//! modules from the Go module proxy, or its cache: grpc-go v1.85.0, as
//! `bench/grpc.sh`'s echo server), in a directory named by a hash of its
//! sources, so an edited server is built again; a build is written under a
//! temporary name and renamed, so test processes building at once do not
//! see half a binary. `scripts/test` checks that Go is there. The handle
//! stops the server by its PID when dropped.

use std::hash::{Hash, Hasher};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

const MAIN_GO: &str = include_str!("../go/grpc-reflection/main.go");
const GO_MOD: &str = include_str!("../go/grpc-reflection/go.mod");
const GO_SUM: &str = include_str!("../go/grpc-reflection/go.sum");

/// Which reflection services the server offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reflect {
    /// `grpc.reflection.v1` and `grpc.reflection.v1alpha`.
    Both,
    /// `grpc.reflection.v1alpha` alone (older servers).
    V1Alpha,
    /// None: a server without reflection.
    None,
}

impl Reflect {
    fn flag(self) -> &'static str {
        match self {
            Reflect::Both => "both",
            Reflect::V1Alpha => "v1alpha",
            Reflect::None => "none",
        }
    }
}

/// A running grpc-go server; dropping it kills it (by its PID).
pub struct GoGrpc {
    child: Child,
    port: u16,
    /// Kept open: a server that writes to a closed pipe dies of SIGPIPE.
    _stdout: BufReader<std::process::ChildStdout>,
}

impl GoGrpc {
    /// The port it serves on, on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for GoGrpc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether a Go tool chain is on the PATH.
pub fn have_go() -> bool {
    Command::new("go").arg("version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// The server's binary, built if needed. Panics with the build's output
/// when it fails (with Go present, that is a failure, not a reason to skip).
fn binary() -> PathBuf {
    static BUILD: Mutex<()> = Mutex::new(());
    let _one = BUILD.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (MAIN_GO, GO_MOD, GO_SUM).hash(&mut h);
    let home = std::env::var_os("HOME").map_or_else(std::env::temp_dir, PathBuf::from);
    let cache = std::env::var_os("XDG_CACHE_HOME").map_or_else(|| home.join(".cache"), PathBuf::from);
    let dir = cache.join("perfops-testkit").join(format!("grpc-reflection-{:016x}", h.finish()));
    let bin = dir.join("server");
    if bin.is_file() {
        return bin;
    }
    std::fs::create_dir_all(&dir).expect("the testkit's Go build directory");
    for (name, text) in [("main.go", MAIN_GO), ("go.mod", GO_MOD), ("go.sum", GO_SUM)] {
        std::fs::write(dir.join(name), text).expect("write the Go server's sources");
    }
    let tmp = dir.join(format!("server.{}", std::process::id()));
    let out = Command::new("go")
        .args(["build", "-o"])
        .arg(&tmp)
        .arg(".")
        .current_dir(&dir)
        .env("GOFLAGS", "-mod=mod -buildvcs=false")
        .output()
        .expect("run go build");
    assert!(
        out.status.success(),
        "go build of the testkit's gRPC reflection server failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::rename(&tmp, &bin).expect("move the built server into place");
    bin
}

/// Start the server on 127.0.0.1 and an ephemeral port, with the
/// reflection services of `reflect`; every `unavailable_every`-th `Say`
/// call (0: none) fails with `UNAVAILABLE`. `None` when there is no Go.
pub fn go_grpc_reflection(reflect: Reflect, unavailable_every: u32) -> Option<GoGrpc> {
    // The caller says it skips (the testkit prints nothing of its own).
    if !have_go() {
        return None;
    }
    let mut child = Command::new(binary())
        .args(["-listen", "127.0.0.1:0", "-reflection", reflect.flag(), "-unavailable-every"])
        .arg(unavailable_every.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the gRPC reflection server");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("the server's first line");
    let port = line
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("the server said {line:?}, not `listening on ADDR`"));
    Some(GoGrpc { child, port, _stdout: stdout })
}
