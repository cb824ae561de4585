//! What one connection of a test server does: the behaviours (delay, freeze,
//! reset, silence, garbage, chunked, close-delimited, status, an endless
//! body, a drip-feed) applied to the
//! requests read from it, the precise sleep behind the delays, and the
//! graceful ("lingering") close.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use crate::Shared;
use crate::http::{self, RequestReader};

/// How long a connection thread blocks at most before looking at the stop
/// flag again.
pub(crate) const POLL: Duration = Duration::from_millis(100);

/// How long a closing connection keeps draining what the client still sends
/// (so that closing never turns into an accidental RST).
const LINGER: Duration = Duration::from_secs(1);

/// Pause between the partial response and the RST, so that the partial bytes
/// are surely delivered before the reset discards the send queue.
const RESET_PAUSE: Duration = Duration::from_millis(10);

/// A server-side byte stream, plain or TLS.
pub(crate) trait Conn: Read + Write {
    /// Ends the sending direction gracefully (TLS close_notify, TCP FIN).
    fn finish(&mut self);
}

impl Conn for TcpStream {
    fn finish(&mut self) {
        let _ = self.flush();
        let _ = self.shutdown(Shutdown::Write);
    }
}

/// The behaviour of a test server, applied to every request.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Behaviour {
    /// `200 ok\n` after `delay`.
    Delay(Duration),
    /// Like `Delay`, plus one stop-the-world pause of the whole server.
    Freeze { delay: Duration, after: Duration, length: Duration },
    /// Partial response, then a TCP RST.
    Reset,
    /// Reads requests, never answers.
    Silent,
    /// Non-HTTP bytes, then close.
    Garbage,
    /// Chunked `200` with an extension and a trailer.
    Chunked,
    /// `200` delimited by closing the connection.
    CloseDelimited,
    /// The given status code with body `status\n`, and `Retry-After: SECONDS` when given.
    Status { code: u16, retry_after: Option<u32> },
    /// Every `every`-th connection (the first included) answers after
    /// `stall`, the others at once; resolved to `Delay` when accepted.
    StallSome { every: u64, stall: Duration },
    /// A chunked `200` whose chunks never end.
    EndlessChunked,
    /// A `200` with a long `Content-Length` body sent one byte per `every`.
    Drip { every: Duration },
    /// A `200` whose body is the exposition `test_restarts_total 0`, `1` from the
    /// instant set by `Server::restart_at` on.
    Restarts,
}

impl Behaviour {
    /// When the response to a request that arrived at `arrival` may be sent.
    ///
    /// For `Freeze` the server's clock stands still during the window
    /// `[start + after, start + after + length)`: a request arriving inside
    /// it starts its delay when the window ends; one whose delay was running
    /// when the window opened finishes it `length` later.
    fn deadline(&self, arrival: Instant, start: Instant) -> Option<Instant> {
        match *self {
            Self::Delay(delay) => Some(arrival + delay),
            Self::Freeze { delay, after, length } => {
                let open = start + after;
                let close = open + length;
                let begin = if (open..close).contains(&arrival) { close } else { arrival };
                let done = begin + delay;
                Some(if begin < open && done >= open { done + length } else { done })
            }
            _ => None,
        }
    }
}

