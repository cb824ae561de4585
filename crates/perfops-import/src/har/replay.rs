//! `perfops import har FILE --replay REC.csv`: the recording's requests sent
//! again at their recorded offsets, through the replay model, instead of as
//! one visit per arrival.
//!
//! ```text
//!   HAR (started):  0 ms GET /      180 POST /auth   420 GET /orders   430 GET /me
//!   setup:                          POST /auth  (once, before the load: saves token)
//!   REC.csv:        0,home          180,post-auth    420,orders        430,me
//!   each arrival:   its own flow of one step; ${token} is setup's
//! ```
//!
//! - **One flow per recorded request** (named as its step in the visit), one
//!   arrival each, at its `startedDateTime` less the first's, through the
//!   importers' one writer ([`crate::replay::Writer`]).
//! - **Correlation across arrivals goes through `setup:`.** A value saved in
//!   one arrival's flow does not reach another arrival, so the steps whose
//!   answers later requests use (a login's token, an id from a listing) run
//!   once in `setup:`, in their recorded order, and what they save is there
//!   for every arrival; the arrivals send those steps again at their own
//!   times, as the browser did, without saving. A value that changes per
//!   visit (a fresh token per login) is therefore one for the whole replay.
//! - **Every kept request needs its start** (`startedDateTime`): a HAR
//!   written by hand without it has no offsets to replay, and is refused.
//!
//! What is kept, correlated and made `${env.NAME}` is the visit's
//! (`har/mod.rs`); this module only reshapes it and writes the rows.

use std::io::Write;
use std::path::Path;

use super::read::{Har, HarError};
use super::{HarOptions, read, visit};
use crate::draft::{Flow, Load};
use crate::replay::{Writer, Written};
use crate::{ImportError, Imported};

/// Read the recording at `path` into a scenario that replays it, and its
/// requests into `out` as the replay file `replay_file` (its name in the
/// scenario, beside it).
pub fn import_replay(
    path: &Path,
    options: &HarOptions,
    replay_file: &str,
    out: impl Write,
) -> Result<(Imported, Written), ImportError> {
    let har = read::read_file(path).map_err(|e| match e {
        HarError::Io { source, .. } => ImportError::Read { path: path.to_path_buf(), source },
        other => ImportError::Input(other.to_string()),
    })?;
    let stem = path.file_name().and_then(|n| n.to_str()).map_or("recording", |n| n.split('.').next().unwrap_or(n));
    replay_of(&har, &path.display().to_string(), stem, options, replay_file, out)
}

