//! What the coordinator decides about a peer before it trusts it, as pure
//! functions with no socket and no clock (issue #31): the handshake's
//! state machine ([`Gate`]), how many handshakes may run at once
//! ([`Admission`]), how a peer's words are made safe to print and store
//! ([`sanitize`]) and how many lines a flood of refused peers may write
//! ([`Hush`]). The sockets, TLS and deadlines around them are
//! `accept.rs`'s; the proofs themselves are [`super::auth`]'s.
//!
//! Being pure is what lets the property tests below feed the gate
//! arbitrary messages and bytes: it never panics, and it never lets a peer
//! through without the token.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use perfops_core::fleet::clock::{self, Estimate, Sample};
use perfops_core::fleet::wire::{Control, Layout, Names, PROTOCOL};
use perfops_core::measure::FailureKind;

use super::auth::{self, Binding, Role};

/// Clock probes per agent; the quickest [`clock::KEEP`] decide.
pub(crate) const PROBES: usize = 8;

/// The longest name kept of what a peer calls itself (characters).
pub(crate) const NAME_CHARS: usize = 64;

/// The longest reason kept of what a peer says (characters).
pub(crate) const REASON_CHARS: usize = 512;

/// `s` safe to print on a terminal and to store: control characters (C0,
/// DEL, C1: an ANSI escape starts with ESC, U+001B) and the Unicode marks
/// that reorder or hide text (bidirectional overrides, zero-width
/// characters) escaped as everything printed from outside is
/// ([`perfops_core::printable`]), and at most `max` characters kept
/// (then `…`). A peer chooses its name and its reasons: unescaped, they
/// forge log lines; uncapped, a megabyte of name is kept in memory and in
/// `agents.jsonl`.
pub(crate) fn sanitize(s: &str, max: usize) -> String {
    // Capped first: a megabyte of name is never escaped whole.
    let kept: String = s.chars().take(max).collect();
    let mut out = perfops_core::printable::escape(&kept).into_owned();
    if s.chars().nth(max).is_some() {
        out.push('…');
    }
    out
}

/// How far the handshake got.
enum State {
    /// Waiting for the agent's hello.
    Hello,
    /// The challenge sent; waiting for the agent's proof.
    Proof { nonce_a: String, claim: Option<u32>, name: String, layout: Layout },
    /// The agent proved; clock probe `t0` sent, waiting for its pong.
    Probe { claim: Option<u32>, name: String, t0: i64, layout: Layout },
    /// Passed or refused: nothing more is taken.
    Over,
}

/// What the coordinator does after a message.
#[derive(Debug, PartialEq)]
pub(crate) enum Next {
    /// Send these (maybe none) and wait for the next message.
    Say(Vec<Control>),
    /// Refuse the peer: tell it `tell` (if any) and close; `log` says why
    /// (sanitised, empty for a peer that is not worth a line).
    Refuse { tell: Option<String>, log: String },
    /// The agent proved the token and its clock is within bound.
    Passed { name: String, claim: Option<u32>, estimate: Estimate, layout: Layout },
}

/// The coordinator's side of one handshake (see [`super::auth`]'s sketch),
/// then its clock probes. Fed each control message the peer sends, with
/// the coordinator's wall clock when it came; says what to do.
pub(crate) struct Gate<'a> {
    token: &'a str,
    binding: Binding,
    nonce_c: String,
    max_offset: Duration,
    state: State,
    samples: Vec<Sample>,
}

