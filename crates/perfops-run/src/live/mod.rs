//! `--live [ADDR]`: the report page served while the run goes, fed second
//! by second over Server-Sent Events, steered from its buttons, and
//! becoming the final report at the end.
//!
//! ```text
//!   collector thread                      the server's thread (server.rs)
//!   ────────────────                      ───────────────────────────────
//!   start(meta)  -> page rendered once    GET /        the page
//!   second(s)    -> one JSON line, framed GET /events  the log from Last-Event-ID on
//!                   and appended (log.rs) GET /report  the final report
//!                   (with the stages it closed, judged; what was watched;
//!                   failing exchanges, the first few of each step and kind: `shown`)
//!   report(html) -> kept for GET /report  POST /control -> Steer (a thread per action)
//!   finish(end)  -> verdicts, `final`;
//!                   waits (≤ 10 s) for the open pages to take the report
//! ```
//!
//! This module owns what the run and the server share ([`Shared`]), the
//! output ([`Live`]) and who may ask (the token: [`Live::bind`]). It does
//! not own the page or what an event says (`perfops_report::html::live`)
//! nor what an action does (the run's `Steer`).
//!
//! **Cheap on the collector thread.** `second` formats one line of JSON
//! (~170 µs with 5 steps of 20,000 requests each: `perfops_report::html::live`,
//! and `tests::second_cost` with the append) and appends it under
//! a lock the server holds only to look up a client's next event: no
//! socket is touched there, whatever the browsers do.
//!
//! **Safe by default.** On a loopback address no token is asked (the
//! server still refuses other sites' pages and non-loopback Host names).
//! On any other address every route needs the token, which results may
//! make sensitive (URLs, failure bodies): from `PERFOPS_LIVE_TOKEN`, else
//! 32 random bytes, said once on stderr in the page's address. Never from a
//! flag (the command line is kept in `meta.json`), never written to results.

mod log;
mod server;

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use perfops_core::measure::SampleBound;
use perfops_core::pipeline::control::Steer;
use perfops_core::pipeline::{Second, SinkError};
use perfops_report::html::live as page;
use perfops_report::output::{End, Output};
use perfops_report::run::RunMeta;

pub use log::{Kind, Log};

/// Where `--live` listens when given no address (k6's dashboard port).
pub const DEFAULT_ADDR: &str = "127.0.0.1:5665";
/// The environment variable a token is taken from.
pub const TOKEN_ENV: &str = "PERFOPS_LIVE_TOKEN";
/// How long the end waits for open pages to take the final report.
pub const FINAL_WAIT: Duration = Duration::from_secs(10);

/// What the run and the server share.
pub(crate) struct Shared {
    log: Mutex<Log>,
    page: Mutex<Option<Arc<str>>>,
    report: Mutex<Option<Arc<str>>>,
    steer: Mutex<Option<Arc<dyn Steer>>>,
    token: Option<String>,
    stop: AtomicBool,
    /// Event streams open now.
    streams: AtomicUsize,
    /// `GET /report` answered.
    taken: AtomicUsize,
    /// Actions being taken.
    acting: Arc<AtomicUsize>,
}

