//! `ws-echo ADDR [DELAY_MS]`: the testkit's WebSocket echo server in the
//! foreground, for `bench/ws.sh` (pinned to a core of its own with taskset).
//! It runs until it is killed.

use std::net::SocketAddr;
use std::time::Duration;

use perfops_testkit::ws::{WsBehaviour, WsServer};

// A command-line tool: its usage goes to stderr.
#[allow(clippy::print_stderr)]
fn main() {
    let mut args = std::env::args().skip(1);
    let addr: SocketAddr = match args.next().map(|a| a.parse()) {
        Some(Ok(addr)) => addr,
        _ => {
            eprintln!("usage: ws-echo ADDR [DELAY_MS]   (e.g. ws-echo 127.0.0.1:9001)");
            std::process::exit(2);
        }
    };
    let delay = Duration::from_millis(args.next().and_then(|d| d.parse().ok()).unwrap_or(0));
    WsServer::serve_forever(addr, WsBehaviour::Echo { delay });
}
