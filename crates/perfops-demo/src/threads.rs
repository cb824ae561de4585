//! The threads model: `workers` x `threads` blocking handler threads, scheduled like Puma.
//!
//! Each worker (a Puma process, here a group of threads) has an accept thread, a ready queue, a
//! pool of handler threads and a [`Poller`] for idle keep-alive connections:
//!
//! ```text
//!            kernel accept queue (listen backlog)
//!                      |  accepted only while a handler is idle and nothing waits
//!                      v
//!   poller --readable--> ready queue (demo_queue_depth) --> T handler threads
//!      ^                                                         |  read ONE request (non-blocking),
//!      |                                                         |  sleep io_wait (holds the thread),
//!      +------------------ keep-alive, nothing buffered ---------+  CPU work, write the response
//! ```
//!
//! A handler never blocks on a read: a connection without a complete request goes to the poller,
//! so idle or slow clients cannot pin threads. What does block a thread is the I/O wait, as a
//! database call blocks a Ruby thread. Capacity is therefore `W*T / (io_wait + cpu_work)`; past
//! it keep-alive clients queue in the ready queue, new connections wait in the kernel's backlog,
//! and once that is full the kernel drops SYNs, so connects stall for a retransmission. `/health`
//! and `/metrics` wait in the same queue as everything else.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, ScopedJoinHandle};
use std::time::Instant;

use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::socket::{MsgFlags, recv};

use crate::app::{App, OpenConnection, Step};
use crate::http::{self, Method};
use crate::metrics::Route;
use crate::poller::Poller;
use crate::{DemoConfig, DemoError, KEEP_ALIVE_IDLE, STOP_POLL, WRITE_TIMEOUT};

/// Bytes read per `recv`.
const READ_CHUNK: usize = 8 * 1024;

/// One client connection between requests: the socket, its unparsed bytes and its metrics guard.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    _open: OpenConnection,
}

impl AsFd for Conn {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.stream.as_fd()
    }
}

/// What a handler thread does with a connection after its turn.
enum Turn {
    /// Nothing complete is buffered: wait in the poller for bytes.
    Park(Conn),
    /// Another request is already buffered (pipelining): straight back to the ready queue.
    Requeue(Conn),
    /// Closed (by either side, or after an error).
    Close,
}

/// The ready queue of one worker and how many of its handler threads are idle.
struct Queue {
    ready: VecDeque<Conn>,
    idle: usize,
}

/// One worker "process": its queue and the two conditions threads wait on.
struct Worker {
    queue: Mutex<Queue>,
    /// Signalled when a connection is pushed.
    work: Condvar,
    /// Signalled when a handler thread becomes idle.
    space: Condvar,
}

