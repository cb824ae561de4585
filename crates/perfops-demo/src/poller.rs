//! Where idle keep-alive connections of the threads model wait without holding a thread: an epoll
//! set watched by one thread, which hands a connection back as soon as it becomes readable (Puma's
//! reactor plays this part).
//!
//! It owns parked items and their idle deadlines, nothing else: what "handing back" means (pushing
//! onto a worker's ready queue) is the caller's closure, and it never reads from a socket.
//!
//! ```text
//!  handler thread --park(conn)--> [ epoll set + map id -> conn ] --readable--> deliver(conn)
//!                                       \--idle > KEEP_ALIVE_IDLE--> dropped (closed)
//! ```

use std::collections::HashMap;
use std::io;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};

use crate::STOP_POLL;

/// How often parked items are checked against their idle deadline.
const SWEEP_EVERY: Duration = Duration::from_millis(250);

struct Parked<T> {
    item: T,
    deadline: Instant,
}

/// A set of parked items, each woken once when its descriptor becomes readable (or hung up).
pub(crate) struct Poller<T> {
    epoll: Epoll,
    idle_timeout: Duration,
    parked: Mutex<ParkedSet<T>>,
}

/// The map and the id counter, under one lock.
struct ParkedSet<T> {
    next_id: u64,
    items: HashMap<u64, Parked<T>>,
}

impl<T: AsFd> Poller<T> {
    /// An empty poller; parked items idle longer than `idle_timeout` are dropped.
    pub(crate) fn new(idle_timeout: Duration) -> io::Result<Poller<T>> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
        Ok(Poller { epoll, idle_timeout, parked: Mutex::new(ParkedSet { next_id: 0, items: HashMap::new() }) })
    }

    /// Parks `item` until its descriptor is readable. If it cannot be watched it is dropped (for a
    /// connection: closed), which is what would happen to it at its idle timeout anyway.
    pub(crate) fn park(&self, item: T) {
        let mut parked = self.parked.lock().unwrap_or_else(PoisonError::into_inner);
        let id = parked.next_id;
        parked.next_id += 1;
        // Register while holding the lock, so that the poller thread cannot see the event before
        // the item is in the map.
        let event = EpollEvent::new(EpollFlags::EPOLLIN | EpollFlags::EPOLLRDHUP, id);
        if self.epoll.add(item.as_fd(), event).is_ok() {
            parked.items.insert(id, Parked { item, deadline: Instant::now() + self.idle_timeout });
        }
    }

    /// Number of parked items.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.parked.lock().unwrap_or_else(PoisonError::into_inner).items.len()
    }

    /// Watches until `stop` is set, calling `deliver` with every item that becomes readable.
    pub(crate) fn run(&self, stop: &AtomicBool, mut deliver: impl FnMut(T)) -> io::Result<()> {
        let mut events = vec![EpollEvent::empty(); 256];
        let timeout = EpollTimeout::try_from(STOP_POLL).unwrap_or(EpollTimeout::ZERO);
        let mut next_sweep = Instant::now() + SWEEP_EVERY;
        let mut ready = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let n = match self.epoll.wait(&mut events, timeout) {
                Ok(n) => n,
                Err(nix::errno::Errno::EINTR) => 0,
                Err(e) => return Err(e.into()),
            };
            {
                let mut parked = self.parked.lock().unwrap_or_else(PoisonError::into_inner);
                for event in &events[..n] {
                    if let Some(p) = parked.items.remove(&event.data()) {
                        self.forget(&p.item);
                        ready.push(p.item);
                    }
                }
                let now = Instant::now();
                if now >= next_sweep {
                    next_sweep = now + SWEEP_EVERY;
                    let expired: Vec<u64> =
                        parked.items.iter().filter(|(_, p)| p.deadline <= now).map(|(&id, _)| id).collect();
                    for id in expired {
                        if let Some(p) = parked.items.remove(&id) {
                            self.forget(&p.item);
                        }
                    }
                }
            }
            // Delivered outside the lock: `deliver` takes the worker's queue lock.
            for item in ready.drain(..) {
                deliver(item);
            }
        }
        Ok(())
    }

    fn forget(&self, item: &T) {
        // Subtleness: the descriptor must leave the set before it can be closed or re-parked;
        // failing here only means it was already gone.
        let _ = self.epoll.delete(item.as_fd());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::sync::Arc;

    #[test]
    fn delivers_readable_and_drops_idle() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut talker = TcpStream::connect(addr).unwrap();
        let _silent = TcpStream::connect(addr).unwrap();
        let (a, _) = listener.accept().unwrap();
        let (b, _) = listener.accept().unwrap();
        let poller = Arc::new(Poller::new(Duration::from_millis(300)).unwrap());
        poller.park(a);
        poller.park(b);
        assert_eq!(poller.len(), 2);
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = {
            let (poller, stop) = (Arc::clone(&poller), Arc::clone(&stop));
            std::thread::spawn(move || poller.run(&stop, |s: TcpStream| tx.send(s).unwrap()))
        };
        talker.write_all(b"x").unwrap();
        // The talking connection comes back; the silent one does not.
        rx.recv_timeout(Duration::from_secs(2)).unwrap();
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
        // After its idle timeout (plus a sweep) the silent one is gone.
        std::thread::sleep(Duration::from_millis(700));
        assert_eq!(poller.len(), 0);
        stop.store(true, Ordering::Relaxed);
        thread.join().unwrap().unwrap();
    }
}
