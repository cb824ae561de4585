//! The control port: `/metrics` served by a thread of its own, outside the
//! pool, the way Puma's control app or a sidecar exporter serves them. A
//! saturated pool cannot answer its own `/metrics` in time (that is the
//! lesson of the main port's `/metrics`), and the watcher must still see
//! the pool full while it is.
//!
//! One blocking thread, one connection at a time, `Connection: close`: a
//! scraper every second or so is all it serves.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::STOP_POLL;
use crate::app::App;

/// How long a scraper may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(1);

/// Serve `GET <any path>` with the metrics on `listener` until `stop` is set.
pub(crate) fn run(listener: TcpListener, app: Arc<App>, stop: Arc<AtomicBool>) {
    if listener.set_nonblocking(true).is_err() {
        return;
    }
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((conn, _)) => {
                let _ = answer(conn, &app);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(STOP_POLL / 10),
            Err(_) => std::thread::sleep(STOP_POLL),
        }
    }
}

fn answer(mut conn: TcpStream, app: &App) -> io::Result<()> {
    conn.set_nonblocking(false)?;
    conn.set_read_timeout(Some(READ_TIMEOUT))?;
    conn.set_write_timeout(Some(READ_TIMEOUT))?;
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let body = app.metrics.render();
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(response.as_bytes())
}