/// Serves one connection until EOF, an error, a close, or server stop.
pub(crate) fn serve(mut conn: impl Conn, behaviour: Behaviour, shared: &Shared) {
    let mut reader = RequestReader::new();
    while let Some(request) = reader.next(&mut conn, shared) {
        match behaviour {
            Behaviour::Silent => continue,
            Behaviour::Reset => {
                let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789");
                let _ = conn.flush();
                std::thread::sleep(RESET_PAUSE);
                // Dropped with SO_LINGER=0 (set at accept): RST.
                return;
            }
            Behaviour::Garbage => {
                let _ = conn.write_all(b"SSH-2.0-OpenSSH_9.2\r\ngarbage\r\n\r\n");
                return linger_close(conn, shared);
            }
            Behaviour::CloseDelimited => {
                let _ = conn.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nclose-delimited body\n",
                );
                return linger_close(conn, shared);
            }
            Behaviour::Delay(_) | Behaviour::Freeze { .. } | Behaviour::StallSome { .. } => {
                let deadline = behaviour.deadline(request.arrival, shared.start);
                if let Some(deadline) = deadline
                    && !sleep_until(deadline, shared)
                {
                    return;
                }
                if !respond(&mut conn, &http::response(200, b"ok\n", request.close)) {
                    return;
                }
            }
            Behaviour::Chunked => {
                if !respond(&mut conn, &http::chunked_response(request.close)) {
                    return;
                }
            }
            Behaviour::Status { code, retry_after } => {
                if !respond(&mut conn, &http::response_retry_after(code, retry_after, b"status\n", request.close)) {
                    return;
                }
            }
            Behaviour::Restarts => {
                let at = *shared.restarted.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let n = u8::from(at.is_some_and(|at| Instant::now() >= at));
                let body = format!("# TYPE test_restarts_total counter\ntest_restarts_total {n}\n");
                if !respond(&mut conn, &http::response(200, body.as_bytes(), request.close)) {
                    return;
                }
            }
            // Both go on until the client leaves or the server stops.
            Behaviour::EndlessChunked => return endless_chunks(&mut conn, shared),
            Behaviour::Drip { every } => return drip(&mut conn, every, shared),
        }
        if request.close {
            return linger_close(conn, shared);
        }
    }
    if matches!(behaviour, Behaviour::Silent) {
        // Even a client that half-closed gets no answer, not an EOF: keep
        // the socket open until the server stops.
        while !shared.stopping() {
            std::thread::sleep(POLL);
        }
    }
}

/// A chunked head, then 4 KiB chunks as fast as the client reads them,
/// never the last chunk: the body is endless.
fn endless_chunks(conn: &mut impl Conn, shared: &Shared) {
    let mut chunk = b"1000\r\n".to_vec();
    chunk.extend_from_slice(&[b'x'; 4096]);
    chunk.extend_from_slice(b"\r\n");
    if !respond(conn, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n") {
        return;
    }
    while !shared.stopping() && respond(conn, &chunk) {}
}

/// A head promising a 1 MB body, then one body byte per `every`.
fn drip(conn: &mut impl Conn, every: Duration, shared: &Shared) {
    if !respond(conn, b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n") {
        return;
    }
    let mut next = Instant::now();
    for _ in 0..1_000_000 {
        next += every;
        if !sleep_until(next, shared) || !respond(conn, b"x") {
            return;
        }
    }
}

/// Writes one pre-built response; false if the connection is gone.
fn respond(conn: &mut impl Conn, bytes: &[u8]) -> bool {
    conn.write_all(bytes).is_ok() && conn.flush().is_ok()
}

/// Closes after the last response: FIN (and close_notify), then reads and
/// discards whatever the client still sends until it closes, for at most
/// [`LINGER`], so unread input does not make the kernel answer with a RST
/// that could destroy the response in flight.
fn linger_close(mut conn: impl Conn, shared: &Shared) {
    conn.finish();
    let until = Instant::now() + LINGER;
    let mut sink = [0u8; 4096];
    while Instant::now() < until && !shared.stopping() {
        match conn.read(&mut sink) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if http::is_retryable(e.kind()) => {}
            Err(_) => return,
        }
    }
}

/// Sleeps until `deadline` precisely: `thread::sleep` until 1 ms before it,
/// then spins. Long sleeps wake every [`POLL`] to honour the stop
/// flag; returns false if the server is stopping.
pub(crate) fn sleep_until(deadline: Instant, shared: &Shared) -> bool {
    const SPIN: Duration = Duration::from_millis(1);
    loop {
        if shared.stopping() {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        let left = deadline - now;
        if left > SPIN {
            std::thread::sleep((left - SPIN).min(POLL));
        } else {
            // Busy-wait: yielding would hand the CPU to any runnable thread
            // for a whole time slice and overshoot by milliseconds on a
            // loaded machine.
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freeze_deadlines() {
        let ms = Duration::from_millis;
        let start = Instant::now();
        let b = Behaviour::Freeze { delay: ms(10), after: ms(100), length: ms(50) };
        let at = |t| b.deadline(start + ms(t), start).unwrap() - start;
        assert_eq!(at(0), ms(10)); // before the window
        assert_eq!(at(85), ms(95)); // done before it opens
        assert_eq!(at(95), ms(155)); // running when it opens: paused 50 ms
        assert_eq!(at(100), ms(160)); // arrives inside: starts at 150
        assert_eq!(at(149), ms(160));
        assert_eq!(at(150), ms(160)); // after the window
    }
}