impl<'a> Gate<'a> {
    /// A gate for a peer whose TLS session exported `binding`; `nonce_c` is
    /// the coordinator's fresh nonce ([`auth::nonce`]).
    pub(crate) fn new(token: &'a str, binding: Binding, nonce_c: String, max_offset: Duration) -> Gate<'a> {
        Gate { token, binding, nonce_c, max_offset, state: State::Hello, samples: Vec::new() }
    }

    /// What to do on `msg`, which came at `now_ns` (the coordinator's wall
    /// clock, ns since the epoch; also the next probe's `t0`).
    pub(crate) fn on(&mut self, msg: Control, now_ns: i64) -> Next {
        if msg == Control::Heartbeat && !matches!(self.state, State::Over) {
            return Next::Say(Vec::new());
        }
        match (std::mem::replace(&mut self.state, State::Over), msg) {
            (State::Hello, Control::Hello { protocol, nonce, index, name, counters, kinds }) => {
                let name = sanitize(&name, NAME_CHARS);
                if protocol != PROTOCOL {
                    let reason =
                        format!("protocol {protocol}, this coordinator speaks {PROTOCOL}: use the same perfops");
                    return Next::Refuse { tell: Some(reason.clone()), log: format!("agent {name}: {reason}") };
                }
                if !auth::is_nonce(&nonce) {
                    return Next::Refuse { tell: None, log: format!("agent {name}: a malformed nonce") };
                }
                // The names its seconds will be read by: checked (count, length, characters)
                // within the handshake's frame limit, before anything is kept of them.
                let layout = match Layout::of(&Names { counters, kinds }, &FailureKind::ALL) {
                    Ok(layout) => layout,
                    Err(e) => return Next::Refuse { tell: None, log: format!("agent {name}: {e}") },
                };
                self.state = State::Proof { nonce_a: nonce, claim: index, name, layout };
                // The challenge holds nothing that depends on the token.
                Next::Say(vec![Control::Challenge { nonce: self.nonce_c.clone() }])
            }
            (State::Proof { nonce_a, claim, name, layout }, Control::Proof { proof }) => {
                if !auth::check(self.token, Role::Agent, &self.binding, &self.nonce_c, &nonce_a, &proof) {
                    let reason = "wrong token".to_string();
                    return Next::Refuse { tell: Some(reason.clone()), log: format!("agent {name}: {reason}") };
                }
                let own = auth::prove(self.token, Role::Coordinator, &self.binding, &nonce_a, &self.nonce_c);
                self.state = State::Probe { claim, name, t0: now_ns, layout };
                Next::Say(vec![Control::Accepted { proof: own }, Control::Ping { t0: now_ns }])
            }
            (State::Proof { name, .. } | State::Probe { name, .. }, Control::Refused { reason }) => Next::Refuse {
                tell: None,
                log: format!("agent {name} refused this coordinator: {}", sanitize(&reason, REASON_CHARS)),
            },
            (State::Probe { claim, name, t0, layout }, Control::Pong { t0: back, t1, t2 }) if back == t0 => {
                self.samples.push(Sample { t0, t1, t2, t3: now_ns });
                if self.samples.len() < PROBES {
                    self.state = State::Probe { claim, name, t0: now_ns, layout };
                    return Next::Say(vec![Control::Ping { t0: now_ns }]);
                }
                self.decide(claim, name, layout)
            }
            (State::Over, _) => Next::Refuse { tell: None, log: "spoke after the handshake ended".into() },
            (State::Hello, other) => {
                Next::Refuse { tell: None, log: format!("said {} instead of hello", other.kind()) }
            }
            (State::Proof { name, .. }, other) => {
                Next::Refuse { tell: None, log: format!("agent {name}: said {} instead of its proof", other.kind()) }
            }
            (State::Probe { name, .. }, other) => {
                Next::Refuse { tell: None, log: format!("agent {name}: said {} to a clock probe", other.kind()) }
            }
        }
    }

    fn decide(&mut self, claim: Option<u32>, name: String, layout: Layout) -> Next {
        let Some(estimate) = clock::estimate(&self.samples) else {
            return Next::Refuse {
                tell: None,
                log: format!("agent {name}: no usable clock probe (the clock moved while probing)"),
            };
        };
        if estimate.offset_ns.unsigned_abs() > self.max_offset.as_nanos() as u64 {
            let reason = format!(
                "clock offset {:+.1} ms (round trip {:.1} ms) is above the bound of {:?}: synchronise the clocks \
                 (NTP, chrony) or raise --max-clock-offset",
                estimate.offset_ns as f64 / 1e6,
                estimate.rtt_ns as f64 / 1e6,
                self.max_offset
            );
            return Next::Refuse { tell: Some(reason.clone()), log: format!("agent {name}: {reason}") };
        }
        Next::Passed { name, claim, estimate, layout }
    }
}

/// How many handshakes may run at once, in all and per source address:
/// beyond, a connection is closed as soon as it is accepted. A stranger
/// then holds at most `per_addr` handshakes of the coordinator's, each for
/// at most the handshake's deadline.
#[derive(Debug)]
pub(crate) struct Admission {
    total: usize,
    per_addr: usize,
    open: usize,
    by_addr: HashMap<IpAddr, usize>,
}

impl Admission {
    pub(crate) fn new(total: usize, per_addr: usize) -> Admission {
        Admission { total, per_addr, open: 0, by_addr: HashMap::new() }
    }

    /// May a handshake from `ip` start? If so it is counted until [`Admission::leave`].
    pub(crate) fn enter(&mut self, ip: IpAddr) -> bool {
        let here = self.by_addr.get(&ip).copied().unwrap_or(0);
        if self.open >= self.total || here >= self.per_addr {
            return false;
        }
        self.open += 1;
        self.by_addr.insert(ip, here + 1);
        true
    }

