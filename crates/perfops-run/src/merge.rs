//! `perfops merge SHARD_DIR... --out DIR`: the results of `run --shard I/N`
//! on several machines made into one results directory, exactly, as if one
//! generator had run (#13).
//!
//! ```text
//!   shard 0/3 ─┐  meta.json: same scenario fingerprint, same start instant, N = 3
//!   shard 1/3 ─┼─> read back (series.jsonl parts + latency.hlog tags = the engine's Intervals)
//!   shard 2/3 ─┘       │
//!                      ├─ second t of each shard (start + t on the wall clock): Interval::merge
//!                      │   (histograms added per key and tag, counters summed; never percentiles)
//!                      └─> conclude::replay: the same pipeline, results writer, stages,
//!                          SLO, verdict, diagnostics, summary.json and report.html as `run`
//! ```
//!
//! Actions by hand on a shard (its own `--live` and `perfops ctl`; a fleet's
//! coordinator steers every agent at once and needs no merge) are the merged
//! run's: its `events.jsonl` holds them, named by shard, and the stages they
//! changed judge nothing automatic, as a run changed by hand. Its stages are
//! cut as planned; where a shard's were moved (hold, next), it says so.
//!
//! What cannot be merged is refused (exit 2), naming the directories:
//! different scenarios (fingerprint), different start instants, different
//! shard counts, a shard given twice, a directory that is no shard. What is
//! missing is named and makes the verdict inconclusive (exit 1): a shard
//! index not given, or seconds within the load that one shard lacks (a
//! killed or lost generator).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, Result};
use perfops_core::measure::Interval;
use perfops_core::model::Shard;
use perfops_core::pipeline::StageLedger;
use perfops_core::scenario::{Override, Scenario};
use perfops_engine::watch::WatchEvent;
use perfops_report::parts::{ReadBack, read_seconds};
use perfops_report::results::{JsonLines, RunDir, parse_time};
use perfops_report::run::{GeneratorUse, Pacer, RunMeta};

use crate::conclude::{self, Ending, Judging};
use crate::exit::{Exit, UsageError};
use crate::shard::{parse_shard, shard_text};
use crate::watching::Store;

/// Flags of `perfops merge`.
#[derive(Debug, Clone)]
pub struct MergeArgs {
    /// The shards' results directories (of `perfops run --shard I/N`).
    pub dirs: Vec<PathBuf>,
    /// The results directory to write (created; if it exists, it must be empty).
    pub out: PathBuf,
    /// Also write each SLO line per stage as a JUnit test case to FILE.
    pub junit: Option<PathBuf>,
}

/// One shard as read.
struct Part {
    dir: PathBuf,
    shard: Shard,
    read: ReadBack,
}

/// Why shards cannot be merged (exit 2).
fn refuse(message: String) -> anyhow::Error {
    anyhow::Error::new(UsageError(message))
}

