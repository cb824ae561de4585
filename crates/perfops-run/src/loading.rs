//! A scenario file read as every command that runs one reads it: parsed and
//! validated (each error printed with its line and column), what it reads
//! besides the file (the `${env.X}` values, the CSV feeders, the target's
//! URL, gRPC's `.proto` files), and its `load` as the engine's [`LoadModel`]
//! and the pipeline's [`StagePlan`]s.
//!
//! It owns no state and starts nothing: `check`, `run`, `limit`, `sweep`,
//! `setup`, `merge`, the coordinator, the agent, `k8s` and the session that
//! opens a run all call down into it, and it calls none of them. `check`
//! reads through the same functions as `run`, so that it accepts exactly
//! what `run` accepts (#11).

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result};
use perfops_core::input::{self, Cap};
use perfops_core::model::{LoadModel, Schedule, Shard};
use perfops_core::pipeline::StagePlan;
use perfops_core::scenario::feeder::Feeder;
use perfops_core::scenario::{Load, Override, Scenario, TargetSpec, sources};
use perfops_engine::{Target, TargetError};

use crate::exit::UsageError;

/// What a session reads besides the scenario file: the `${env.X}` values,
/// the CSV feeders and the target with its `${env.X}` resolved.
pub(crate) struct Inputs {
    pub(crate) env: HashMap<String, String>,
    pub(crate) feeders: Vec<Feeder>,
    pub(crate) target: TargetSpec,
    /// The scenario's folder: CSV and `.proto` files are relative to it.
    pub(crate) folder: std::path::PathBuf,
    /// The scenario's scripts, compiled (`None`: it has none).
    pub(crate) scripts: Option<perfops_engine::ScriptPlan>,
    /// The target's host did not resolve here (why). Not an input error: a
    /// scenario written for a cluster (`http://orders.shop.svc:8080`) is checked
    /// on a laptop, and the command that sends load fails when it uses it.
    pub(crate) unresolved: Option<String>,
    /// The target's URL parsed and its host resolved, here, once: the commands
    /// that send load use it ([`Inputs::url_target`]) instead of resolving the
    /// name again (`run` did, twice: a name could answer differently).
    resolved: Option<Target>,
}

impl Inputs {
    /// The target URL as resolved when the inputs were read, or why its host
    /// did not resolve; `None` for the demo target, which has no URL yet.
    pub(crate) fn url_target(&self) -> Option<Result<Target, String>> {
        match (&self.resolved, &self.unresolved) {
            (Some(target), _) => Some(Ok(target.clone())),
            (None, Some(why)) => Some(Err(why.clone())),
            (None, None) => None,
        }
    }
}

/// Read the inputs of `scenario` (from the file at `path`, whose text is
/// `text`) as a session does, and check that its target parses as a URL.
/// `check` calls it too, so that it accepts exactly what `run` accepts (#11).
/// `None`: an unset `${env.X}` or a CSV file that cannot be used, every one
/// already printed at its place in the file, as [`load_scenario`] prints.
pub(crate) fn inputs(scenario: &Scenario, path: &Path, text: &str) -> Result<Option<Inputs>> {
    let usage = |m: String| anyhow::Error::new(UsageError(m));
    let folder = path.parent().unwrap_or(Path::new("."));
    let sources = read_sources(scenario, folder, text);
    // Compiled in the same pass: a script's errors are said with the file's own.
    let scripts = match &scenario.scripts {
        None => Ok(None),
        Some(spec) => crate::scripts::compile(spec, folder, text).map(Some).map_err(|p| crate::say::tell(&p.render())),
    };
    let (Some((env, feeders)), Ok(scripts)) = (sources, scripts) else { return Ok(None) };
    let target = sources::target(scenario, &env);
    let (mut resolved, mut unresolved) = (None, None);
    if let TargetSpec::Url(url) = &target {
        match Target::parse(url) {
            Ok(t) => resolved = Some(t),
            Err(e @ TargetError::Resolve { .. }) => unresolved = Some(e.to_string()),
            Err(e) => return Err(usage(format!("target `{url}`: {e}"))),
        }
    }
    // gRPC steps: their .proto files compile and define the method, and a
    // literal message fits it (#14), for `check` as for `run`.
    let steps = scenario.setup.iter().chain(scenario.flows.iter().flat_map(|f| f.steps.iter()));
    for step in steps.filter(|s| s.grpc.is_some()) {
        perfops_engine::check_grpc(folder, step).map_err(|e| usage(format!("step `{}`: {e}", step.name)))?;
    }
    Ok(Some(Inputs { env, feeders, target, folder: folder.to_path_buf(), scripts, unresolved, resolved }))
}

