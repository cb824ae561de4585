//! The sock_diag netlink socket: ask the kernel for every listening TCP socket (IPv4 and IPv6)
//! with its accept-queue length and maximum, the one place the maximum is reported.
//!
//! It owns the socket: open, send, receive until the dump ends, with a receive timeout so a
//! kernel that never answers cannot hold the watcher. The message layouts are
//! `perfops_core::telemetry::sockdiag`'s. It sees the network namespace the generator runs in,
//! which is the target's whenever the target is a local process on the same host network.

use std::io;
use std::os::fd::AsRawFd;

use nix::sys::socket::{
    AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, recv, sendto, setsockopt, socket, sockopt,
};
use nix::sys::time::TimeVal;
use perfops_core::telemetry::sockdiag::{DiagListener, IpFamily, listen_dump_request, parse_dump};

/// Every listening TCP socket of this network namespace.
pub(super) fn listeners() -> io::Result<Vec<DiagListener>> {
    let fd = socket(AddressFamily::Netlink, SockType::Datagram, SockFlag::SOCK_CLOEXEC, SockProtocol::NetlinkSockDiag)?;
    // The kernel answers a dump at once; the timeout is only a guard.
    setsockopt(&fd, sockopt::ReceiveTimeout, &TimeVal::new(0, 200_000))?;
    let kernel = NetlinkAddr::new(0, 0);
    // Large enough for any dump datagram: the kernel sizes them to about a page or 32 KiB, and a
    // datagram cut short by a small buffer would read as truncated.
    let mut buf = vec![0u8; 64 << 10];
    let mut out = Vec::new();
    for (seq, family) in [(1, IpFamily::V4), (2, IpFamily::V6)] {
        sendto(fd.as_raw_fd(), &listen_dump_request(family, seq), &kernel, MsgFlags::empty())?;
        loop {
            let n = recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty())?;
            let dump = parse_dump(&buf[..n]).map_err(io::Error::other)?;
            out.extend(dump.listeners);
            if dump.done {
                break;
            }
        }
    }
    Ok(out)
}
