//! Decoding `load:`: the model, its stages (`{ rate, hold }`, `{ ramp_to,
//! over }`, or `steps: { from, to, by, hold }`), the in-flight cap and think
//! time. Part of the decoder in `decode.rs`, kept apart because it is the
//! one place with arithmetic on rates and durations.

use marked_yaml::Node;

use super::decode::{Dec, join};
use super::{Load, Replay, Stage};
use crate::model::{Rate, Segment};

pub(super) const LOAD: &[&str] =
    &["model", "stages", "steps", "max_in_flight", "think", "file", "speed", "stage_every"];
/// The fields only `model: replay` takes.
const REPLAY: &[&str] = &["file", "speed", "stage_every"];
pub(super) const OPEN_STAGE: &[&str] = &["name", "rate", "hold", "ramp_to", "over"];
pub(super) const CLOSED_STAGE: &[&str] = &["name", "users", "hold", "ramp_to", "over"];
pub(super) const STEPS: &[&str] = &["from", "to", "by", "hold", "ramp"];

impl Dec<'_> {
    pub(super) fn load(&mut self, node: &Node) -> Option<Load> {
        let m = self.map(node, "load", LOAD)?;
        let closed = match m.get_node("model").and_then(|n| self.scalar(n, "load.model", "open, closed or replay")) {
            None => false,
            Some(s) => match s.as_str() {
                "open" => false,
                "closed" => true,
                "replay" => return self.replay(m),
                other => {
                    self.at(
                        s.span(),
                        "load.model",
                        format!("unknown model `{other}`"),
                        Some("open (arrivals per second), closed (looping users) or replay (a recording)".into()),
                    );
                    return None;
                }
            },
        };
        for field in REPLAY {
            if let Some(n) = m.get_node(field) {
                self.at(
                    n.span(),
                    &join("load", field),
                    format!("`{field}` applies to the replay model"),
                    Some("load: { model: replay, file: recording.csv, speed: 1 }".into()),
                );
            }
        }
        let stages = match (m.get_node("stages"), m.get_node("steps")) {
            (Some(_), Some(_)) => {
                self.at(m.span(), "load", "give `stages` or `steps`, not both", None);
                None
            }
            (Some(s), None) => Some(self.stages(s, closed)),
            (None, Some(s)) => self.steps(s, closed),
            (None, None) => {
                self.at(
                    m.span(),
                    "load",
                    "missing field `stages`",
                    Some("stages: [ { rate: 50, hold: 30s }, { ramp_to: 300, over: 5m } ]".into()),
                );
                None
            }
        }?;
        if stages.iter().all(|s| s.segment.from.as_f64() == 0.0 && s.segment.to.as_f64() == 0.0) && !stages.is_empty() {
            self.at(m.span(), "load", "every stage has rate 0: nothing would be sent", None);
        }
        if closed {
            if let Some(n) = m.get_node("max_in_flight") {
                self.at(
                    n.span(),
                    "load.max_in_flight",
                    "`max_in_flight` applies to the open model",
                    Some("in the closed model the number of users is the concurrency".into()),
                );
            }
            let think = m.get_node("think").and_then(|n| self.duration(n, "load.think")).unwrap_or_default();
            Some(Load::Closed { stages, think })
        } else {
            if let Some(n) = m.get_node("think") {
                self.at(
                    n.span(),
                    "load.think",
                    "`think` applies to the closed model",
                    Some("use a step's `pause` for think time within a flow".into()),
                );
            }
            let max_in_flight = self.max_in_flight(m);
            Some(Load::Open { stages, max_in_flight, replay: None })
        }
    }

    /// `max_in_flight` of an open load (a replay's too): 1000 unless given.
    fn max_in_flight(&mut self, m: &marked_yaml::types::MarkedMappingNode) -> u32 {
        match m.get_node("max_in_flight") {
            Some(n) => match self.number::<u32>(n, "load.max_in_flight", "a whole number") {
                Some(0) => {
                    self.at(n.span(), "load.max_in_flight", "0 would drop every arrival", None);
                    1
                }
                Some(v) => v,
                None => 1000,
            },
            None => 1000,
        }
    }

    /// `load: { model: replay, file: recording.csv, speed: 2, stage_every: 10s }`: the
    /// recording is the schedule, so it has no `stages` or `steps`; its stages are cut from the
    /// recording when the file is read (`Load::attach`).
    fn replay(&mut self, m: &marked_yaml::types::MarkedMappingNode) -> Option<Load> {
        for (field, hint) in [
            ("stages", "the recording is the schedule; `stage_every: 10s` cuts it in stages"),
            ("steps", "the recording is the schedule; `stage_every: 10s` cuts it in stages"),
            ("think", "`think` applies to the closed model"),
        ] {
            if let Some(n) = m.get_node(field) {
                self.at(n.span(), &join("load", field), format!("a replay has no `{field}`"), Some(hint.into()));
            }
        }
        let hint = "load: { model: replay, file: recording.csv }";
        let file_node = self.required(m, "file", "load", hint);
        let file = file_node.and_then(|n| self.string(n, "load.file"));
        let at = self.origin(file_node.and_then(|n| n.span().start()), "load.file");
        let speed = match m.get_node("speed") {
            None => Some(1.0),
            Some(n) => match self.number::<f64>(n, "load.speed", "a number") {
                Some(v) if v > 0.0 && v.is_finite() && v <= 1000.0 => Some(v),
                Some(_) => {
                    let hint = "2 plays the recording twice as fast, 0.5 at half speed";
                    self.at(n.span(), "load.speed", "the speed is a number above 0, at most 1000", Some(hint.into()));
                    None
                }
                None => None,
            },
        };
        let stage_every = match m.get_node("stage_every") {
            None => Some(None),
            Some(n) => match self.duration(n, "load.stage_every") {
                Some(d) if d.as_secs() >= 1 && d.subsec_nanos() == 0 => Some(Some(d.as_secs() as u32)),
                Some(_) => {
                    let hint = "e.g. `stage_every: 10s`: one stage per 10 s of the replay";
                    self.at(n.span(), "load.stage_every", "whole seconds, at least 1s", Some(hint.into()));
                    None
                }
                None => None,
            },
        };
        let max_in_flight = self.max_in_flight(m);
        let replay = Replay { file: file?, speed: speed?, stage_every: stage_every?, at, recording: None };
        Some(Load::Open { stages: Vec::new(), max_in_flight, replay: Some(replay) })
    }

    fn stages(&mut self, node: &Node, closed: bool) -> Vec<Stage> {
        let (known, level_key, unit) =
            if closed { (CLOSED_STAGE, "users", " users") } else { (OPEN_STAGE, "rate", "/s") };
        let mut out: Vec<Stage> = Vec::new();
        let items = self.list(node, "load.stages", "stages");
        if items.is_empty() && node.as_sequence().is_some() {
            self.at(node.span(), "load.stages", "no stages: nothing would be sent", None);
        }
        for (i, item) in items.iter().enumerate() {
            let p = format!("load.stages[{i}]");
            let errors_before = self.errors.len();
            let Some(m) = self.map(item, &p, known) else { continue };
            let misspelt = self.errors.len() > errors_before;
            // The other model's level: say which model takes it (`users` read "unknown field" alone).
            let other = if closed { "rate" } else { "users" };
            let at = join(&p, other);
            if let Some(e) = self.errors[errors_before..].iter_mut().find(|e| e.path == at) {
                e.hint = Some(if closed {
                    "`rate` is the open model's (arrivals a second): this load is `model: closed`; give `users`, or drop `model: closed`".into()
                } else {
                    "`users` is the closed model's: add `model: closed` under `load:` (the open model, the default, takes `rate`, arrivals a second)".into()
                });
            }
            let level = m.get_node(level_key).and_then(|n| self.rate(n, &join(&p, level_key)));
            let ramp_to = m.get_node("ramp_to").and_then(|n| self.rate(n, &join(&p, "ramp_to")));
            let hold = m.get_node("hold").and_then(|n| self.duration(n, &join(&p, "hold")));
            let over = m.get_node("over").and_then(|n| self.duration(n, &join(&p, "over")));
            let previous = out.last().map_or(Rate::ZERO, |s: &Stage| s.segment.to);
            let (segment, default_name) = match (
                m.get_node(level_key).is_some(),
                m.get_node("ramp_to").is_some(),
                m.get_node("hold").is_some(),
                m.get_node("over").is_some(),
            ) {
                (true, false, true, false) => {
                    let (Some(r), Some(h)) = (level, hold) else { continue };
                    (Segment { duration: h, from: r, to: r }, format!("{}{unit}", r.as_f64()))
                }
                (from, true, false, true) => {
                    let (Some(to), Some(d)) = (ramp_to, over) else { continue };
                    let start = if from {
                        match level {
                            Some(l) => l,
                            None => continue,
                        }
                    } else {
                        previous
                    };
                    (Segment { duration: d, from: start, to }, format!("ramp {}→{}{unit}", start.as_f64(), to.as_f64()))
                }
                // An unknown (misspelt) field already explains the odd shape.
                _ if misspelt => continue,
                _ => {
                    self.at(
                        m.span(),
                        &p,
                        format!("a stage is `{{ {level_key}, hold }}` or `{{ ramp_to, over }}`"),
                        Some(format!("e.g. {{ {level_key}: 50, hold: 30s }} or {{ ramp_to: 300, over: 5m }}")),
                    );
                    continue;
                }
            };
            if segment.duration.is_zero() {
                self.at(m.span(), &p, "a stage must last longer than 0s", None);
                continue;
            }
            let name = match m.get_node("name") {
                Some(n) => self.string(n, &join(&p, "name")).unwrap_or(default_name),
                None => default_name,
            };
            out.push(Stage { name, segment });
        }
        self.unique_names(&mut out);
        out
    }

    /// `steps: { from: 50, to: 300, by: 50, hold: 60s, ramp: 5s }`
    fn steps(&mut self, node: &Node, closed: bool) -> Option<Vec<Stage>> {
        let m = self.map(node, "load.steps", STEPS)?;
        let hint = "steps: { from: 50, to: 300, by: 50, hold: 60s }";
        let from = self.required(m, "from", "load.steps", hint).and_then(|n| self.rate(n, "load.steps.from"));
        let to = self.required(m, "to", "load.steps", hint).and_then(|n| self.rate(n, "load.steps.to"));
        let by = self.required(m, "by", "load.steps", hint).and_then(|n| self.rate(n, "load.steps.by"));
        let hold = self.required(m, "hold", "load.steps", hint).and_then(|n| self.duration(n, "load.steps.hold"));
        let ramp = m.get_node("ramp").and_then(|n| self.duration(n, "load.steps.ramp")).unwrap_or_default();
        let (from, to, by, hold) = (from?, to?, by?, hold?);
        if by.as_f64() <= 0.0 || to < from {
            self.at(m.span(), "load.steps", "steps must go up: `to` >= `from` and `by` > 0", None);
            return None;
        }
        let count = ((to.as_f64() - from.as_f64()) / by.as_f64() + 1e-9).floor() as usize + 1;
        if count > 1000 {
            self.at(m.span(), "load.steps", format!("{count} steps is too many"), Some("use a larger `by`".into()));
            return None;
        }
        let unit = if closed { " users" } else { "/s" };
        let mut out = Vec::new();
        for i in 0..count {
            let level = Rate::per_second(from.as_f64() + by.as_f64() * i as f64).ok()?;
            if i > 0 && !ramp.is_zero() {
                let prev = out.last().map_or(level, |s: &Stage| s.segment.to);
                out.push(Stage {
                    name: format!("ramp to {}{unit}", level.as_f64()),
                    segment: Segment { duration: ramp, from: prev, to: level },
                });
            }
            out.push(Stage {
                name: format!("{}{unit}", level.as_f64()),
                segment: Segment { duration: hold, from: level, to: level },
            });
        }
        Some(out)
    }

    fn unique_names(&mut self, stages: &mut [Stage]) {
        for i in 1..stages.len() {
            let mut n = 2;
            while stages[..i].iter().any(|s| s.name == stages[i].name) {
                let base = stages[i].name.split(" #").next().unwrap_or_default().to_string();
                stages[i].name = format!("{base} #{n}");
                n += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::scenario::{Load, parse};

    const HEAD: &str =
        "name: r\ntarget: http://127.0.0.1:1\nflows:\n  a: { steps: [ { request: \"GET /a?u=${replay.user}\" } ] }\n";

    /// A stage with the other model's level says which model takes it.
    #[test]
    fn the_other_models_level_names_its_model() {
        // (load, the hint's words)
        let cases = [
            ("{ stages: [ { users: 5, hold: 2s } ] }", "add `model: closed` under `load:`"),
            ("{ model: closed, stages: [ { rate: 5, hold: 2s } ] }", "this load is `model: closed`"),
        ];
        for (load, hint) in cases {
            let e = parse("s.yaml", &format!("{HEAD}load: {load}\n"), &[]).expect_err(load);
            let d = e.0.iter().find(|d| d.message.starts_with("unknown field")).expect("unknown field");
            assert!(d.hint.as_deref().is_some_and(|h| h.contains(hint)), "{load}: {d:?}");
        }
    }

    /// `model: replay`: its fields, what it refuses, and where each error is.
    #[test]
    fn replay_loads_and_their_errors() {
        // (load, Ok((file, speed, stage_every, max_in_flight)) or Err((what the error points at, a word of the message)))
        type Want = Result<(&'static str, f64, Option<u32>, u32), (&'static str, &'static str)>;
        let cases: [(&str, Want); 9] = [
            // The defaults: speed 1, one stage, 1000 in flight.
            ("{ model: replay, file: rec.csv }", Ok(("rec.csv", 1.0, None, 1000))),
            // Every field given.
            (
                "{ model: replay, file: r.csv, speed: 2, stage_every: 10s, max_in_flight: 50 }",
                Ok(("r.csv", 2.0, Some(10), 50)),
            ),
            // Half speed.
            ("{ model: replay, file: r.csv, speed: 0.5 }", Ok(("r.csv", 0.5, None, 1000))),
            // No file.
            ("{ model: replay }", Err(("model", "missing field `file`"))),
            // A speed of 0 would never send.
            ("{ model: replay, file: r.csv, speed: 0 }", Err(("0 }", "above 0"))),
            // The recording is the schedule: no stages.
            ("{ model: replay, file: r.csv, stages: [ { rate: 1, hold: 1s } ] }", Err(("[ {", "no `stages`"))),
            // Stages of whole seconds.
            ("{ model: replay, file: r.csv, stage_every: 1500ms }", Err(("1500ms", "whole seconds"))),
            // `file` belongs to the replay model.
            ("{ stages: [ { rate: 1, hold: 1s } ], file: r.csv }", Err(("r.csv", "applies to the replay model"))),
            // An unknown model names the three.
            ("{ model: replayy, file: r.csv }", Err(("replayy", "unknown model"))),
        ];
        for (i, (load, want)) in cases.into_iter().enumerate() {
            let text = format!("{HEAD}load: {load}\n");
            match (parse("s.yaml", &text, &[]), want) {
                (Ok(s), Ok((file, speed, every, in_flight))) => {
                    let Load::Open { stages, max_in_flight, replay: Some(r) } = &s.load else { panic!("case {i}") };
                    assert_eq!(
                        (r.file.as_str(), r.speed, r.stage_every, *max_in_flight),
                        (file, speed, every, in_flight)
                    );
                    assert!(stages.is_empty(), "case {i}: stages come from the recording");
                    // `file:`'s value, for the errors of reading the file.
                    let column = "load: ".len() + load.find("file: ").unwrap() + "file: ".len() + 1;
                    assert_eq!((r.at.line, r.at.column), (5, column), "case {i}");
                }
                (Err(e), Err((at, word))) => {
                    // The load's error (an open load also finds `${replay.user}` unknown, on line 4).
                    let d = e.0.iter().find(|d| d.line == 5).unwrap_or(&e.0[0]);
                    let column = "load: ".len() + load.find(at).unwrap() + 1;
                    assert_eq!((d.line, d.column), (5, column), "case {i}: {e:?}");
                    assert!(d.message.contains(word), "case {i}: {}", d.message);
                }
                (got, want) => panic!("case {i}: {got:?}, want {want:?}"),
            }
        }
        // Without `model: replay`, `${replay.user}` is an unknown feeder.
        let open = format!("{HEAD}load: {{ stages: [ {{ rate: 1, hold: 1s }} ] }}\n");
        assert!(parse("s.yaml", &open, &[]).is_err());
    }
}