/// The `${env.X}` values and the CSV feeders of `scenario` (its folder
/// `folder`, its text `text`): what it reads besides its file. `None`: what
/// was missing or broken, every problem at its place in the file, is printed.
pub(crate) fn read_sources(
    scenario: &Scenario,
    folder: &Path,
    text: &str,
) -> Option<(HashMap<String, String>, Vec<Feeder>)> {
    // ${env.X}: read once; a missing variable is an input error, not an empty string.
    let env = sources::env(scenario, |name| std::env::var(name).ok());
    let feeders = sources::feeders(scenario, folder, |p| read_csv(folder, p));
    match (env, feeders) {
        (Ok(env), Ok(feeders)) => Some((env, feeders)),
        (env, feeders) => {
            let mut all = env.err().unwrap_or_default();
            all.0.extend(feeders.err().unwrap_or_default().0);
            all.0.sort_by_key(|d| (d.file == "--set", d.line, d.column));
            crate::say::tell(&all.render(text));
            None
        }
    }
}

/// A CSV feeder's file, `path` as `sources::feeders` joined it to the
/// scenario's `folder`: opened inside the folder the scenario names it in,
/// never through a link out of it, a regular file under [`Cap::CSV`] (#31).
pub(crate) fn read_csv(folder: &Path, path: &Path) -> std::io::Result<String> {
    let rel = path.strip_prefix(folder).unwrap_or(path);
    let bytes = input::read_beside(folder, rel, Cap::CSV)?;
    String::from_utf8(bytes)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "stream did not contain valid UTF-8"))
}

/// A replay's recording (`load: { model: replay, file }`) read beside the
/// scenario at `path` (its text `text`) and attached to its load (its
/// schedule, its stages); `false`: it could not be, every problem printed at
/// its line of the replay file (or of the scenario). Nothing for another model.
fn attach_replay(scenario: &mut Scenario, path: &Path, text: &str) -> bool {
    let folder = path.parent().unwrap_or(Path::new("."));
    match read_replay(scenario, folder, text) {
        Ok(()) => true,
        Err(problems) => {
            crate::say::tell(&problems);
            false
        }
    }
}

/// A replay's recording read from `folder` (the scenario's, whose text is
/// `text`) and attached to its load; `Err`: every problem rendered at its
/// line of the replay file, or of the scenario (a `${replay.NAME}` the
/// recording has no column for). Nothing for another model. A fleet's agent
/// reads it here too, from the folder its coordinator's files were put back in.
pub(crate) fn read_replay(scenario: &mut Scenario, folder: &Path, text: &str) -> Result<(), String> {
    use perfops_core::model::Recording;
    use perfops_core::scenario::template::VarRef;
    use perfops_core::scenario::{Diagnostic, Diagnostics};
    let Some(replay) = scenario.load.replay() else { return Ok(()) };
    let file = folder.join(&replay.file).display().to_string();
    let replay_text = input::read_beside(folder, Path::new(&replay.file), Cap::REPLAY)
        .map_err(|e| e.to_string())
        .and_then(|b| String::from_utf8(b).map_err(|_| "not UTF-8 text".to_owned()));
    let replay_text = match replay_text {
        Ok(t) => t,
        Err(why) => {
            let hint = "a replay file's path is relative to the scenario file's folder".to_owned();
            let d = replay.at.error(format!("replay file {file}: {why}"), Some(hint));
            return Err(Diagnostics(vec![d]).render(""));
        }
    };
    let flows: Vec<&str> = scenario.flows.iter().map(|f| f.name.as_str()).collect();
    let recording = match Recording::parse(&replay_text, &flows) {
        Ok(r) => r,
        Err(errors) => {
            let at = |e: perfops_core::model::ReplayError| Diagnostic {
                file: file.clone(),
                line: e.line as usize,
                column: 1,
                path: String::new(),
                message: e.message,
                hint: e.hint,
            };
            // Shown with the replay file's own lines.
            return Err(Diagnostics(errors.into_iter().map(at).collect()).render(&replay_text));
        }
    };
    // A `${replay.NAME}` with no such column would render empty: said now, at its place.
    let unknown: Vec<Diagnostic> = scenario
        .outside_vars
        .iter()
        .filter_map(|u| match &u.var {
            VarRef::Feeder { feeder, column } if feeder == "replay" && !recording.columns().contains(column) => {
                let columns = recording.columns().join(", ");
                Some(u.at.error(
                    format!("{file} has no value column `{column}` (in `{}`)", u.used_in),
                    Some(if columns.is_empty() {
                        "its header is `offset_ms,flow`: add the column after them".to_owned()
                    } else {
                        format!("its value columns: {columns}")
                    }),
                ))
            }
            _ => None,
        })
        .collect();
    if !unknown.is_empty() {
        return Err(Diagnostics(unknown).render(text));
    }
    scenario.load.attach(std::sync::Arc::new(recording));
    Ok(())
}

/// A replay's plan: each arrival's recorded flow and its values as the
/// feeder `replay`. The plan as it was for another model.
pub(crate) fn replaying(work: perfops_engine::Work, load: &Load) -> perfops_engine::Work {
    let Some(recording) = load.replay().and_then(|r| r.recording.as_ref()) else { return work };
    work.replaying(recording.flows(), replay_values(load))
}

/// A replay's value columns as the feeder `replay` (`${replay.NAME}`), a row
/// per arrival; `None` without value columns or for another model.
pub(crate) fn replay_values(load: &Load) -> Option<Feeder> {
    use perfops_core::scenario::feeder::FeedMode;
    let recording = load.replay().and_then(|r| r.recording.as_ref())?;
    if recording.columns().is_empty() {
        return None;
    }
    Feeder::of_rows("replay", recording.columns().to_vec(), recording.values().to_vec(), FeedMode::Cycle)
}

