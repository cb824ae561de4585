//! `perfops run --debug SCENARIO` (#32): setup, then each flow once, in file
//! order, one arrival per flow and no load model, every exchange printed as
//! curl -v prints it (`>` the request, `<` the response, the first KiB of
//! each body), each with its checks' and saves' outcome and its time;
//! secrets redacted by the engine ([`perfops_engine::run_debug`]). For
//! writing a scenario: nothing is measured and no results directory is
//! written. Exit 0 when every exchange passed its checks, 1 otherwise.
//!
//! Why `--debug` on `run` and not k6's `--http-debug`: k6 needs two flags
//! (`--iterations 1 --http-debug`) for what is one intent here, and what it
//! runs is the scenario's own flows and setup, not only HTTP.

use std::fmt::Write;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use perfops_core::model::LoadModel;
use perfops_core::scenario::{Step, TargetSpec};
use perfops_engine::{DebugExchange, Target, Work};

use crate::demo::DemoChild;
use crate::exit::{Exit, UsageError};
use crate::launch::PlanBase;
use crate::loading::{inputs, load_scenario};
use crate::say::out;
use crate::session::{SessionArgs, demo_name, overrides};

/// Run `args.scenario`'s setup and flows once each and print every exchange.
pub(crate) fn run(args: &SessionArgs) -> Result<Exit> {
    let usage = |m: String| anyhow::Error::new(UsageError(m));
    let overrides = overrides(&args.set, args.target.as_deref());
    let Some((scenario, text)) = load_scenario(&args.scenario, &overrides)? else { return Ok(Exit::Usage) };
    let Some(inputs) = inputs(&scenario, &args.scenario, &text)? else { return Ok(Exit::Usage) };
    // The demo target lives until the flows are done.
    let (_demo, target) = match (&inputs.target, inputs.url_target()) {
        (TargetSpec::Url(_), Some(target)) => (None, target.map_err(usage)?),
        (TargetSpec::Url(u), None) => (None, Target::parse(u).map_err(|e| usage(e.to_string()))?),
        (TargetSpec::Demo(model, options), _) => {
            let child = DemoChild::start(demo_name(model), options)?;
            let target = Target::parse(&child.url).map_err(|e| usage(e.to_string()))?;
            (Some(child), target)
        }
    };
    let base = PlanBase::of_scenario(target.clone(), &scenario.defaults, args.insecure, 1, true);
    // Setup first, as a flow of its own: what it saves goes to every flow after it.
    let mut flows: Vec<(String, u32, Vec<Step>)> = Vec::new();
    if !scenario.setup.is_empty() {
        flows.push(("setup".to_string(), 1, scenario.setup.clone()));
    }
    flows.extend(scenario.flows.iter().map(|f| (f.name.clone(), 1, f.steps.clone())));
    let folder = inputs.folder.clone();
    let mut feeders = inputs.feeders;
    // A replay's values (`${replay.NAME}`), as a feeder: the flows run once each, not as recorded.
    feeders.extend(crate::loading::replay_values(&scenario.load));
    let mut work = Work::new(&target, flows, scenario.defaults.headers.clone(), inputs.env, feeders)
        .with_cookies(scenario.defaults.cookies);
    work.resolve_grpc(&folder, &[], Some(base.reflection())).map_err(|e| usage(e.to_string()))?;
    if let Some(plan) = inputs.scripts {
        work.attach_scripts(plan).map_err(usage)?;
    }
    let one =
        LoadModel::Closed { connections: 1, think: Duration::ZERO, profile: None, duration: None, max_requests: None };
    let plan = base.plan(Arc::new(work), one);
    let (mut exchanges, mut failed) = (0usize, 0usize);
    perfops_engine::run_debug(&plan, !scenario.setup.is_empty(), |x| {
        exchanges += 1;
        failed += usize::from(x.failure.is_some());
        out(&exchange_text(&x));
    })?;
    out(&format!(
        "{exchanges} exchange(s), {failed} failed{}\n",
        if failed == 0 { "" } else { " (each failed step ends its flow)" }
    ));
    Ok(if failed == 0 { Exit::Passed } else { Exit::ThresholdsFailed })
}

/// One exchange as `--debug` prints it.
fn exchange_text(x: &DebugExchange) -> String {
    let mut o = String::new();
    let outcome = match &x.failure {
        None => "ok".to_string(),
        Some((kind, Some(check))) => format!("FAILED {}: {check}", kind.name()),
        Some((kind, None)) => format!("FAILED {}", kind.name()),
    };
    let name = perfops_core::printable::escape(&format!("{} / {}", x.flow, x.step)).into_owned();
    let took = perfops_report::format::ms_compact(x.took.as_secs_f64() * 1e3);
    let _ = writeln!(o, "== {name}  {took}  {outcome}");
    match &x.request {
        Some(r) => prefixed(&mut o, "> ", r),
        None => o.push_str("  (not HTTP/1.1: its wire bytes are not shown, its outcome is)\n"),
    }
    if let Some(r) = &x.response {
        prefixed(&mut o, "< ", r);
    }
    for (name, value) in &x.saved {
        let _ = writeln!(o, "  saved {name} = {value}");
    }
    o.push('\n');
    o
}

fn prefixed(o: &mut String, prefix: &str, text: &str) {
    for line in text.lines() {
        // The blank line between head and body, without a trailing blank.
        let _ = if line.is_empty() { writeln!(o, "{}", prefix.trim_end()) } else { writeln!(o, "{prefix}{line}") };
    }
}
