//! The control port: `/metrics` served by a thread of its own, outside the
//! pool, the way Puma's control app or a sidecar exporter serves them. A
//! saturated pool cannot answer its own `/metrics` in time (that is the
//! lesson of the main port's `/metrics`), and the watcher must still see
//! the pool full while it is.
//!
//! One thread, `Connection: close`, every connection polled at once
//! (non-blocking sockets) with a deadline for the whole exchange
//! ([`REQUEST_DEADLINE`]) and at most [`MAX_CONNECTIONS`] held, the oldest
//! closed first beyond that (#31). Before, connections were answered in
//! turn with a timeout per read: a client sending a byte a second renewed
//! it forever and the watcher's scrapes waited behind it. The same design
//! as perfops' own `--metrics-listen` (`perfops_engine::exporter`); the demo
//! depends on no other perfops crate, so it is written again here.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, poll};

use crate::STOP_POLL;
use crate::app::App;

/// How long a scraper may take to send its request and read the answer, in all.
pub(crate) const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// Connections held at once; one more closes the oldest.
pub(crate) const MAX_CONNECTIONS: usize = 64;
/// A request head larger than this is not waited for: the answer goes out.
const MAX_HEAD_BYTES: usize = 16 * 1024;

/// Serve `GET <any path>` with the metrics on `listener` until `stop` is set.
pub(crate) fn run(listener: TcpListener, app: Arc<App>, stop: Arc<AtomicBool>) {
    if listener.set_nonblocking(true).is_err() {
        return;
    }
    let wait_ms = u16::try_from(STOP_POLL.as_millis()).unwrap_or(100);
    // Oldest first: the front is the first to go when the bound is reached.
    let mut conns: VecDeque<Conn> = VecDeque::new();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        conns.retain(|c| now.duration_since(c.since) < REQUEST_DEADLINE);
        let ready: Vec<bool> = {
            let mut fds = Vec::with_capacity(conns.len() + 1);
            fds.push(PollFd::new(listener.as_fd(), PollFlags::POLLIN));
            for c in &conns {
                let wants = if c.out.is_empty() { PollFlags::POLLIN } else { PollFlags::POLLOUT };
                fds.push(PollFd::new(c.stream.as_fd(), wants));
            }
            match poll(&mut fds, wait_ms) {
                Ok(0) | Err(Errno::EINTR) => continue,
                Ok(_) => {}
                Err(_) => return,
            }
            fds.iter().map(|f| f.revents().is_some_and(|r| !r.is_empty())).collect()
        };
        let mut i = 0;
        conns.retain_mut(|c| {
            i += 1;
            !ready[i] || c.step(&app)
        });
        if ready[0] {
            accept(&listener, &mut conns);
        }
    }
}

/// Take every waiting connection; beyond [`MAX_CONNECTIONS`], close the oldest.
fn accept(listener: &TcpListener, conns: &mut VecDeque<Conn>) {
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                if stream.set_nonblocking(true).is_err() {
                    continue;
                }
                if conns.len() >= MAX_CONNECTIONS {
                    conns.pop_front();
                }
                conns.push_back(Conn { stream, since: Instant::now(), head: Vec::new(), out: Vec::new(), sent: 0 });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // Out of descriptors: try again at the next poll, after a pause rather than a spin.
            Err(_) => {
                std::thread::sleep(STOP_POLL / 10);
                return;
            }
        }
    }
}

/// One scraper: its request as read so far, then the answer as sent so far.
struct Conn {
    stream: TcpStream,
    since: Instant,
    head: Vec<u8>,
    /// The whole answer, once the request is read; empty until then.
    out: Vec<u8>,
    sent: usize,
}

impl Conn {
    /// Move the exchange on as far as the socket allows without waiting;
    /// `false`: it is over (answered, gone or broken), drop it.
    fn step(&mut self, app: &App) -> bool {
        if self.out.is_empty() {
            let mut buf = [0u8; 1024];
            match self.stream.read(&mut buf) {
                Ok(0) => return false,
                Ok(n) => self.head.extend_from_slice(&buf[..n]),
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => return true,
                Err(_) => return false,
            }
            if !self.head.windows(4).any(|w| w == b"\r\n\r\n") && self.head.len() < MAX_HEAD_BYTES {
                return true;
            }
            let body = app.metrics.render();
            self.out = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .into_bytes();
        }
        loop {
            match self.stream.write(&self.out[self.sent..]) {
                Ok(0) => return false,
                Ok(n) => {
                    self.sent += n;
                    if self.sent == self.out.len() {
                        return false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DemoConfig;

    /// #31: a client that sends a byte a second, and silent ones beyond the
    /// bound, delay no scrape of the control port; the slow one is dropped
    /// at its deadline. Before: answered in turn with a 1 s timeout per read,
    /// the slow client held the port for as long as it kept sending.
    #[test]
    fn slow_and_silent_clients_block_no_scraper() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let app = Arc::new(App::new(&DemoConfig::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let server = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || run(listener, app, stop))
        };
        let silent: Vec<TcpStream> =
            (0..MAX_CONNECTIONS + 8).map(|_| TcpStream::connect(addr).expect("connect")).collect();
        let mut slow = TcpStream::connect(addr).expect("connect");
        let mut slow_reader = slow.try_clone().expect("clone");
        let opened = Instant::now();
        let trickle = std::thread::spawn(move || {
            for b in b"GET /metrics HTTP/1.1".iter().take(9) {
                if slow.write_all(&[*b]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        });
        for _ in 0..3 {
            let started = Instant::now();
            let mut s = TcpStream::connect(addr).expect("connect");
            s.set_read_timeout(Some(Duration::from_secs(1))).expect("timeout");
            s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").expect("send");
            let mut out = String::new();
            s.read_to_string(&mut out).unwrap_or_else(|e| panic!("no answer within 1 s ({e}): {out:?}"));
            assert!(out.starts_with("HTTP/1.1 200 OK\r\n") && out.contains("demo_"), "{out}");
            assert!(started.elapsed() < Duration::from_secs(1), "answered after {:?}", started.elapsed());
            std::thread::sleep(Duration::from_millis(500));
        }
        slow_reader.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        let read = slow_reader.read(&mut [0u8; 64]);
        let cut = opened.elapsed();
        assert!(matches!(read, Ok(0) | Err(_)), "the slow client got an answer: {read:?}");
        assert!(
            cut >= REQUEST_DEADLINE - Duration::from_millis(200) && cut < REQUEST_DEADLINE + Duration::from_secs(2),
            "the slow client was cut off after {cut:?}, its deadline is {REQUEST_DEADLINE:?}"
        );
        stop.store(true, Ordering::Relaxed);
        trickle.join().expect("trickle");
        server.join().expect("server");
        drop(silent);
    }
}