/// The live page of one run: an output, and the server behind it.
pub struct Live {
    shared: Arc<Shared>,
    /// The failing exchanges sent so far: the first few of each step and kind.
    shown: SampleBound,
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl Live {
    /// Bind `addr` now (a busy address fails before any load) and serve.
    /// `token`: the one to ask for off loopback (`None` there: one is made);
    /// ignored on loopback. Says the page's address on stderr.
    pub fn bind(addr: &str, token: Option<String>) -> Result<Live, String> {
        Live::bind_as(addr, token, false)
    }

    /// [`Live::bind`]; `always`: ask for the token on loopback too (the
    /// tests, which may listen on loopback only).
    pub(crate) fn bind_as(addr: &str, token: Option<String>, always: bool) -> Result<Live, String> {
        let first = addr
            .to_socket_addrs()
            .map_err(|e| format!("--live {addr}: not an address to listen on ({e})"))?
            .next()
            .ok_or_else(|| format!("--live {addr}: resolves to no address"))?;
        let listener = TcpListener::bind(first).map_err(|e| format!("--live {addr}: cannot listen ({e})"))?;
        let local = listener.local_addr().map_err(|e| format!("--live {addr}: {e}"))?;
        let token = match local.ip().is_loopback() && !always {
            true => None,
            false => Some(match token.filter(|t| !t.is_empty()) {
                Some(t) => t,
                None => random_token()?,
            }),
        };
        let shared = Arc::new(Shared {
            log: Mutex::new(Log::default()),
            page: Mutex::new(None),
            report: Mutex::new(None),
            steer: Mutex::new(None),
            token,
            stop: AtomicBool::new(false),
            streams: AtomicUsize::new(0),
            taken: AtomicUsize::new(0),
            acting: Arc::new(AtomicUsize::new(0)),
        });
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("perfops-live".into())
                .spawn(move || server::serve(&listener, &shared))
                .map_err(|e| format!("cannot start the live page's thread: {e}"))?
        };
        let live = Live { shared, shown: SampleBound::default(), addr: local, thread: Some(thread) };
        match &live.shared.token {
            None => note!("live page: {}", live.url()),
            Some(t) => note!(
                "live page: {}?token={t} (the token guards the page and its control: share it as a password)",
                live.url()
            ),
        }
        Ok(live)
    }

    /// Where it listens (the port picked when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR/`, without the token.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Events kept, and the bytes they take (for tests and the docs' figures).
    pub fn log_size(&self) -> (usize, usize) {
        self.shared.log.lock().unwrap_or_else(PoisonError::into_inner).size()
    }

    fn push(&self, kind: Kind, json: &str) {
        self.shared.log.lock().unwrap_or_else(PoisonError::into_inner).push(kind, json);
    }
}

/// 32 random bytes, in hex.
fn random_token() -> Result<String, String> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| "no randomness for the live page's token".to_string())?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

impl Output for Live {
    fn start(&mut self, meta: &RunMeta) -> Result<(), SinkError> {
        *self.shared.page.lock().unwrap_or_else(PoisonError::into_inner) = Some(page::page(meta).into());
        Ok(())
    }

    /// One line of JSON appended to the log: no socket is touched here.
    fn second(&mut self, second: &Second<'_>) -> Result<(), SinkError> {
        let line = page::second_event(second, &mut self.shown);
        self.push(Kind::Second, &line);
        Ok(())
    }

    fn report(&mut self, html: &str) {
        *self.shared.report.lock().unwrap_or_else(PoisonError::into_inner) = Some(html.into());
    }

    /// The verdicts, then `final`: open pages fetch the report (or freeze,
    /// for `quick`); waits until they all took it, at most [`FINAL_WAIT`].
    fn finish(&mut self, end: &End<'_>) -> Result<(), SinkError> {
        if let End::Run(summary) = end {
            self.push(Kind::Stages, &page::stages_event(summary));
        }
        let has_report = self.shared.report.lock().unwrap_or_else(PoisonError::into_inner).is_some();
        // The pages open now (counted by the server at each poll): a stream
        // closes once it has sent `final`, so count before.
        let browsers = self.shared.streams.load(Ordering::Relaxed);
        self.push(Kind::Final, if has_report { r#"{"report":"/report"}"# } else { r#"{"report":null}"# });
        let deadline = Instant::now() + if has_report { FINAL_WAIT } else { Duration::from_secs(1) };
        let waiting = |s: &Shared| match has_report {
            true => s.taken.load(Ordering::Relaxed) < browsers,
            false => s.streams.load(Ordering::Relaxed) > 0,
        };
        if browsers > 0 && has_report {
            note!(
                "live page: waiting for {browsers} browser{} to take the final report",
                if browsers == 1 { "" } else { "s" }
            );
        }
        while waiting(&self.shared) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    fn steer(&mut self, steer: Arc<dyn Steer>) {
        *self.shared.steer.lock().unwrap_or_else(PoisonError::into_inner) = Some(steer);
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests;