/// Read and validate a scenario; on errors, print them all and return `None`.
pub(crate) fn load_scenario(path: &Path, overrides: &[Override]) -> Result<Option<(Scenario, String)>> {
    let bytes = std::fs::read(path)
        .map_err(|e| anyhow::Error::new(UsageError(format!("cannot read {}: {e}", path.display()))))?;
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            // Where the first byte that is not UTF-8 is, as for any error in the file.
            let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            let line = good.iter().filter(|&&b| b == b'\n').count() + 1;
            let column =
                String::from_utf8_lossy(good.rsplit(|&b| b == b'\n').next().unwrap_or_default()).chars().count() + 1;
            let d = perfops_core::scenario::Diagnostic {
                file: path.display().to_string(),
                line,
                column,
                path: String::new(),
                message: "not UTF-8 text".into(),
                hint: Some("a scenario is YAML in UTF-8; convert the file (e.g. `iconv -f latin1 -t utf-8`)".into()),
            };
            crate::say::tell(&perfops_core::scenario::Diagnostics(vec![d]).render(""));
            return Ok(None);
        }
    };
    match perfops_core::scenario::parse_partial(&path.display().to_string(), &text, overrides) {
        Ok(mut s) => {
            if !attach_replay(&mut s, path, &text) {
                return Ok(None);
            }
            // Which outputs exist, and where a file's may write, is the registry's: at its place.
            let refused = crate::outputs::refused_in_scenario(&s.outputs);
            if !refused.is_empty() {
                crate::say::tell(&perfops_core::scenario::Diagnostics(refused).render(&text));
                return Ok(None);
            }
            Ok(Some((s, text)))
        }
        Err((mut diagnostics, partial)) => {
            // What it reads besides itself, checked in the same pass: an unknown CSV column or an
            // unset `${env.X}` is not hidden until the file's own errors are fixed (#32).
            let folder = path.parent().unwrap_or(Path::new("."));
            let env = sources::env_of(&partial.outside_vars, |name| std::env::var(name).ok());
            let feeders = sources::feeders_of(&partial.data, &partial.outside_vars, folder, |p| read_csv(folder, p));
            diagnostics.0.extend(env.err().unwrap_or_default().0);
            diagnostics.0.extend(feeders.err().unwrap_or_default().0);
            diagnostics.0.sort_by_key(|d| (d.file == "--set", d.line, d.column));
            crate::say::tell(&diagnostics.render(&text));
            // The scripts too: a syntax error in one is not hidden behind the scenario's errors.
            if let Some(Err(problems)) =
                partial.scripts.as_ref().map(|spec| crate::scripts::compile(spec, folder, &text))
            {
                crate::say::tell(&problems.render());
            }
            Ok(None)
        }
    }
}

/// The stages of a scenario's `load` as `shard` runs them: an open stage's
/// target is the shard's share of its rate, so that a shard is judged on
/// what it was asked to send (the whole rate for a merge of all shards).
pub(crate) fn stage_plans(load: &Load, shard: Shard) -> Vec<StagePlan> {
    let share = f64::from(shard.count).recip();
    load.stages()
        .iter()
        .map(|st| StagePlan {
            name: st.name.clone(),
            target_rate: load.is_open().then(|| (st.segment.from.as_f64() + st.segment.to.as_f64()) / 2.0 * share),
            start_rate: load.is_open().then(|| st.segment.from.as_f64() * share),
            duration: st.segment.duration,
        })
        .collect()
}

/// The engine's load model from a scenario's `load`.
pub(crate) fn load_model(load: &Load) -> Result<LoadModel> {
    if let Some(replay) = load.replay() {
        // Read by `load_scenario`; a scenario parsed elsewhere (a fleet's agent) has none.
        let Some(recording) = &replay.recording else {
            return Err(anyhow::Error::new(UsageError(format!(
                "the replay file {} was not read here: a replay runs with `perfops run` (`--shard I/N` on each machine)",
                replay.file
            ))));
        };
        let schedule = recording.schedule(replay.speed).context("the replay")?;
        let max_in_flight = match load {
            Load::Open { max_in_flight, .. } => *max_in_flight,
            Load::Closed { .. } => 1000,
        };
        return Ok(LoadModel::Open { schedule, max_in_flight });
    }
    let segments: Vec<_> = load.stages().iter().map(|s| s.segment).collect();
    let schedule = Schedule::new(segments.clone()).context("the load profile")?;
    Ok(match load {
        Load::Open { max_in_flight, .. } => LoadModel::Open { schedule, max_in_flight: *max_in_flight },
        Load::Closed { think, .. } => {
            let max = segments.iter().map(|s| s.from.as_f64().max(s.to.as_f64())).fold(0.0, f64::max).ceil() as u32;
            LoadModel::Closed {
                connections: max.max(1),
                think: *think,
                profile: Some(schedule),
                duration: None,
                max_requests: None,
            }
        }
    })
}