/// [`import_replay`] of a HAR already read; `file` names it in comments.
pub fn replay_of(
    har: &Har,
    file: &str,
    stem: &str,
    options: &HarOptions,
    replay_file: &str,
    out: impl Write,
) -> Result<(Imported, Written), ImportError> {
    let (mut imported, starts) = visit(har, file, stem, options)?;
    let d = &mut imported.draft;
    let steps = d.flows.pop().map(|f| f.steps).unwrap_or_default();
    let mut times = Vec::with_capacity(starts.len());
    for (step, start) in steps.iter().zip(&starts) {
        let Some(ms) = start else {
            return Err(ImportError::Input(format!(
                "{file}: the request of step `{}` has no startedDateTime: there is no recorded offset to replay it at \
                 (import it without --replay: one visit per arrival)",
                step.name.as_deref().unwrap_or_default()
            )));
        };
        times.push((ms * 1000.0).round() as i64);
    }
    let first = times.iter().copied().min().unwrap_or(0);

    // The steps whose answers later steps use, once, before the load.
    d.setup = steps
        .iter()
        .filter(|s| !s.save.is_empty())
        .map(|s| {
            let mut once = s.clone();
            once.pause = None;
            once.comments = vec![format!(
                "step `{}` of the recording, once before the replay: what it saves is there for every arrival",
                s.name.as_deref().unwrap_or_default()
            )];
            once
        })
        .collect();
    let mut w = Writer::new(out, &[]).map_err(|e| ImportError::Replay(e.to_string()))?;
    let mut flows = Vec::with_capacity(steps.len());
    for (mut step, t) in steps.into_iter().zip(&times) {
        // Alone in its arrival: nothing after it reads what it would save, nor waits its pause.
        if !step.save.is_empty() {
            step.comments.retain(|c| !c.starts_with("saves `"));
            step.comments.push("what it answers later requests send: setup saves it, once, for every arrival".into());
        }
        step.save = Vec::new();
        step.pause = None;
        let name = step.name.clone().unwrap_or_default();
        w.push(*t, &name, &[]).map_err(|e| ImportError::Replay(e.to_string()))?;
        let at = format!("recorded at +{} ms", (t - first) / 1000);
        flows.push(Flow { name, comments: vec![at], weight: 1, steps: vec![step] });
    }
    let (_, written) = w.finish().map_err(|e| ImportError::Replay(e.to_string()))?;

    d.flows = flows;
    let at = d.comments.iter().position(|c| c.starts_with("One flow")).unwrap_or(d.comments.len().min(2));
    d.comments.splice(
        at..(at + 1).min(d.comments.len()),
        ["One flow per recorded request, each sent once at its recorded offset (the replay file); the steps whose \
             answers later requests use run once in `setup:` first, so their saved values are there for every arrival."
            .to_string()],
    );
    d.load = Some(Load {
        comments: vec![
            format!(
                "Replays the recording's requests at their recorded offsets ({replay_file}, written by --replay; from \
                 the first request's start)."
            ),
            "`speed: 2` sends them twice as fast, `speed: 0.5` at half speed.".into(),
        ],
        stages: Vec::new(),
        max_in_flight: None,
        replay: Some(replay_file.to_string()),
    });
    imported.summary.push(format!(
        "replay: {} rows over {:.1} s; {} step(s) in setup for the values later requests use",
        written.rows,
        f64::from(written.last_ms) / 1000.0,
        d.setup.len()
    ));
    Ok((imported, written))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A HAR of a login and two API calls that use its token, with a gap.
    const HAR: &str = r#"{"log": {"version": "1.2", "entries": [
      {"startedDateTime": "2026-05-01T12:00:00.000Z", "time": 12,
       "request": {"method": "GET", "url": "http://shop.test/", "headers": []},
       "response": {"status": 200, "headers": [], "content": {"mimeType": "text/html", "text": "<html></html>"}}},
      {"startedDateTime": "2026-05-01T12:00:00.180Z", "time": 20,
       "request": {"method": "POST", "url": "http://shop.test/auth", "headers": [],
                   "postData": {"mimeType": "application/json", "text": "{\"user\":\"ana\"}"}},
       "response": {"status": 200, "headers": [], "content": {"mimeType": "application/json",
                    "text": "{\"token\":\"tok-abcdefghijklmnop-1234\"}"}}},
      {"startedDateTime": "2026-05-01T12:00:02.420Z", "time": 9,
       "request": {"method": "GET", "url": "http://shop.test/orders",
                   "headers": [{"name": "Authorization", "value": "Bearer tok-abcdefghijklmnop-1234"}]},
       "response": {"status": 200, "headers": [], "content": {"mimeType": "application/json", "text": "[]"}}},
      {"startedDateTime": "2026-05-01T12:00:02.425Z", "time": 9,
       "request": {"method": "GET", "url": "http://shop.test/me",
                   "headers": [{"name": "Authorization", "value": "Bearer tok-abcdefghijklmnop-1234"}]},
       "response": {"status": 200, "headers": [], "content": {"mimeType": "application/json", "text": "{}"}}}
    ]}}"#;

    fn replay(har: &str) -> Result<(String, String, Written), ImportError> {
        let har = read::parse("t.har", har.as_bytes()).expect("a HAR");
        let mut out = Vec::new();
        let (imported, written) = replay_of(&har, "t.har", "t", &HarOptions::default(), "rec.csv", &mut out)?;
        Ok((imported.draft.render(), String::from_utf8(out).expect("text"), written))
    }

    /// Each request at its offset from the first, a flow of its own; the
    /// login (whose token the later requests send) once in setup; and the
    /// scenario and file are what `run` reads.
    #[test]
    fn requests_at_their_offsets() {
        let (yaml, rec, written) = replay(HAR).expect("imported");
        assert_eq!(rec, "# perfops replay v1\noffset_ms,flow\n0,home\n180,post-auth\n2420,orders\n2425,me\n");
        assert_eq!((written.rows, written.last_ms), (4, 2425));
        let s = perfops_core::scenario::parse("t.yaml", &yaml, &[]).unwrap_or_else(|d| panic!("{}", d.render(&yaml)));
        let flows: Vec<&str> = s.flows.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(flows, ["home", "post-auth", "orders", "me"], "{yaml}");
        assert!(s.flows.iter().all(|f| f.steps.len() == 1), "{yaml}");
        // The login once in setup, saving the token; the arrivals send it as setup saved it.
        assert_eq!(s.setup.len(), 1, "{yaml}");
        assert!(yaml.contains("save: { \"token\": \"$.token\" }"), "{yaml}");
        assert_eq!(yaml.matches("Bearer ${token}").count(), 2, "{yaml}");
        assert!(!yaml.contains("tok-abcdefghijklmnop-1234"), "the recorded token is not in the scenario: {yaml}");
        assert!(yaml.contains("model: replay\n  file: \"rec.csv\""), "{yaml}");
        let names: Vec<&str> = flows.clone();
        let rec = perfops_core::model::replay::Recording::parse(&rec, &names).expect("run reads it");
        assert_eq!(rec.len(), 4);
    }

    /// A recording without its requests' start times has no offsets: refused, saying why.
    #[test]
    fn no_start_times() {
        let without = HAR.replace("\"startedDateTime\": \"2026-05-01T12:00:02.420Z\", ", "");
        let Err(ImportError::Input(e)) = replay(&without) else { panic!("refused") };
        assert!(e.contains("has no startedDateTime"), "{e}");
    }
}
