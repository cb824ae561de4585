//! `perfops run SCENARIO` and `perfops check SCENARIO`: the scenario's load
//! profile run once in a [`Session`] (alone, or as one shard of several:
//! `--shard`, `--start-at`, `--setup-values`, see [`crate::shard`]), each
//! stage judged and the run summarised by [`crate::conclude`], the path
//! `limit`, `sweep` and `merge` conclude through too.

use std::path::PathBuf;

use anyhow::Result;
use perfops_core::pipeline::AbortWhen;
use perfops_core::scenario::Override;

use crate::conclude::{self, Ending};
use crate::exit::Exit;
use crate::loading::{inputs, load_model, load_scenario, stage_plans};
use crate::session::{Session, SessionArgs, overrides};
use crate::shard::ShardArgs;

/// Flags of `perfops run`.
#[derive(Debug, Clone)]
pub struct RunArgs {
    /// The scenario and how to run it.
    pub session: SessionArgs,
    /// Where this load sits among generators.
    pub shard: ShardArgs,
    /// Run setup, then each flow once (one arrival per flow, in file order,
    /// no load model) and print every exchange: the request, the response
    /// (the first KiB of each body), each check and save with expected vs
    /// found, the time; secrets redacted. Writes no results. Exit 0 when
    /// every exchange passed its checks, 1 otherwise (k6's
    /// `--iterations 1 --http-debug`).
    pub debug: bool,
    /// Go on when the first seconds find the target down (every connection
    /// refused or timed out, none answered); by default the run stops there
    /// and exits 3.
    pub keep_going: bool,
}

/// Flags of `perfops check`.
#[derive(Debug, Clone)]
pub struct CheckArgs {
    /// Scenario files to validate.
    pub files: Vec<PathBuf>,
    /// Check with this field overridden, as `run --set` would run it
    /// (repeatable; applied to every file).
    pub set: Vec<Override>,
    /// Check with this target, as `run --target` would run it.
    pub target: Option<String>,
}

/// `perfops check`: validate scenario files, every error at once.
pub fn check(args: CheckArgs) -> Result<Exit> {
    let mut ok = true;
    // What a CI job is about to run: the file with the same overrides.
    let overrides = overrides(&args.set, args.target.as_deref());
    for path in &args.files {
        let Some((s, text)) = load_scenario(path, &overrides)? else {
            ok = false;
            continue;
        };
        // What `run` reads besides the file (environment, CSV files, the
        // target's URL), read alike: `check` passes what `run` accepts (#11).
        match inputs(&s, path, &text) {
            Err(e) => {
                tell!("{}: {e:#}", path.display());
                ok = false;
            }
            Ok(None) => ok = false,
            Ok(Some(read)) => {
                crate::say::out(&format!(
                    "{}: ok ({} flows, {} stages, {:.0} s)\n",
                    path.display(),
                    s.flows.len(),
                    s.load.stages().len(),
                    s.load.duration().as_secs_f64()
                ));
                if let Some(why) = read.unresolved {
                    tell!("{}: note: {why}: `run` needs it to resolve where it runs", path.display());
                }
                // What a valid file will surely do wrong when it runs: said, not refused (#32).
                let warnings =
                    perfops_core::scenario::warn::warnings(&path.display().to_string(), &text, &s, &read.feeders);
                if !warnings.0.is_empty() {
                    crate::say::tell(&warnings.render_warnings(&text));
                }
            }
        }
    }
    Ok(if ok { Exit::Passed } else { Exit::Usage })
}

/// `perfops run`: the scenario's load profile, judged.
pub fn run(args: RunArgs) -> Result<Exit> {
    if args.debug {
        return crate::debug::run(&args.session);
    }
    let placement = args.shard.placement()?;
    let Some(mut s) = Session::open(&args.session, "run", &placement)? else { return Ok(Exit::Usage) };
    let model = load_model(&s.scenario.load)?;
    let stages = stage_plans(&s.scenario.load, placement.shard());
    let shard = placement.shard.map_or(String::new(), |sh| format!(", shard {}", crate::shard::shard_text(sh)));
    note!(
        "{} — {} stage(s), {:.0} s{shard}; results in {}",
        s.scenario.name,
        stages.len(),
        s.scenario.load.duration().as_secs_f64(),
        s.dir.path().display()
    );
    let mut abort = AbortWhen::new(&s.scenario.abort_when);
    if !args.keep_going {
        s.stop_if_down();
    }
    let loaded = s.load(model, &stages, Some(&mut abort))?;
    // The last samples (the queue the load left behind) before judging.
    s.close();
    // A target that is down stopped the load at once (#32): said now, judged and written as an
    // aborted run, and a runtime failure, not a verdict on the target's capacity.
    let down = s.down().map(str::to_string);
    if let Some(why) = &down {
        note!("stopped after {} s: {why} (--keep-going runs on)", s.down_after());
    }
    let reason = down.clone().or_else(|| abort.reason().map(str::to_string));
    // A stop by hand is said as one (`stopped by hand at t=...`), not as an interruption.
    let by_hand = loaded.events.iter().any(|(_, e)| e.action == "stop");
    let interrupted = loaded.stopped && reason.is_none() && !by_hand;
    let ending = Ending::local(&loaded, interrupted, reason);
    let mut summary = s.judging().summarize(&loaded, ending);
    let exit = conclude::finish(&s.dir, &mut summary, args.session.junit.as_deref(), &mut s.outputs)?;
    Ok(if down.is_some() { Exit::Runtime } else { exit })
}