    /// A handshake from `ip` ended (passed, refused or timed out).
    pub(crate) fn leave(&mut self, ip: IpAddr) {
        self.open = self.open.saturating_sub(1);
        if let Some(n) = self.by_addr.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                // Forgotten at zero: a flood from many addresses leaves no map behind.
                self.by_addr.remove(&ip);
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn open(&self) -> usize {
        self.open
    }
}

/// A token bucket for log lines about refused peers: `burst` at once, then
/// one per `every`; what it holds back is counted and said with the next
/// line let through, so a flood costs a few lines, not a terminal.
#[derive(Debug)]
pub(crate) struct Hush {
    burst: u32,
    every: Duration,
    tokens: u32,
    /// When the last token was added (a caller's clock: tests pass their own).
    refilled: Duration,
    held: u64,
}

impl Hush {
    pub(crate) fn new(burst: u32, every: Duration) -> Hush {
        Hush { burst, every, tokens: burst, refilled: Duration::ZERO, held: 0 }
    }

    /// May a line be written at `now` (any monotonic clock)? `Some(n)`: yes,
    /// and `n` lines were held back since the last one; `None`: held back.
    pub(crate) fn allow(&mut self, now: Duration) -> Option<u64> {
        let gained = (now.saturating_sub(self.refilled).as_nanos() / self.every.as_nanos().max(1)) as u32;
        if gained > 0 {
            self.tokens = self.tokens.saturating_add(gained).min(self.burst);
            self.refilled = now;
        }
        if self.tokens == 0 {
            self.held += 1;
            return None;
        }
        self.tokens -= 1;
        Some(std::mem::take(&mut self.held))
    }

