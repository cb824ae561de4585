//! The sock_diag netlink messages that ask the kernel for its listening TCP sockets, and what it
//! answers: each one's accept-queue length *and maximum* (what `ss -ltn` shows as Recv-Q and
//! Send-Q).
//!
//! This exists because `/proc/net/tcp` does not have the maximum (see
//! [`super::procfs::TcpSocket::rx_queue`]): inet_diag is the only interface that reports
//! `sk_max_ack_backlog`, the backlog given to `listen()` capped by `net.core.somaxconn`. This module
//! owns the byte layouts (`nlmsghdr`, `inet_diag_req_v2`, `inet_diag_msg`); it does not open the
//! socket. The engine opens `socket(AF_NETLINK, SOCK_DGRAM, NETLINK_SOCK_DIAG)`, sends
//! [`listen_dump_request`] to the kernel (netlink address 0), and feeds each datagram it receives
//! to [`parse_dump`] until one says `done`. No privilege is needed to list sockets this way.
//!
//! ```text
//!   request  = nlmsghdr(16) + inet_diag_req_v2(56)   type SOCK_DIAG_BY_FAMILY, flags REQUEST|DUMP
//!   datagram = nlmsghdr + inet_diag_msg(72) + attributes, repeated, 4-byte aligned
//!              ... then a last nlmsghdr of type NLMSG_DONE
//! ```
//!
//! Header and body integers are in host byte order, ports and addresses in network order. Like
//! [`super::procfs`], this is right for bytes made by the kernel the engine runs on; the test
//! fixtures were captured on a little-endian host.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The netlink protocol number to open the socket with (`NETLINK_SOCK_DIAG`).
pub const NETLINK_SOCK_DIAG: i32 = 4;

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const IPPROTO_TCP: u8 = 6;
const TCP_LISTEN: u8 = 10;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
const NLMSGHDR_LEN: usize = 16;
const INET_DIAG_MSG_LEN: usize = 72;

/// Which listening sockets to ask for: sock_diag answers one address family per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpFamily {
    /// `AF_INET`.
    V4,
    /// `AF_INET6` (includes dual-stack `::` sockets).
    V6,
}

/// A listening TCP socket as inet_diag reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiagListener {
    /// The address and port it listens on.
    pub local: SocketAddr,
    /// The socket inode (as in `/proc/net/tcp` and `/proc/<pid>/fd`).
    pub inode: u32,
    /// `idiag_rqueue`: connections waiting for `accept()` (`sk_ack_backlog`).
    pub accept_queue_len: u32,
    /// `idiag_wqueue`: the backlog (`sk_max_ack_backlog`). The queue counts as full, and the kernel
    /// drops handshakes and counts `ListenOverflows`, when the length is *above* this, so a full
    /// queue reads one more than this.
    pub accept_queue_max: u32,
}

/// What one received datagram held.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DiagDump {
    /// The listening sockets in it.
    pub listeners: Vec<DiagListener>,
    /// True when it ended the dump (`NLMSG_DONE`): stop reading.
    pub done: bool,
}

/// A datagram that is not a well-formed sock_diag answer, or the kernel's refusal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiagError {
    /// The bytes end inside a message.
    #[error("sock_diag: truncated message at byte {0}")]
    Truncated(usize),
    /// The kernel answered `NLMSG_ERROR` (or ended the dump) with this negative errno.
    #[error("sock_diag: the kernel answered errno {0}")]
    Kernel(i32),
}

/// The request for every TCP socket in the LISTEN state of `family`, with sequence number `seq`.
pub fn listen_dump_request(family: IpFamily, seq: u32) -> Vec<u8> {
    let len = NLMSGHDR_LEN + 56;
    let mut b = Vec::with_capacity(len);
    b.extend_from_slice(&(len as u32).to_ne_bytes());
    b.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    b.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    b.extend_from_slice(&seq.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it in
    // inet_diag_req_v2: family, protocol, extensions (none), pad, states bitmask, then a zeroed
    // inet_diag_sockid (a dump ignores it).
    b.push(match family {
        IpFamily::V4 => AF_INET,
        IpFamily::V6 => AF_INET6,
    });
    b.push(IPPROTO_TCP);
    b.push(0);
    b.push(0);
    b.extend_from_slice(&(1u32 << TCP_LISTEN).to_ne_bytes());
    b.resize(len, 0);
    b
}

/// Parse one received datagram of a dump. Messages other than socket records, ACKs and the end
/// are skipped; sockets not in the LISTEN state are left out.
pub fn parse_dump(buf: &[u8]) -> Result<DiagDump, DiagError> {
    let mut out = DiagDump::default();
    let mut at = 0;
    while at + NLMSGHDR_LEN <= buf.len() {
        let len = u32_at(buf, at) as usize;
        let kind = u16::from_ne_bytes([buf[at + 4], buf[at + 5]]);
        if len < NLMSGHDR_LEN || len > buf.len() - at {
            return Err(DiagError::Truncated(at));
        }
        let body = &buf[at + NLMSGHDR_LEN..at + len];
        match kind {
            NLMSG_DONE => {
                // The payload is an int: 0, or a negative errno when the dump failed midway.
                let code = body.get(..4).map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                if code < 0 {
                    return Err(DiagError::Kernel(code));
                }
                out.done = true;
                return Ok(out);
            }
            NLMSG_ERROR => {
                let code = body.get(..4).map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                match code {
                    Some(0) => {} // an ACK
                    Some(e) => return Err(DiagError::Kernel(e)),
                    None => return Err(DiagError::Truncated(at)),
                }
            }
            SOCK_DIAG_BY_FAMILY => {
                if body.len() < INET_DIAG_MSG_LEN {
                    return Err(DiagError::Truncated(at));
                }
                if let Some(l) = listener(body) {
                    out.listeners.push(l);
                }
            }
            // NLMSG_NOOP and anything newer: nothing for us.
            _ => {}
        }
        // Messages are padded to 4 bytes (NLMSG_ALIGN); the last one may not be.
        at += len.next_multiple_of(4);
    }
    if at < buf.len() {
        return Err(DiagError::Truncated(at));
    }
    Ok(out)
}

/// An `inet_diag_msg` of a listen socket: family, state, timer, retrans; sockid (sport and dport
/// big-endian, src and dst 16 bytes each, interface, cookie); expires, rqueue, wqueue, uid, inode.
fn listener(m: &[u8]) -> Option<DiagListener> {
    if m[1] != TCP_LISTEN {
        return None;
    }
    let port = u16::from_be_bytes([m[4], m[5]]);
    let src = &m[8..24];
    let ip = match m[0] {
        AF_INET => IpAddr::V4(Ipv4Addr::new(src[0], src[1], src[2], src[3])),
        AF_INET6 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(src);
            IpAddr::V6(Ipv6Addr::from(a))
        }
        _ => return None,
    };
    Some(DiagListener {
        local: SocketAddr::new(ip, port),
        accept_queue_len: u32_at(m, 56),
        accept_queue_max: u32_at(m, 60),
        inode: u32_at(m, 68),
    })
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
