//! How much of a closed-loop client's CPU goes to being woken up, and what
//! batching wake-ups costs the measurement: a minimal io_uring HTTP/1.1 client
//! (no parser worth the name, no timeouts, no TLS) for `bench/wakeups.sh`.
//!
//!     wakeups PORT CONNS SECONDS NAP_US
//!
//! Each of CONNS keep-alive connections to 127.0.0.1:PORT loops GET / ->
//! response. One `io_uring_enter` per wake-up submits the new requests and
//! waits for at least one completion. With NAP_US > 0 the loop first sleeps
//! NAP_US (timer slack 1 ns) whenever it runs out of work, so responses pile up
//! and one wake-up serves several: fewer wake-ups, but every response that
//! arrives during a nap is seen late, which the printed latency shows.
//!
//! Prints one line: rps, user and system µs per request, CPU s per 100k
//! requests (getrusage), wake-ups per request, mean nap, and the p50/p99 of
//! the latency as the client sees it (submit -> completion reaped).

use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use io_uring::{IoUring, opcode, squeue, types};

const REQ: &[u8] = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: perfops/0.1.0\r\n\r\n";

struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    have: usize,
    sent: Instant,
}

/// Whether `b` holds a whole response: a head and Content-Length bytes of body.
fn complete(b: &[u8]) -> bool {
    let Some(end) = b.windows(4).position(|w| w == b"\r\n\r\n") else { return false };
    let body = b[..end]
        .split(|&c| c == b'\n')
        .find(|l| l.len() > 15 && l[..15].eq_ignore_ascii_case(b"content-length:"))
        .and_then(|l| std::str::from_utf8(&l[15..]).ok()?.trim().parse::<usize>().ok())
        .unwrap_or(0);
    b.len() >= end + 4 + body
}

/// Queues conn `i`'s request and, linked behind it, the read of its response.
fn push_request(ring: &mut IoUring, i: usize, c: &mut Conn) {
    let fd = types::Fd(c.stream.as_raw_fd());
    let send = opcode::Send::new(fd, REQ.as_ptr(), REQ.len() as u32)
        .build()
        .flags(squeue::Flags::IO_LINK | squeue::Flags::SKIP_SUCCESS)
        .user_data(((i as u64) << 1) | 1);
    c.have = 0;
    c.sent = Instant::now();
    push_recv(ring, i, c, Some(send));
}

fn push_recv(ring: &mut IoUring, i: usize, c: &mut Conn, before: Option<squeue::Entry>) {
    let fd = types::Fd(c.stream.as_raw_fd());
    let spare = &mut c.buf[c.have..];
    let recv = opcode::Recv::new(fd, spare.as_mut_ptr(), spare.len() as u32).build().user_data((i as u64) << 1);
    // SAFETY: the buffers (REQ, and conn i's `buf`, which is never resized) outlive
    // the operations: the ring is drained of conn i's completion before `buf` is
    // touched again, and the process exits without dropping the conns mid-flight.
    unsafe {
        let mut sq = ring.submission();
        if let Some(send) = before {
            sq.push(&send).expect("ring sized for every conn");
        }
        sq.push(&recv).expect("ring sized for every conn");
    }
}

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).map(|a| a.parse().expect("PORT CONNS SECONDS NAP_US")).collect();
    let [port, conns, seconds, nap_us] = args[..] else { panic!("usage: wakeups PORT CONNS SECONDS NAP_US") };
    // SAFETY: prctl(PR_SET_TIMERSLACK) takes a plain integer; it only changes this thread's timer slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    let now = Instant::now();
    let mut conn: Vec<Conn> = (0..conns)
        .map(|_| {
            let stream = TcpStream::connect(("127.0.0.1", port as u16)).expect("connect");
            stream.set_nodelay(true).expect("TCP_NODELAY");
            Conn { stream, buf: vec![0; 16 << 10], have: 0, sent: now }
        })
        .collect();
    let mut ring: IoUring = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build((4 * conns as u32).next_power_of_two())
        .expect("io_uring");
    for (i, c) in conn.iter_mut().enumerate() {
        push_request(&mut ring, i, c);
    }
    let start = Instant::now();
    let end = start + Duration::from_secs(seconds);
    let (mut done, mut wakeups, mut naps, mut napped) = (0u64, 0u64, 0u64, Duration::ZERO);
    let mut latency_us: Vec<u32> = Vec::with_capacity(1 << 20);
    let mut reaped = Vec::with_capacity(conns as usize);
    loop {
        if nap_us > 0 {
            ring.submit().expect("submit");
            let t = Instant::now();
            std::thread::sleep(Duration::from_micros(nap_us));
            napped += t.elapsed();
            naps += 1;
        }
        ring.submit_and_wait(1).expect("io_uring_enter");
        wakeups += 1;
        let now = Instant::now();
        if now >= end {
            break;
        }
        reaped.clear();
        reaped.extend(ring.completion().map(|cqe| (cqe.user_data(), cqe.result())));
        for &(data, res) in &reaped {
            let i = (data >> 1) as usize;
            assert!(data & 1 == 0, "send on conn {i} failed: {res}");
            assert!(res > 0, "recv on conn {i}: {res}");
            let c = &mut conn[i];
            c.have += res as usize;
            if complete(&c.buf[..c.have]) {
                done += 1;
                latency_us.push(now.duration_since(c.sent).as_micros() as u32);
                push_request(&mut ring, i, c);
            } else {
                push_recv(&mut ring, i, c, None);
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let (user, sys) = (tv(usage.ru_utime), tv(usage.ru_stime));
    latency_us.sort_unstable();
    let q = |p: f64| latency_us[((latency_us.len() - 1) as f64 * p) as usize];
    println!(
        "nap_us {nap_us} rps {:.0} user_us {:.2} sys_us {:.2} cpu_s_per_100k {:.3} wakeups_per_req {:.3} mean_nap_us {:.1} p50_us {} p99_us {}",
        done as f64 / secs,
        user * 1e6 / done as f64,
        sys * 1e6 / done as f64,
        (user + sys) * 1e5 / done as f64,
        wakeups as f64 / done as f64,
        if naps > 0 { napped.as_secs_f64() * 1e6 / naps as f64 } else { 0.0 },
        q(0.5),
        q(0.99),
    );
}
