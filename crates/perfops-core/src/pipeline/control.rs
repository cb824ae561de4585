//! Actions by hand on a running load (the live page's buttons, `perfops
//! ctl`): what they are ([`Action`]), what the results keep of each once it
//! took effect ([`ControlEvent`], one line of `events.jsonl`), and the seam
//! they go through ([`Steer`]).
//!
//! This module owns the words and the record. It does not own what an action
//! does to the load (the run's steering, in `perfops-run`, which re-plans the
//! engine's arrivals or relays to a fleet's agents) nor who may ask (the live
//! server's token).

use serde::{Deserialize, Serialize};

/// The longest action a client may send (`rate 123456.5` fits many times).
pub const MAX_ACTION_BYTES: usize = 64;

/// What a hand may do to a running load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action {
    /// End the arrivals now; the results are kept, the verdict says "stopped by hand".
    Stop,
    /// Keep the current stage going past its planned end, at its current
    /// rate (or users), until the next action.
    Hold,
    /// End the current stage now and go on with the next one.
    Next,
    /// For the rest of the current stage: the open model's arrivals per
    /// second, or the closed model's users (a whole number).
    Rate(f64),
}

impl Action {
    /// `stop`, `hold`, `next` or `rate N` (N > 0, finite), surrounding
    /// white space ignored; anything else is refused with what is accepted.
    pub fn parse(text: &str) -> Result<Action, String> {
        const ACCEPTED: &str = "expected stop, hold, next or rate N";
        if text.len() > MAX_ACTION_BYTES {
            return Err(format!("an action is at most {MAX_ACTION_BYTES} bytes; {ACCEPTED}"));
        }
        let mut words = text.split_whitespace();
        let action = match words.next() {
            Some("stop") => Action::Stop,
            Some("hold") => Action::Hold,
            Some("next") => Action::Next,
            Some("rate") => match words.next().map(|n| (n, n.parse::<f64>())) {
                Some((_, Ok(n))) if n.is_finite() && n > 0.0 => Action::Rate(n),
                Some((n, _)) => {
                    return Err(format!("rate needs a number above 0, not `{}`", crate::printable::escape(n)));
                }
                None => return Err(format!("rate needs a number above 0; {ACCEPTED}")),
            },
            _ => return Err(format!("unknown action `{}`; {ACCEPTED}", crate::printable::escape(text.trim()))),
        };
        match words.next() {
            None => Ok(action),
            Some(_) => Err(format!("too many words in `{}`; {ACCEPTED}", crate::printable::escape(text.trim()))),
        }
    }

    /// Its word: `stop`, `hold`, `next`, `rate`.
    pub fn name(self) -> &'static str {
        match self {
            Action::Stop => "stop",
            Action::Hold => "hold",
            Action::Next => "next",
            Action::Rate(_) => "rate",
        }
    }

    /// The number it carries (`rate`'s).
    pub fn value(self) -> Option<f64> {
        match self {
            Action::Rate(n) => Some(n),
            _ => None,
        }
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Action::Rate(n) => write!(f, "rate {n}"),
            other => f.write_str(other.name()),
        }
    }
}

/// An action as it took effect: one line of a run's `events.jsonl`, drawn
/// on its charts and named by its verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlEvent {
    /// When it took effect, seconds on the session clock (from the run's start).
    pub t: f64,
    /// `stop`, `hold`, `next` or `rate`.
    pub action: String,
    /// `rate`'s number (arrivals per second, or users).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// The stage it changed (the one running when it took effect).
    pub stage: String,
    /// Who asked: `page`, `ctl`, or what the client said of itself (printable, short).
    pub by: String,
}

/// The longest `by` kept: who asked, in a few words.
pub const MAX_BY_CHARS: usize = 32;

impl ControlEvent {
    /// Who asked, as an event keeps it: the printable ASCII of `asker`
    /// (spaces too), at most [`MAX_BY_CHARS`] of it.
    pub fn who(asker: &str) -> String {
        asker.chars().filter(|c| c.is_ascii_graphic() || *c == ' ').take(MAX_BY_CHARS).collect()
    }