/// The shards agree on what they ran and when: one scenario, one start, one N,
/// each index once. Returns N and what is missing (each named).
fn check(parts: &[Part]) -> Result<(u32, Vec<String>)> {
    let first = &parts[0];
    let name = |p: &Part| p.dir.display().to_string();
    for p in &parts[1..] {
        if p.read.meta.scenario_fingerprint != first.read.meta.scenario_fingerprint {
            return Err(refuse(format!(
                "{} and {} ran different scenarios (fingerprints {} and {}): shards of one run share the \
                 scenario file and its --set overrides",
                name(first),
                name(p),
                first.read.meta.scenario_fingerprint.as_deref().unwrap_or("none"),
                p.read.meta.scenario_fingerprint.as_deref().unwrap_or("none")
            )));
        }
        if p.read.meta.start != first.read.meta.start {
            return Err(refuse(format!(
                "{} started at {} and {} at {}: shards of one run start at one instant (--start-at)",
                name(first),
                first.read.meta.start.as_deref().unwrap_or("?"),
                name(p),
                p.read.meta.start.as_deref().unwrap_or("?")
            )));
        }
        if p.shard.count != first.shard.count {
            return Err(refuse(format!(
                "{} is shard {} and {} shard {}: one run has one shard count",
                name(first),
                shard_text(first.shard),
                name(p),
                shard_text(p.shard)
            )));
        }
    }
    let mut by_index: BTreeMap<u32, &Part> = BTreeMap::new();
    for p in parts {
        if let Some(other) = by_index.insert(p.shard.index, p) {
            return Err(refuse(format!(
                "{} and {} are both shard {}: each shard once",
                name(other),
                name(p),
                shard_text(p.shard)
            )));
        }
    }
    let count = first.shard.count;
    let mut gaps: Vec<String> = (0..count)
        .filter(|i| !by_index.contains_key(i))
        .map(|i| format!("shard {i}/{count} is missing (not given)"))
        .collect();
    for p in by_index.values() {
        let missing = missing_seconds(p);
        if !missing.is_empty() {
            gaps.push(format!("shard {} ({}) lacks second(s) {}", shard_text(p.shard), name(p), spans(&missing)));
        }
        if !p.read.without_histograms.is_empty() {
            gaps.push(format!(
                "shard {} ({}) has no latency histograms for second(s) {}",
                shard_text(p.shard),
                name(p),
                spans(&p.read.without_histograms)
            ));
        }
    }
    Ok((count, gaps))
}

/// Where the merged seconds stop being the whole run's: when the arrivals
/// stopped, if every shard was stopped (Ctrl-C, `abort_when`), so that the
/// stages after it read "not run", not "achieved 0/s: fails"; and from when
/// a share is missing (a shard not given, seconds a shard lacks, a shard
/// stopped before the others), and why, so that the stages past it judge
/// nothing: 2 of 3 shards read "achieved 67% of the target", FAILS, and a
/// red "breaks at" beside INCONCLUSIVE (review 2).
fn shortfall(parts: &[Part], count: u32) -> (Option<Duration>, Option<(f64, String)>) {
    let stops: Vec<Option<f64>> = parts.iter().map(stopped_at).collect();
    let first_stop = stops.iter().flatten().fold(f64::INFINITY, |a: f64, b| a.min(*b));
    let last_stop = stops.iter().flatten().fold(0.0, |a: f64, b| a.max(*b));
    let stop_at = stops.iter().all(Option::is_some).then_some(last_stop);
    // Shards stopped together (one Ctrl-C to all) lack nothing of each other.
    let together = stop_at.is_some() && last_stop - first_stop < 1.0;
    let mut short: Vec<(f64, String)> = Vec::new();
    if (parts.len() as u32) < count {
        short.push((0.0, "a shard is missing".into()));
    }
    for (p, stop) in parts.iter().zip(&stops) {
        let label = format!("shard {}", shard_text(p.shard));
        if let Some(t) = missing_seconds(p).first() {
            short.push((f64::from(*t), format!("{label} lacks second {t}")));
        }
        if let Some(t) = stop.filter(|_| !together) {
            short.push((t, format!("{label} stopped at t={t:.1}s")));
        }
    }
    let first = short.into_iter().min_by(|a, b| a.0.total_cmp(&b.0));
    (stop_at.map(Duration::from_secs_f64), first)
}

/// When a shard stopped early (Ctrl-C, `abort_when`): where its last stage
/// that ran ended. `None`: it ran its whole profile, or said nothing.
fn stopped_at(p: &Part) -> Option<f64> {
    let s = p.read.summary.as_ref().filter(|s| s.interrupted || s.aborted.is_some())?;
    Some(
        s.stages
            .iter()
            .filter(|st| st.figures.duration_s > 0.0)
            .map(|st| st.from_s + st.figures.duration_s)
            .fold(0.0, f64::max),
    )
}