    /// The lines held back since the last one let through, forgotten.
    pub(crate) fn take_held(&mut self) -> u64 {
        std::mem::take(&mut self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfops_core::fleet::wire::{self, Message};
    use proptest::prelude::*;

    const T: &str = "3f9c1e0b7a52d8e4c6019ab2f47d3e85";
    const B: Binding = [5u8; 32];
    const ESC: char = '\u{1b}';

    fn gate() -> Gate<'static> {
        Gate::new(T, B, auth::nonce().unwrap(), Duration::from_millis(20))
    }

    fn hello(nonce: &str, name: &str) -> Control {
        let Names { counters, kinds } = Names::local();
        Control::Hello { protocol: PROTOCOL, nonce: nonce.into(), index: Some(1), name: name.into(), counters, kinds }
    }

    /// The agent's side, done right: the whole handshake passes.
    #[test]
    fn an_agent_with_the_token_passes_and_gets_the_coordinators_proof_only_after_its_own() {
        let mut g = gate();
        let nonce_a = auth::nonce().unwrap();
        let Next::Say(said) = g.on(hello(&nonce_a, "a1"), 0) else { panic!("a challenge") };
        let [Control::Challenge { nonce: nonce_c }] = &said[..] else { panic!("{said:?}") };
        // Issue #31: the challenge is the coordinator's nonce and nothing else.
        let json = serde_json::to_value(&said[0]).unwrap();
        assert_eq!(json.as_object().unwrap().len(), 2, "type and nonce only: {json}");
        let proof = auth::prove(T, Role::Agent, &B, nonce_c, &nonce_a);
        let Next::Say(said) = g.on(Control::Proof { proof }, 100) else { panic!("accepted") };
        let [Control::Accepted { proof }, Control::Ping { t0: 100 }] = &said[..] else { panic!("{said:?}") };
        assert!(auth::check(T, Role::Coordinator, &B, &nonce_a, nonce_c, proof), "the agent can check it");
        let mut t = 100;
        for k in 0..PROBES {
            // An agent whose clock reads the same as ours, 2 ms of round trip.
            let next = g.on(Control::Pong { t0: t, t1: t + 1_000_000, t2: t + 1_000_000 }, t + 2_000_000);
            t += 2_000_000;
            if k + 1 < PROBES {
                assert_eq!(next, Next::Say(vec![Control::Ping { t0: t }]), "probe {k}");
            } else {
                let Next::Passed { name, claim, estimate, layout } = next else { panic!("{next:?}") };
                assert_eq!(layout, Layout::local(), "an agent of this build: read as sent");
                assert_eq!((name.as_str(), claim, estimate.offset_ns), ("a1", Some(1), 0));
            }
        }
    }

    #[test]
    fn a_peer_that_cannot_prove_gets_nothing_that_depends_on_the_token() {
        let nonce_a = auth::nonce().unwrap();
        // (what the peer sends after its hello, the refusal it is told): one way to fail each.
        let cases: Vec<(Control, Option<&str>)> = vec![
            // A proof made with another token.
            (
                Control::Proof { proof: auth::prove("another-token-0123456789abcdef", Role::Agent, &B, "x", &nonce_a) },
                Some("wrong token"),
            ),
            // A proof made in another TLS session (a relay in the middle).
            (Control::Proof { proof: "00".repeat(32) }, Some("wrong token")),
            // No proof at all: the messages after it.
            (Control::Pong { t0: 0, t1: 0, t2: 0 }, None),
            (Control::Ready, None),
        ];
        for (i, (msg, tell)) in cases.into_iter().enumerate() {
            let mut g = gate();
            assert!(matches!(g.on(hello(&nonce_a, "x"), 0), Next::Say(_)), "case {i}");
            match g.on(msg, 0) {
                Next::Refuse { tell: got, .. } => assert_eq!(got.as_deref(), tell, "case {i}"),
                other => panic!("case {i}: {other:?}"),
            }
        }
        // Proved in another session (another binding): refused too.
        let mut g = gate();
        let Next::Say(said) = g.on(hello(&nonce_a, "x"), 0) else { panic!() };
        let [Control::Challenge { nonce: nonce_c }] = &said[..] else { panic!() };
        let relayed = auth::prove(T, Role::Agent, &[6u8; 32], nonce_c, &nonce_a);
        assert!(matches!(g.on(Control::Proof { proof: relayed }, 0), Next::Refuse { .. }));
    }

    #[test]
    fn hellos_that_are_refused_before_any_challenge() {
        // (hello, what the log says): each refused without a challenge.
        let cases = [
            // Another protocol: told so.
            (
                Control::Hello {
                    protocol: 3,
                    nonce: auth::nonce().unwrap(),
                    index: None,
                    name: "old".into(),
                    counters: Vec::new(),
                    kinds: Vec::new(),
                },
                "protocol 3",
            ),
            // An empty nonce: a proof over it could be replayed.
            (hello("", "n"), "malformed nonce"),
            // Names its seconds would be read by that no build declares: refused
            // before they are kept (the handshake's frame already bounds their size).
            (
                Control::Hello {
                    protocol: PROTOCOL,
                    nonce: auth::nonce().unwrap(),
                    index: None,
                    name: "n".into(),
                    counters: Names::local().counters,
                    kinds: vec!["timeout".into(), "timeout".into()],
                },
                "the failure kind `timeout` twice",
            ),
            (
                Control::Hello {
                    protocol: PROTOCOL,
                    nonce: auth::nonce().unwrap(),
                    index: None,
                    name: "n".into(),
                    counters: vec!["\u{1b}[2J".into()],
                    kinds: Names::local().kinds,
                },
                "a malformed counter name",
            ),
            // Not a hello at all.
            (Control::Proof { proof: "00".into() }, "said proof instead of hello"),
        ];
        for (msg, want) in cases {
            match gate().on(msg, 0) {
                Next::Refuse { log, .. } => assert!(log.contains(want), "{log}"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn names_and_reasons_are_escaped_and_capped() {
        // (what a peer sent, how it is printed and stored)
        let cases = [
            ("agent-7", "agent-7".to_string()),                             // plain: as it is
            ("\u{1b}[31mred\u{1b}[0m", "\\u{1b}[31mred\\u{1b}[0m".into()),  // ANSI escapes
            ("a\nperfops: forged line", "a\\nperfops: forged line".into()), // a forged log line
            ("\u{7f}\u{9b}", "\\u{7f}\\u{9b}".into()),                      // DEL and a C1 control (CSI)
            ("evil\u{202e}gnp.exe", "evil\\u{202e}gnp.exe".into()),         // a bidirectional override
            ("é日本", "é日本".into()),                                      // letters of any script stay
        ];
        for (raw, want) in cases {
            assert_eq!(sanitize(raw, NAME_CHARS), want, "{raw:?}");
        }
        let long = sanitize(&"x".repeat(1 << 20), NAME_CHARS);
        assert_eq!(long.chars().count(), NAME_CHARS + 1, "capped, then an ellipsis");
        // A name in the hello is sanitised at receipt, before it is used anywhere.
        let mut g = gate();
        let name = format!("\u{1b}]0;pwned\u{7}{}", "y".repeat(5000));
        g.on(hello(&auth::nonce().unwrap(), &name), 0);
        match g.on(Control::Proof { proof: String::new() }, 0) {
            Next::Refuse { log, .. } => {
                assert!(!log.contains('\u{1b}') && log.chars().count() < 200, "{log}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn admission_bounds_handshakes_in_all_and_per_address() {
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let mut adm = Admission::new(3, 2);
        // (address, admitted): the third from one address is refused, the fourth in all.
        let steps = [(a, true), (a, true), (a, false), (b, true), (b, false)];
        for (i, (ip, want)) in steps.into_iter().enumerate() {
            assert_eq!(adm.enter(ip), want, "step {i}");
        }
        adm.leave(a);
        assert!(adm.enter(b), "a slot freed is a slot for anyone");
        adm.leave(a);
        adm.leave(b);
        adm.leave(b);
        assert_eq!(adm.open(), 0);
        assert!(adm.by_addr.is_empty(), "no address remembered once its handshakes ended");
    }

    #[test]
    fn hush_lets_a_burst_through_then_one_line_per_period() {
        let mut h = Hush::new(3, Duration::from_secs(1));
        let at = |ms: u64| Duration::from_millis(ms);
        // (time, what `allow` says): three at once, then held back until a second passed.
        let steps = [(0, Some(0)), (1, Some(0)), (2, Some(0)), (3, None), (4, None), (1000, Some(2)), (1001, None)];
        for (i, (t, want)) in steps.into_iter().enumerate() {
            assert_eq!(h.allow(at(t)), want, "step {i}");
        }
        assert_eq!(h.take_held(), 1, "the one held back at the end, for the closing line");
        assert_eq!(h.take_held(), 0);
    }

    fn arbitrary_control() -> impl Strategy<Value = Control> {
        let s = || ".{0,80}";
        prop_oneof![
            (any::<u32>(), s(), proptest::option::of(any::<u32>()), s()).prop_map(|(protocol, nonce, index, name)| {
                Control::Hello {
                    protocol,
                    nonce,
                    index,
                    name,
                    counters: Names::local().counters,
                    kinds: Names::local().kinds,
                }
            }),
            (Just(PROTOCOL), "[0-9a-f]{64}", proptest::option::of(any::<u32>()), s()).prop_map(
                |(protocol, nonce, index, name)| Control::Hello {
                    protocol,
                    nonce,
                    index,
                    name,
                    counters: Names::local().counters,
                    kinds: Names::local().kinds,
                }
            ),
            s().prop_map(|proof| Control::Proof { proof }),
            "[0-9a-f]{64}".prop_map(|proof| Control::Proof { proof }),
            s().prop_map(|nonce| Control::Challenge { nonce }),
            s().prop_map(|proof| Control::Accepted { proof }),
            (any::<i64>(), any::<i64>(), any::<i64>()).prop_map(|(t0, t1, t2)| Control::Pong { t0, t1, t2 }),
            any::<i64>().prop_map(|t0| Control::Ping { t0 }),
            s().prop_map(|reason| Control::Refused { reason }),
            Just(Control::Heartbeat),
            Just(Control::Ready),
        ]
    }

    proptest! {
        /// Issue #31 point 8: arbitrary control messages, in any order,
        /// never panic the gate and never get a peer through without the token.
        #[test]
        fn arbitrary_messages_never_pass_without_the_token(
            msgs in proptest::collection::vec(arbitrary_control(), 0..24),
            clock in proptest::collection::vec(any::<i64>(), 24),
        ) {
            let mut g = gate();
            for (m, now) in msgs.into_iter().zip(clock) {
                match g.on(m, now) {
                    Next::Passed { .. } => prop_assert!(false, "passed without the token"),
                    Next::Say(said) => for c in said {
                        // Nothing said before a proof held carries the coordinator's proof.
                        prop_assert!(!matches!(c, Control::Accepted { .. }), "proof given away");
                    },
                    Next::Refuse { log, tell } => {
                        let clean = !log.contains(ESC) && log.chars().count() < 1200;
                        prop_assert!(clean, "log: {}", log);
                        prop_assert!(tell.is_none_or(|t| !t.contains(ESC)), "told a raw escape");
                        break;
                    }
                }
            }
        }

        /// The same from arbitrary bytes, read as frames under the handshake limit.
        #[test]
        fn arbitrary_bytes_never_pass_without_the_token(
            bytes in proptest::collection::vec(any::<u8>(), 0..6000),
        ) {
            let mut buf = bytes;
            let Ok(msgs) = wire::take_frames_within(&mut buf, wire::HANDSHAKE_FRAME) else { return Ok(()) };
            let mut g = gate();
            for m in msgs {
                let Message::Control(c) = m else { break };
                match g.on(c, 0) {
                    Next::Passed { .. } => prop_assert!(false, "passed without the token"),
                    Next::Refuse { .. } => break,
                    Next::Say(_) => {}
                }
            }
        }
    }
}
