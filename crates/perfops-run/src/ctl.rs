//! `perfops ctl ADDR stop|hold|next|rate N`: an action sent to a running
//! load's live page (`POST /control`, see `crate::live`), from a shell.
//!
//! This module owns the client: one HTTP/1.1 exchange, the token from
//! `PERFOPS_LIVE_TOKEN` (never a flag: shell histories and `ps` keep
//! those), the answer read within [`TIMEOUT`] and at most [`MAX_ANSWER`]
//! bytes, and what each answer means as an exit code: 0 applied, 1 refused
//! by the run (409), 2 the user's (a bad action, a wrong token), 3 nothing
//! answered there.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use anyhow::Result;
use perfops_core::pipeline::control::{Action, ControlEvent};

use crate::exit::{Exit, UsageError};
use crate::live::TOKEN_ENV;

/// How long the whole exchange may take: a fleet's action waits for an
/// instant every agent agrees on (a second or two).
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// The most of an answer read: a ControlEvent or a reason is a line.
pub const MAX_ANSWER: u64 = 64 * 1024;

/// What `perfops ctl` was told.
#[derive(Debug, Clone)]
pub struct CtlArgs {
    /// `HOST:PORT`, or the page's address (`http://HOST:PORT/`).
    pub addr: String,
    /// The action's words: `stop`, `hold`, `next`, `rate 300`.
    pub action: Vec<String>,
}

/// What the live server said.
#[derive(Debug, PartialEq)]
pub enum Answer {
    /// Applied: the event as the results record it.
    Applied(ControlEvent),
    /// Refused by the run (409), or busy (503): why.
    Refused(String),
    /// The token is missing or wrong (401, 403).
    Unauthorized(String),
    /// Anything else: its status and body.
    Other(u16, String),
}

/// `host:port` out of `ADDR` as a user may give it.
fn host_port(addr: &str) -> &str {
    let rest = addr.strip_prefix("http://").unwrap_or(addr);
    rest.split(['/', '?']).next().unwrap_or(rest)
}

/// Send `action` to the live page at `addr`.
pub fn send(addr: &str, action: Action, token: Option<&str>) -> std::io::Result<Answer> {
    let hp = host_port(addr);
    let target = hp
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "resolves to no address"))?;
    let mut s = TcpStream::connect_timeout(&target, TIMEOUT)?;
    s.set_read_timeout(Some(TIMEOUT))?;
    s.set_write_timeout(Some(TIMEOUT))?;
    let body = action.to_string();
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let request = format!(
        "POST /control HTTP/1.1\r\nHost: {hp}\r\nContent-Type: text/plain\r\nX-Perfops-By: ctl\r\n{auth}\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes())?;
    let mut raw = Vec::new();
    s.take(MAX_ANSWER).read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let code: u16 = text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b).trim().to_string();
    Ok(match code {
        200 => match serde_json::from_str::<ControlEvent>(&body) {
            Ok(e) => Answer::Applied(e),
            Err(_) => Answer::Other(code, body),
        },
        409 | 503 => Answer::Refused(body),
        401 | 403 => Answer::Unauthorized(body),
        _ => Answer::Other(code, body),
    })
}

/// What an applied event says: `rate 300 at t=42 (stage "steady")`.
pub fn applied(e: &ControlEvent) -> String {
    let value = e.value.map(|v| format!(" {v}")).unwrap_or_default();
    format!("{}{value} at t={:.0} (stage \"{}\")", e.action, e.t, perfops_core::printable::escape(&e.stage))
}

/// `perfops ctl`.
pub fn run(args: CtlArgs) -> Result<Exit> {
    let action = Action::parse(&args.action.join(" ")).map_err(|e| anyhow::Error::new(UsageError(e)))?;
    let token = std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty());
    let printable = perfops_core::printable::lines;
    Ok(match send(&args.addr, action, token.as_deref()) {
        Ok(Answer::Applied(e)) => {
            crate::say::out(&format!("{}\n", applied(&e)));
            Exit::Passed
        }
        Ok(Answer::Refused(why)) => {
            note!("{action}: refused by the run: {}", printable(&why));
            Exit::ThresholdsFailed
        }
        Ok(Answer::Unauthorized(why)) => {
            let hint = if token.is_none() {
                format!(" (set {TOKEN_ENV} to the token the run printed)")
            } else {
                String::new()
            };
            note!("{action}: not allowed: {}{hint}", printable(&why));
            Exit::Usage
        }
        Ok(Answer::Other(code, why)) => {
            note!("{action}: the live page answered {code}: {}", printable(&why));
            if code == 400 { Exit::Usage } else { Exit::Runtime }
        }
        Err(e) => {
            note!("{action}: cannot reach a live page at {} ({e})", printable(host_port(&args.addr)));
            Exit::Runtime
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use perfops_core::pipeline::control::Steer;
    use perfops_report::output::Output;

    use super::*;
    use crate::live::Live;

    struct Takes(Mutex<u32>);

    impl Steer for Takes {
        fn act(&self, action: Action, by: &str) -> Result<ControlEvent, String> {
            *self.0.lock().unwrap() += 1;
            match action {
                Action::Hold => Err("the run is over".into()),
                a => Ok(ControlEvent {
                    t: 42.4,
                    action: a.name().into(),
                    value: a.value(),
                    stage: "steady".into(),
                    by: by.into(),
                }),
            }
        }
    }

    /// Against a real live server: applied, refused, unauthorized, and
    /// nothing listening; the address as the page's URL too.
    #[test]
    fn each_answer_of_the_live_page() {
        let mut live = Live::bind("127.0.0.1:0", None).expect("bind");
        let addr = live.local_addr().to_string();
        assert_eq!(send(&addr, Action::Stop, None).unwrap(), Answer::Refused("this run takes no control".into()));
        live.steer(Arc::new(Takes(Mutex::new(0))));
        let Answer::Applied(e) = send(&format!("http://{addr}/"), Action::Rate(300.0), None).unwrap() else {
            panic!("not applied")
        };
        assert_eq!(e.by, "ctl");
        assert_eq!(applied(&e), "rate 300 at t=42 (stage \"steady\")");
        assert_eq!(send(&addr, Action::Hold, None).unwrap(), Answer::Refused("the run is over".into()));
        let guarded = Live::bind_as("127.0.0.1:0", Some("t0k".into()), true).expect("bind");
        let guarded_addr = guarded.local_addr().to_string();
        assert!(matches!(send(&guarded_addr, Action::Stop, None).unwrap(), Answer::Unauthorized(_)));
        assert!(matches!(send(&guarded_addr, Action::Stop, Some("t0k")).unwrap(), Answer::Refused(_)));
        drop(live);
        assert!(send(&addr, Action::Stop, None).is_err(), "nothing listens there any more");
    }

    #[test]
    fn addresses_as_users_give_them() {
        for (given, want) in [
            ("127.0.0.1:5665", "127.0.0.1:5665"),
            ("http://127.0.0.1:5665/", "127.0.0.1:5665"),
            ("http://127.0.0.1:5665/?token=x", "127.0.0.1:5665"),
            ("[::1]:5665", "[::1]:5665"),
        ] {
            assert_eq!(host_port(given), want, "{given}");
        }
    }
}