impl Worker {
    fn new(threads: usize) -> Worker {
        Worker {
            queue: Mutex::new(Queue { ready: VecDeque::new(), idle: threads }),
            work: Condvar::new(),
            space: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, conn: Conn, app: &App) {
        self.lock().ready.push_back(conn);
        app.metrics.queue_depth.fetch_add(1, Ordering::Relaxed);
        self.work.notify_one();
    }

    /// The next ready connection, or `None` once `stop` is set. The caller is no longer idle.
    fn next(&self, app: &App, stop: &AtomicBool) -> Option<Conn> {
        let mut queue = self.lock();
        loop {
            if stop.load(Ordering::Relaxed) {
                return None;
            }
            if let Some(conn) = queue.ready.pop_front() {
                queue.idle -= 1;
                app.metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
                return Some(conn);
            }
            queue = self.work.wait_timeout(queue, STOP_POLL).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    /// The calling handler thread is idle again.
    fn done(&self) {
        self.lock().idle += 1;
        self.space.notify_one();
    }

    /// Whether an accepted connection would find an idle thread (Puma's `wait_until_not_full`).
    fn has_room(queue: &Queue) -> bool {
        queue.idle > queue.ready.len()
    }

    /// Waits until there is room or `stop` is set; returns false on stop.
    fn wait_for_room(&self, stop: &AtomicBool) -> bool {
        let mut queue = self.lock();
        while !Self::has_room(&queue) {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            queue = self.space.wait_timeout(queue, STOP_POLL).unwrap_or_else(PoisonError::into_inner).0;
        }
        !stop.load(Ordering::Relaxed)
    }
}

/// Runs the threads model on `listener` until `stop` is set.
pub(crate) fn run(
    config: &DemoConfig,
    listener: TcpListener,
    app: Arc<App>,
    stop: &AtomicBool,
    on_ready: impl FnOnce(),
) -> Result<(), DemoError> {
    let workers: Vec<Worker> = (0..config.workers).map(|_| Worker::new(config.threads)).collect();
    let pollers = (0..config.workers).map(|_| Poller::new(KEEP_ALIVE_IDLE)).collect::<io::Result<Vec<_>>>();
    let pollers: Vec<Poller<Conn>> = pollers.map_err(DemoError::Start)?;
    let app = &app;
    let listener = &listener;
    thread::scope(|scope| {
        let mut handles: Vec<ScopedJoinHandle<'_, io::Result<()>>> = Vec::new();
        let started = (|| -> io::Result<()> {
            for (w, (worker, poller)) in workers.iter().zip(&pollers).enumerate() {
                for t in 0..config.threads {
                    handles.push(thread::Builder::new().name(format!("demo-w{w}-t{t}")).spawn_scoped(
                        scope,
                        move || {
                            guarded(stop, || {
                                handler_loop(worker, poller, app, stop);
                                Ok(())
                            })
                        },
                    )?);
                }
                handles.push(
                    thread::Builder::new().name(format!("demo-w{w}-poll")).spawn_scoped(scope, move || {
                        guarded(stop, || poller.run(stop, |conn| worker.push(conn, app)))
                    })?,
                );
                handles.push(
                    thread::Builder::new()
                        .name(format!("demo-w{w}-accept"))
                        .spawn_scoped(scope, move || guarded(stop, || accept_loop(listener, worker, app, stop)))?,
                );
            }
            Ok(())
        })();
        if let Err(e) = started {
            // The threads already running see the flag and end; the scope waits for them.
            stop.store(true, Ordering::Relaxed);
            return Err(DemoError::Start(e));
        }
        on_ready();
        let mut result = Ok(());
        for handle in handles {
            match handle.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => result = result.and(Err(DemoError::Start(e))),
                Err(_) => result = result.and(Err(DemoError::Panicked)),
            }
        }
        result
    })
}

/// Runs a server thread's body; if it fails or panics, sets `stop`, so that the other threads end
/// too rather than leaving a half-working server (say, one that no longer accepts) behind.
fn guarded(stop: &AtomicBool, body: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
    struct StopOnPanic<'a>(&'a AtomicBool);
    impl Drop for StopOnPanic<'_> {
        fn drop(&mut self) {
            if thread::panicking() {
                self.0.store(true, Ordering::Relaxed);
            }
        }
    }
    let _guard = StopOnPanic(stop);
    let result = body();
    if result.is_err() {
        stop.store(true, Ordering::Relaxed);
    }
    result
}

/// Accepts for one worker, only while that worker has an idle thread.
fn accept_loop(listener: &TcpListener, worker: &Worker, app: &Arc<App>, stop: &AtomicBool) -> io::Result<()> {
    let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
    epoll.add(listener.as_fd(), EpollEvent::new(EpollFlags::EPOLLIN, 0))?;
    let timeout = EpollTimeout::try_from(STOP_POLL).unwrap_or(EpollTimeout::ZERO);
    let mut events = [EpollEvent::empty()];
    loop {
        if !worker.wait_for_room(stop) {
            return Ok(());
        }
        match epoll.wait(&mut events, timeout) {
            Ok(0) | Err(Errno::EINTR) => continue,
            Ok(_) => {}
            Err(e) => return Err(e.into()),
        }
        // Room may have gone while waiting for a connection (the poller delivered some).
        if !Worker::has_room(&worker.lock()) {
            continue;
        }
        match listener.accept() {
            Ok((stream, _)) => {
                let open = app.open_connection();
                if configure(&stream).is_ok() {
                    worker.push(Conn { stream, buf: Vec::new(), _open: open }, app);
                }
            }
            // Another worker's accept thread took it.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            // Out of descriptors, or the client gave up: back off a little and go on, as real
            // servers do; none of these make the listener unusable.
            Err(_) => thread::sleep(STOP_POLL / 10),
        }
    }
}