/// The seconds of its load that a shard lacks: of its profile, up to where
/// it stopped if it was stopped; past it (draining), a shard whose responses
/// ended sooner simply has fewer.
fn missing_seconds(p: &Part) -> Vec<u32> {
    let planned: f64 = p.read.meta.stages.iter().map(|s| s.duration_s).sum();
    let until = stopped_at(p).map_or(planned, |t| t.min(planned));
    let have: Vec<u32> = p.read.seconds.iter().map(|iv| iv.index).collect();
    (0..until.ceil() as u32).filter(|t| have.binary_search(t).is_err()).collect()
}

/// `3, 4, 5, 9` as `3-5, 9`.
fn spans(ts: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ts.len() {
        let mut j = i;
        while j + 1 < ts.len() && ts[j + 1] == ts[j] + 1 {
            j += 1;
        }
        out.push(if i == j { ts[i].to_string() } else { format!("{}-{}", ts[i], ts[j]) });
        i = j + 1;
    }
    out.join(", ")
}

/// The overrides a shard ran with, from its (redacted) command line.
fn overrides(command: &[String]) -> Vec<Override> {
    let mut out = Vec::new();
    let mut args = command.iter();
    while let Some(a) = args.next() {
        let value = match a.as_str() {
            "--set" | "--target" => args.next().cloned(),
            _ => a.strip_prefix("--set=").or_else(|| a.strip_prefix("--target=")).map(str::to_string),
        };
        let Some(value) = value else { continue };
        if a.starts_with("--target") {
            out.push(Override { path: "target".into(), value });
        } else if let Ok(o) = value.parse::<Override>() {
            out.push(o);
        }
    }
    out
}

/// The scenario the shards ran: the first one's `scenario.yaml` (redacted,
/// which changes no stage, flow or SLO) with its command's `--set`s.
fn scenario(part: &Part) -> Result<Scenario> {
    let text = part
        .read
        .scenario
        .as_deref()
        .ok_or_else(|| refuse(format!("{}: scenario.yaml is missing", part.dir.display())))?;
    let file = part.dir.join("scenario.yaml").display().to_string();
    perfops_core::scenario::parse(&file, text, &overrides(&part.read.meta.command)).map_err(|d| {
        crate::say::tell(&d.render(text));
        refuse(format!("{file} does not read as a scenario"))
    })
}

