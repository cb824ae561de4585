//! The listening socket, made by hand so that its listen(2) backlog is the configured one.
//!
//! std's `TcpListener::bind` always asks for 128, which hides the point of the threads model:
//! once the pool stops accepting, the kernel completes at most `backlog` more handshakes and then
//! drops SYNs, so new connections stall for a retransmission (1 s, 3 s, ...). This module only
//! creates the socket; who accepts, and when, is the models' business.

use std::net::{SocketAddr, TcpListener};

use nix::sys::socket::{
    AddressFamily, Backlog, SockFlag, SockType, SockaddrStorage, bind as nix_bind, listen, setsockopt, socket,
    sockopt::ReuseAddr,
};
use std::os::fd::AsRawFd;

use crate::DemoError;

/// Creates a non-blocking TCP listener on `addr` with exactly `backlog` as its accept queue size.
pub(crate) fn bind(addr: SocketAddr, backlog: u32) -> Result<TcpListener, DemoError> {
    let bind_err = |errno: nix::errno::Errno| DemoError::Bind { addr, source: errno.into() };
    let family = if addr.is_ipv4() { AddressFamily::Inet } else { AddressFamily::Inet6 };
    let backlog_arg = i32::try_from(backlog)
        .ok()
        .filter(|&b| b >= 1)
        .and_then(|b| Backlog::new(b).ok())
        .ok_or(DemoError::Backlog(backlog))?;
    let fd = socket(family, SockType::Stream, SockFlag::SOCK_CLOEXEC, None).map_err(bind_err)?;
    // A restarted demo must not wait out TIME_WAIT on its well-known port.
    setsockopt(&fd, ReuseAddr, &true).map_err(bind_err)?;
    nix_bind(fd.as_raw_fd(), &SockaddrStorage::from(addr)).map_err(bind_err)?;
    listen(&fd, backlog_arg).map_err(bind_err)?;
    let listener = TcpListener::from(fd);
    // Both models wait for readiness themselves (epoll, tokio) and must be able to look at the
    // stop flag, so accept never blocks.
    listener.set_nonblocking(true).map_err(|source| DemoError::Bind { addr, source })?;
    Ok(listener)
}