fn configure(stream: &TcpStream) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_nodelay(true)?;
    stream.set_write_timeout(Some(WRITE_TIMEOUT))
}

fn handler_loop(worker: &Worker, poller: &Poller<Conn>, app: &App, stop: &AtomicBool) {
    while let Some(conn) = worker.next(app, stop) {
        match turn(conn, app) {
            Turn::Park(conn) => poller.park(conn),
            Turn::Requeue(conn) => worker.push(conn, app),
            Turn::Close => {}
        }
        worker.done();
    }
}

/// Serves at most one request of `conn`.
fn turn(mut conn: Conn, app: &App) -> Turn {
    let mut chunk = [0u8; READ_CHUNK];
    loop {
        match http::parse(&conn.buf) {
            Ok(Some((req, used))) => {
                conn.buf.drain(..used);
                let started = Instant::now();
                app.metrics.busy.fetch_add(1, Ordering::Relaxed);
                let (route, response) = match app.begin(&req) {
                    Step::Respond(route, response) => (route, response),
                    Step::Work(work) => {
                        // The simulated database call: it holds this thread, which is the point.
                        if !app.io_wait().is_zero() {
                            thread::sleep(app.io_wait());
                        }
                        app.finish(&work)
                    }
                };
                let keep_alive = req.keep_alive && !response.close;
                let mut out = Vec::with_capacity(256 + response.body.len());
                response.encode(keep_alive, req.http10, req.method == Method::Head, &mut out);
                let written = conn.stream.write_all(&out);
                app.metrics.record(route, response.status, started.elapsed());
                app.metrics.busy.fetch_sub(1, Ordering::Relaxed);
                return match (written, keep_alive) {
                    (Ok(()), true) if conn.buf.is_empty() => Turn::Park(conn),
                    (Ok(()), true) => Turn::Requeue(conn),
                    (Ok(()), false) => close_gracefully(conn),
                    (Err(_), _) => Turn::Close,
                };
            }
            Ok(None) => {}
            Err(error) => {
                let started = Instant::now();
                let response = error.response();
                let mut out = Vec::new();
                response.encode(false, false, false, &mut out);
                // The connection is closed either way; a client that left does not need the 400.
                let _ = conn.stream.write_all(&out);
                app.metrics.record(Route::Invalid, response.status, started.elapsed());
                return close_gracefully(conn);
            }
        }
        match recv(conn.stream.as_raw_fd(), &mut chunk, MsgFlags::MSG_DONTWAIT) {
            Ok(0) => return Turn::Close,
            Ok(n) => conn.buf.extend_from_slice(&chunk[..n]),
            Err(Errno::EAGAIN) => return Turn::Park(conn),
            Err(Errno::EINTR) => {}
            Err(_) => return Turn::Close,
        }
    }
}

/// Closes after a final response without resetting it: a close with unread input makes the
/// kernel send RST, which can destroy the response before the client reads it.
fn close_gracefully(conn: Conn) -> Turn {
    // Errors only mean the peer is already gone.
    let _ = conn.stream.shutdown(Shutdown::Write);
    let mut chunk = [0u8; READ_CHUNK];
    let _ = recv(conn.stream.as_raw_fd(), &mut chunk, MsgFlags::MSG_DONTWAIT);
    Turn::Close
}