/// The watchers' samples and probe checks of every shard, in time order, as
/// the engine reported them: the merged run's `watch.jsonl` and `probe.jsonl`.
/// A value written as `null` (not a finite number) is left out of the merged
/// run: judged and written are the numbers.
fn watched(parts: &[Part]) -> Vec<WatchEvent> {
    let mut events: Vec<(f64, WatchEvent)> = Vec::new();
    for p in parts {
        for w in &p.read.watch {
            let mut sample = w.clone();
            sample.values.retain(|(_, v)| v.is_finite());
            events.push((w.t, WatchEvent::Sample(sample)));
        }
        events.extend(p.read.probe.iter().map(|c| (c.t, WatchEvent::Probe(c.clone()))));
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    events.into_iter().map(|(_, e)| e).collect()
}

/// The generators' use, added up (the largest memory of one).
fn generators(parts: &[Part]) -> GeneratorUse {
    let mut g = GeneratorUse::default();
    for u in parts.iter().filter_map(|p| p.read.summary.as_ref().map(|s| s.generator)) {
        g.workers += u.workers;
        g.cores += u.cores;
        g.cpu_user_s += u.cpu_user_s;
        g.cpu_sys_s += u.cpu_sys_s;
        g.max_rss_kib = g.max_rss_kib.max(u.max_rss_kib);
        g.naps += u.naps;
        g.longest_nap_us = g.longest_nap_us.max(u.longest_nap_us);
        g.cpu_wait_s += u.cpu_wait_s;
        // A shard on the timerfd pacer makes the merge's the timerfd's.
        g.pacer = match (g.pacer, u.pacer) {
            (Some(Pacer::Timerfd), _) | (_, Some(Pacer::Timerfd)) => Some(Pacer::Timerfd),
            (a, b) => a.or(b),
        };
    }
    g
}

/// The shards' actions by hand, in time, each said to be its shard's
/// (`by`: `ctl, shard 1/2`).
fn steered(parts: &[Part]) -> Vec<perfops_core::pipeline::control::ControlEvent> {
    let mut events: Vec<_> = parts
        .iter()
        .flat_map(|p| {
            p.read.events.iter().map(|e| {
                let mut e = e.clone();
                e.by = format!("{}, shard {}", e.by, shard_text(p.shard));
                e
            })
        })
        .collect();
    events.sort_by(|a, b| a.t.total_cmp(&b.t));
    events
}

/// Second `t` of every shard, added.
fn merge_seconds(parts: &[Part]) -> Vec<Interval> {
    let mut seconds: BTreeMap<u32, Interval> = BTreeMap::new();
    for p in parts {
        for iv in &p.read.seconds {
            seconds.entry(iv.index).or_insert_with(|| Interval::empty(iv.index)).merge(iv);
        }
    }
    seconds.into_values().collect()
}

/// `perfops merge`: the shards' results directories merged into one, exactly.
pub fn run(args: MergeArgs) -> Result<Exit> {
    let mut parts = Vec::new();
    for dir in &args.dirs {
        let read = read_seconds(dir).map_err(|e| refuse(e.to_string()))?;
        let shard = match read.meta.shard.as_deref().map(parse_shard) {
            Some(Ok(s)) => s,
            _ => {
                return Err(refuse(format!(
                    "{}: not a shard (its meta.json names none: run it with --shard I/N --start-at TIME)",
                    dir.display()
                )));
            }
        };
        parts.push(Part { dir: dir.clone(), shard, read });
    }
    let (count, gaps) = check(&parts)?;
    parts.sort_by_key(|p| p.shard.index);
    let first = &parts[0];
    let mut scenario = scenario(first)?;
    let meta0 = &first.read.meta;
    let started = meta0
        .start
        .as_deref()
        .and_then(parse_time)
        .ok_or_else(|| refuse(format!("{}: meta.json has no start instant", first.dir.display())))?;

    // A directory that holds something is the user's to move (exit 2), as
    // for any flag that names a place that cannot be used; other failures
    // to create it are the machine's (exit 3).
    let mut dir = match RunDir::create_at(&args.out, started) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(refuse(format!("--out {}: {e}: give a new or an empty directory", args.out.display())));
        }
        created => created.with_context(|| format!("creating the merged results directory {}", args.out.display()))?,
    };
    let meta = RunMeta {
        perfops_version: env!("CARGO_PKG_VERSION").into(),
        host: None,
        command: perfops_core::scenario::redact::redact_command(&std::env::args().collect::<Vec<_>>()),
        shard: None,
        merged: parts.iter().map(|p| format!("{}: {}", shard_text(p.shard), p.dir.display())).collect(),
        ..meta0.clone()
    };
    dir.write_json("meta.json", &meta)?;
    if let Some(text) = &first.read.scenario {
        // Redacted again: a shard written by an older perfops may hold what this one redacts.
        dir.write_file("scenario.yaml", perfops_core::scenario::redact::redact(text).as_bytes())?;
    }

    let (tx, rx) = mpsc::channel();
    for e in watched(&parts) {
        let _ = tx.send(e);
    }
    let mut store = Store::merged(JsonLines::new(dir.path()));
    store.drain(&rx);

    let seconds = merge_seconds(&parts);
    // A replay's stages are cut from its recording's seconds, which the shards' targets add up
    // to (each shard's is its share of the whole's): the recording itself is not in the results.
    if scenario.load.replay().is_some() {
        let targets: Vec<f64> = seconds.iter().map(|iv| iv.target.unwrap_or(0.0)).collect();
        let last = targets.iter().rposition(|&t| t > 1e-6).map_or(0, |i| i + 1);
        scenario.load.attach_seconds(&targets[..last]);
    }
    let stages = crate::loading::stage_plans(&scenario.load, Shard::WHOLE);
    let generator = generators(&parts);
    let (stop_at, short_from) = shortfall(&parts, count);
    let mut ledger = StageLedger::new(&stages, 0.0);
    // Every shard was stopped there: the stages after it did not run, and
    // the seconds after it are the drain.
    if let Some(at) = stop_at {
        ledger.stop(at);
    }
    let mut loaded = conclude::replay(seconds, ledger, &meta.steps, &mut dir, true, None, generator.workers)?;
    let events = steered(&parts);
    if !events.is_empty() {
        for e in &events {
            dir.append_jsonl(perfops_report::sink::EVENTS, e)?;
        }
        // Each to the stage it changed, by name: the shards ran one plan.
        loaded.events = events
            .iter()
            .filter_map(|e| loaded.stages.iter().position(|st| st.plan.name == e.stage).map(|i| (i, e.clone())))
            .collect();
    }
    // What each shard's steps spoke, as its summary says (a shard that did
    // not finish says nothing): grouped again when summarized, a step under
    // two names if shards negotiated differently.
    loaded.protocols = parts.iter().filter_map(|p| p.read.summary.as_ref()).flat_map(|s| s.protocols.clone()).collect();

    let mut notes = Vec::new();
    let (mut interrupted, mut aborted) = (false, None);
    for p in &parts {
        let label = format!("shard {}", shard_text(p.shard));
        match &p.read.summary {
            Some(s) => {
                interrupted |= s.interrupted;
                if let Some(a) = &s.aborted {
                    aborted.get_or_insert_with(|| format!("{label}: {a}"));
                }
                notes.extend(s.warnings.iter().filter(|w| w.starts_with("started")).map(|w| format!("{label} {w}")));
            }
            None => notes.push(format!("{label} has no summary.json (it did not finish)")),
        }
        notes.extend(p.read.notes.iter().map(|n| format!("{label}: {n}")));
    }
    if loaded.total.dropped > 0 {
        notes.push(
            "each shard drops at its own share of max_in_flight: dropped arrivals are the generators' limit".into(),
        );
    }
    for p in &parts {
        if p.read.events.iter().any(|e| e.action == "hold" || e.action == "next") {
            notes.push(format!(
                "shard {}'s stages were moved by hand (hold, next): the merge cuts every stage as planned",
                shard_text(p.shard)
            ));
        }
    }
    for g in &gaps {
        note!("merge: {g}");
    }
    note!("merged {} of {count} shard(s) of {} into {}", parts.len(), scenario.name, dir.path().display());
    // The shards' resolved address (each hit the same target); a run written before #32 has only its label.
    let target_addr = meta.resolved.as_ref().map_or(meta.target.as_str(), |r| r.address.as_str());
    let judging = Judging {
        scenario: &scenario,
        store: &store,
        step_names: &meta.steps,
        target_label: &meta.target,
        target_addr,
        started,
    };
    let ending = Ending { interrupted, aborted, generator, gaps, notes, short_from };
    let mut summary = judging.summarize(&loaded, ending);
    // As one generator would have: the run lasted as long as its longest shard.
    let longest = parts.iter().filter_map(|p| p.read.summary.as_ref().map(|s| s.elapsed_s)).fold(0.0, f64::max);
    summary.elapsed_s = summary.elapsed_s.max(longest);
    conclude::finish(&dir, &mut summary, args.junit.as_deref(), &mut Default::default())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn part(dir: &str, shard: &str, fingerprint: &str, start: &str, seconds: &[u32]) -> Part {
        let meta = RunMeta {
            shard: Some(shard.into()),
            scenario_fingerprint: Some(fingerprint.into()),
            start: Some(start.into()),
            stages: vec![perfops_report::run::MetaStage { duration_s: 3.0, ..Default::default() }],
            ..RunMeta::default()
        };
        let seconds =
            seconds.iter().map(|&t| Interval { length: Duration::from_secs(1), ..Interval::empty(t) }).collect();
        let read = ReadBack {
            meta,
            summary: None,
            seconds,
            watch: Vec::new(),
            probe: Vec::new(),
            scenario: None,
            events: Vec::new(),
            notes: Vec::new(),
            without_histograms: Vec::new(),
        };
        Part { dir: dir.into(), shard: parse_shard(shard).unwrap(), read }
    }

    const T: &str = "2026-11-24T18:00:00.000Z";

    #[test]
    fn shards_that_ran_something_else_are_refused_and_what_is_missing_named() {
        let all = [0, 1, 2];
        // (shards, Ok(gaps) or Err(a word of the refusal))
        /// What the check says: the gaps named, or a word of the refusal.
        type Want = Result<Vec<&'static str>, &'static str>;
        let cases: Vec<(Vec<Part>, Want)> = vec![
            // Three shards of one run: nothing missing.
            (
                vec![part("a", "0/3", "f", T, &all), part("b", "1/3", "f", T, &all), part("c", "2/3", "f", T, &all)],
                Ok(vec![]),
            ),
            // A drain second more on one shard is no gap.
            (vec![part("a", "0/2", "f", T, &[0, 1, 2, 3]), part("b", "1/2", "f", T, &all)], Ok(vec![])),
            // Shard 1 of 3 not given.
            (
                vec![part("a", "0/3", "f", T, &all), part("c", "2/3", "f", T, &all)],
                Ok(vec!["shard 1/3 is missing (not given)"]),
            ),
            // A shard killed after its first second.
            (
                vec![part("a", "0/2", "f", T, &all), part("b", "1/2", "f", T, &[0])],
                Ok(vec!["shard 1/2 (b) lacks second(s) 1-2"]),
            ),
            // Another scenario.
            (vec![part("a", "0/2", "f", T, &all), part("b", "1/2", "g", T, &all)], Err("different scenarios")),
            // Another start.
            (
                vec![part("a", "0/2", "f", T, &all), part("b", "1/2", "f", "2026-11-24T18:00:00.500Z", &all)],
                Err("one instant"),
            ),
            // Another shard count.
            (vec![part("a", "0/2", "f", T, &all), part("b", "1/3", "f", T, &all)], Err("one shard count")),
            // The same shard twice.
            (vec![part("a", "0/2", "f", T, &all), part("b", "0/2", "f", T, &all)], Err("each shard once")),
        ];
        for (i, (parts, want)) in cases.into_iter().enumerate() {
            match (check(&parts), want) {
                (Ok((_, gaps)), Ok(want)) => assert_eq!(gaps, want, "case {i}"),
                (Err(e), Err(word)) => {
                    assert!(e.to_string().contains(word), "case {i}: {e}");
                    assert!(e.downcast_ref::<UsageError>().is_some(), "case {i}: exit 2");
                }
                (got, want) => panic!("case {i}: got {:?}, want {want:?}", got.map(|g| g.1).map_err(|e| e.to_string())),
            }
        }
    }

    #[test]
    fn overrides_are_read_back_from_the_command_line() {
        let cmd: Vec<String> = [
            "perfops",
            "run",
            "s.yaml",
            "--set",
            "load.max_in_flight=7",
            "--set=slo[0]=p99 < 1s",
            "--target",
            "http://x",
        ]
        .map(String::from)
        .to_vec();
        let got: Vec<(String, String)> = overrides(&cmd).into_iter().map(|o| (o.path, o.value)).collect();
        assert_eq!(
            got,
            vec![
                ("load.max_in_flight".into(), "7".into()),
                ("slo[0]".into(), "p99 < 1s".into()),
                ("target".into(), "http://x".into())
            ]
        );
        assert_eq!(spans(&[1, 2, 3, 7, 9, 10]), "1-3, 7, 9-10");
    }
}