    /// An event read back from a results directory (`events.jsonl`, which
    /// anyone may have written), as a run would have made it: `None` when its
    /// action is no action's word, or its value does not go with it (a rate
    /// above 0, nothing else); its asker cut to what [`ControlEvent::who`]
    /// keeps and its stage's control characters escaped, so that neither
    /// reaches a terminal or a verdict as it was written.
    pub fn checked(self) -> Option<ControlEvent> {
        let action = match (self.action.as_str(), self.value) {
            ("rate", Some(n)) => Action::Rate(n),
            ("stop", None) => Action::Stop,
            ("hold", None) => Action::Hold,
            ("next", None) => Action::Next,
            _ => return None,
        };
        if matches!(action, Action::Rate(n) if !(n.is_finite() && n > 0.0)) {
            return None;
        }
        let stage = crate::printable::escape(&self.stage).into_owned();
        Some(ControlEvent { by: ControlEvent::who(&self.by), stage, ..self })
    }
}

/// Where a running load's actions go: its steering. Shared with the threads
/// that take actions (the live server), so `Send + Sync`.
pub trait Steer: Send + Sync {
    /// Take `action`, asked by `by`, at the next instant every generator
    /// agrees on. `Ok`: the event as the results will record it; `Err`: why
    /// the run refused it (no stage after this one, the run is over, a
    /// closed model's users must be whole), said to the asker.
    fn act(&self, action: Action, by: &str) -> Result<ControlEvent, String>;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An event read back keeps the shape a run gives its events: a known
    /// action with the value that goes with it, a short printable asker, a
    /// stage whose control characters are escaped; anything else is left out.
    #[test]
    fn events_read_back_are_checked() {
        let event = |action: &str, value: Option<f64>, stage: &str, by: &str| ControlEvent {
            t: 1.0,
            action: action.into(),
            value,
            stage: stage.into(),
            by: by.into(),
        };
        // (as read, as kept)
        let cases = [
            (event("rate", Some(300.0), "steady", "ctl"), Some(event("rate", Some(300.0), "steady", "ctl"))),
            (event("hold", None, "steady", "page"), Some(event("hold", None, "steady", "page"))),
            // The asker and the stage made harmless, not refused.
            (
                event("stop", None, "st\u{1b}[31mage", "x\u{1b}]0;pwn\u{7}y"),
                Some(event("stop", None, "st\\u{1b}[31mage", "x]0;pwny")),
            ),
            (event("next", None, "s", &"b".repeat(100)), Some(event("next", None, "s", &"b".repeat(MAX_BY_CHARS)))),
            // Left out: no such action, a value where none goes, none where one does, a rate of nothing.
            (event("\u{1b}[31mEVIL", None, "s", "x"), None),
            (event("stop", Some(1.0), "s", "x"), None),
            (event("rate", None, "s", "x"), None),
            (event("rate", Some(0.0), "s", "x"), None),
            (event("rate", Some(-5.0), "s", "x"), None),
        ];
        for (i, (read, kept)) in cases.into_iter().enumerate() {
            assert_eq!(read.checked(), kept, "case {i}");
        }
    }

    /// Every action's words, and what is refused.
    #[test]
    fn actions_parse_from_their_words() {
        let cases: &[(&str, Result<Action, &str>)] = &[
            ("stop", Ok(Action::Stop)),
            // White space around and between the words is nobody's business.
            ("  next\n", Ok(Action::Next)),
            ("hold", Ok(Action::Hold)),
            ("rate 300", Ok(Action::Rate(300.0))),
            ("rate  12.5", Ok(Action::Rate(12.5))),
            // A rate of nothing is a stop, said otherwise: refused.
            ("rate 0", Err("rate needs a number above 0")),
            ("rate NaN", Err("rate needs a number above 0")),
            ("rate inf", Err("rate needs a number above 0")),
            ("rate", Err("rate needs a number above 0")),
            ("pause", Err("unknown action")),
            ("stop now", Err("too many words")),
            ("", Err("unknown action")),
        ];
        for (text, want) in cases {
            match (Action::parse(text), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, *want, "{text:?}"),
                (Err(got), Err(want)) => assert!(got.starts_with(want), "{text:?}: {got}"),
                (got, want) => panic!("{text:?}: {got:?}, wanted {want:?}"),
            }
        }
        assert!(Action::parse(&"x".repeat(MAX_ACTION_BYTES + 1)).unwrap_err().contains("at most"));
    }

    /// What is parsed is written back as the same words.
    #[test]
    fn an_action_displays_as_its_words() {
        for text in ["stop", "hold", "next", "rate 300", "rate 12.5"] {
            assert_eq!(Action::parse(text).unwrap().to_string(), text);
        }
    }
}
