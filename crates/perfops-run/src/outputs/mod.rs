//! Outputs chosen by name, and the one place a load's pipeline is assembled.
//!
//! ```text
//!   --output NAME[=ARG] (repeatable)  ┐
//!   --metrics-listen ADDR             ├─> REGISTRY: name -> (help, make(ARG)) ─> Chosen: start(meta) once,
//!   scenario `outputs: [NAME=ARG]`    ┘                                           finish(summary) once
//!
//!   each load:  pipeline(decisions, chosen, results, live, tally)
//!               Second ─> judge (may stop the load) ─> chosen, in order ─> results writer ─> live line
//! ```
//!
//! This module owns the registry ([`REGISTRY`]: every output a user can name,
//! with its help and its constructor), what the flags that name them say
//! ([`OutputArgs`]; the binary's clap flags, on `run`, `limit`, `sweep`,
//! `coordinator` and `quick`, check each name with [`parse_spec`]), the outputs a session chose ([`Chosen`]) and [`pipeline`],
//! the one function that puts a load's decisions and outputs in order. It
//! does not own what an output does (one file each: `jsonl.rs`,
//! `prometheus.rs`), nor the seam itself
//! (`perfops_report::output::Output`, which says why it must not block), nor
//! what may stop a load (the judge, `crate::watching`, a decision handed each
//! second before any output). The results directory and the live line are
//! outputs too, but not chosen by name: the directory is always written, the
//! live line follows `-q` and the terminal.
//!
//! The order is the one a second has always been handed on in: the judge
//! first, so that an abort is decided on a second before anything is written
//! of it; then the outputs chosen by name, in the order given
//! (`--metrics-listen` first); the results directory; the live line last.
//!
//! # Add an output: one file, one line here
//!
//! 1. Write `outputs/NAME.rs`: a type that implements
//!    `perfops_report::output::Output` (`second` is required; `start` gets
//!    the run's `meta.json`, `finish` the summary) and a
//!    `pub(crate) const ENTRY: Entry` with its name, its help, its
//!    `make(arg: Option<&str>) -> Result<Box<dyn Output>, String>`, which
//!    checks ARG (an error is a usage error, exit 2, before anything
//!    starts), and what ARG names (`Arg::File`: a scenario may then name
//!    one only inside the folder perfops runs in; `Arg::Address`). If it may block (a network push, a pipe), `make` wraps it in
//!    `perfops_report::detach::Detached` (`Whole(output)` for an output of
//!    whole seconds; `Detachable` for one that needs less of each), which
//!    runs it on its own thread behind a bounded buffer and says what it
//!    dropped.
//! 2. Add NAME to the `registry!` line below: the module and its entry.
//!
//! `--output NAME=ARG`, the scenario's `outputs:`, the schema's
//! description aside (`schema/scenario.schema.json` lists the outputs in
//! words), and the "known outputs" of an unknown name's error then know it;
//! `jsonl.rs` is the example.

use perfops_core::pipeline::{Pipeline, Sink, StageLedger};
use perfops_core::scenario::Diagnostic;
use perfops_core::scenario::output::OutputSpec;
use perfops_core::scenario::redact::redact_text;
use perfops_report::output::{End, Output, OutputList};
use perfops_report::run::RunMeta;

use crate::exit::UsageError;

/// How an output is made from its ARG (`None`: nothing after the name); an
/// error is the user's.
pub type Make = fn(Option<&str>) -> Result<Box<dyn Output>, String>;

/// What an output's ARG names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// A file it writes (`-`: stdout). Named in a scenario file, the file
    /// must stay inside the folder perfops runs in: a scenario from
    /// elsewhere must not overwrite `~/.bashrc`.
    File,
    /// An address it serves on or sends to.
    Address,
}

/// An output a user can name.
pub struct Entry {
    /// What `--output` and `outputs:` call it.
    pub name: &'static str,
    /// What ARG is, and what it does, in a few words.
    pub help: &'static str,
    /// Make it from ARG.
    pub make: Make,
    /// What its ARG is (every output needs one).
    pub arg: Arg,
}

/// Each output's module and its [`Entry`], in the order `--help` lists them;
/// after a `;`, entries a module has besides its `ENTRY` (one file, two
/// wires of one format: `otlp` and `otlp-grpc`), listed last.
macro_rules! registry {
    ($($module:ident),+ $(; $($extra:path),+)? $(,)?) => {
        $(mod $module;)+
        /// Every output a user can name.
        pub const REGISTRY: &[Entry] = &[$($module::ENTRY,)+ $($($extra,)+)?];
    };
}

registry![prometheus, jsonl, live, prometheus_rw, otlp; otlp::GRPC_ENTRY];

/// What the pushing outputs share (backlog, retries, the HTTP wire, auth
/// headers): not an output itself.
mod push;

/// The known outputs, for an error or a help text.
pub fn known() -> String {
    REGISTRY.iter().map(|e| e.help).collect::<Vec<_>>().join("; ")
}

/// `--output NAME[=ARG]` as the binary's flags read it: the shape, and the
/// name against the registry (an unknown one is a usage error, exit 2, that
/// lists them).
pub fn parse_spec(text: &str) -> Result<OutputSpec, String> {
    let spec = OutputSpec::parse(text)?;
    match REGISTRY.iter().any(|e| e.name == spec.name) {
        true => Ok(spec),
        false => Err(format!("unknown output `{}`; known outputs: {}", spec.name, known())),
    }
}

/// What the flags that choose outputs say, on every command that runs a load.
#[derive(Debug, Clone, Default)]
pub struct OutputArgs {
    /// `--output NAME[=ARG]`, in order (repeatable), added to the scenario's `outputs:`.
    pub outputs: Vec<OutputSpec>,
    /// `--metrics-listen ADDR`: the same as `--output prometheus=ADDR`, first.
    pub metrics_listen: Option<String>,
    /// `--live [ADDR]`: the same as `--output live=ADDR`, after `--metrics-listen`.
    pub live: Option<String>,
}

impl OutputArgs {
    /// What the flags name, `--metrics-listen` first, then the scenario's `outputs:`.
    fn specs<'a>(&'a self, scenario: &'a [OutputSpec]) -> Vec<OutputSpec> {
        let listen = self.metrics_listen.iter().map(|addr| OutputSpec {
            name: "prometheus".into(),
            arg: Some(addr.clone()),
            at: Default::default(),
        });
        let live = self.live.iter().map(|addr| OutputSpec {
            name: "live".into(),
            arg: Some(addr.clone()),
            at: Default::default(),
        });
        listen.chain(live).chain(self.outputs.iter().cloned()).chain(scenario.iter().cloned()).collect()
    }
}

/// The scenario's `outputs:` it may not have, each at its place in the file:
/// a name the registry does not know (the known ones as a hint), one without
/// its ARG, and a file written outside the folder perfops runs in (absolute,
/// or through `..`).
pub(crate) fn refused_in_scenario(specs: &[OutputSpec]) -> Vec<Diagnostic> {
    let outside = |arg: &str| {
        let path = std::path::Path::new(arg);
        path.is_absolute() || path.components().any(|c| c == std::path::Component::ParentDir)
    };
    specs
        .iter()
        .filter_map(|s| match REGISTRY.iter().find(|e| e.name == s.name) {
            None => {
                Some(s.at.error(format!("unknown output `{}`", s.name), Some(format!("known outputs: {}", known()))))
            }
            // What `make` would refuse at run time, said by `check` too, at its place.
            Some(e) if s.arg.as_deref().is_none_or(str::is_empty) => {
                Some(s.at.error(format!("output `{}` needs to be told where", s.name), Some(format!("as {}", e.help))))
            }
            Some(e) if e.arg == Arg::File && s.arg.as_deref().is_some_and(outside) => Some(
                s.at.error(
                    format!("output `{}` writes outside the folder perfops runs in", redact_text(&s.to_string())),
                    Some(
                        "a scenario's outputs write relative to where perfops runs, without `..`; \
                     choose another place with --output on the command line"
                            .into(),
                    ),
                ),
            ),
            Some(_) => None,
        })
        .collect()
}

/// The outputs a run chose by name, from its start to its finish.
#[derive(Default)]
pub(crate) struct Chosen(Vec<(String, Box<dyn Output>)>);

impl Chosen {
    /// Make every output the flags and the scenario name, in that order;
    /// the first that cannot be made (a busy address, a file that cannot be
    /// created) is a usage error.
    pub(crate) fn choose(args: &OutputArgs, scenario: &[OutputSpec]) -> anyhow::Result<Chosen> {
        let usage = |m: String| anyhow::Error::new(UsageError(m));
        let mut chosen = Vec::new();
        for spec in args.specs(scenario) {
            let entry = REGISTRY
                .iter()
                .find(|e| e.name == spec.name)
                .ok_or_else(|| usage(format!("unknown output `{}`; known outputs: {}", spec.name, known())))?;
            let output = (entry.make)(spec.arg.as_deref())
                .map_err(|e| usage(format!("--output {}: {e}", redact_text(&spec.to_string()))))?;
            chosen.push((spec.name, output));
        }
        Ok(Chosen(chosen))
    }

    /// The run's steering, handed to every output before [`Chosen::start`]
    /// (those that offer control keep it; the others ignore it).
    pub(crate) fn steer(&mut self, steer: std::sync::Arc<dyn perfops_core::pipeline::control::Steer>) {
        for (_, output) in &mut self.0 {
            output.steer(steer.clone());
        }
    }

    /// The run begins: each output hears its meta. One that cannot start is
    /// a runtime failure before any load.
    pub(crate) fn start(&mut self, meta: &RunMeta) -> anyhow::Result<()> {
        for (name, output) in &mut self.0 {
            output.start(meta).map_err(|e| anyhow::anyhow!("output {name}: {e}"))?;
        }
        Ok(())
    }

    /// What the outputs have to say once the seconds are over (seconds
    /// dropped, or not delivered), said on stderr here and returned for the
    /// summary's warnings. Each is drained first: a push delivers what it
    /// still holds (within its bound), so that its note is the last word.
    pub(crate) fn notes(&mut self) -> Vec<String> {
        for (_, output) in &mut self.0 {
            output.drain();
        }
        let notes: Vec<String> = self.0.iter().flat_map(|(_, o)| o.notes()).collect();
        for note in &notes {
            note!("{note}");
        }
        notes
    }

    /// The run's report, made: each output that shows it keeps it.
    pub(crate) fn report(&mut self, html: &str) {
        for (_, output) in &mut self.0 {
            output.report(html);
        }
    }

    /// The run is over: each output hears the summary, and is closed (a
    /// metrics endpoint stops serving). What failed is said on stderr: the
    /// results are written, and the exit code is the verdict's.
    pub(crate) fn finish(&mut self, end: &End<'_>) {
        for (name, mut output) in self.0.drain(..) {
            if let Err(e) = output.finish(end) {
                let e = e.to_string();
                let e = if e.starts_with("output ") { e } else { format!("output {name}: {e}") };
                note!("{}", perfops_core::printable::lines(&e));
            }
        }
    }
}

/// What one load's seconds go through, besides its clock and stages.
#[derive(Default)]
pub(crate) struct Stations<'s> {
    /// What may stop the load (the judge), handed each second first.
    pub(crate) decisions: Vec<&'s mut dyn Sink>,
    /// The outputs chosen by name.
    pub(crate) chosen: Option<&'s mut Chosen>,
    /// The results directory's writer (none for `quick`).
    pub(crate) results: Option<Box<dyn Output + 's>>,
    /// The live line (none with `-q` or off a terminal).
    pub(crate) live: Option<Box<dyn Output + 's>>,
    /// A command's own tally of the seconds (`quick`'s by step).
    pub(crate) tally: Option<&'s mut dyn Output>,
}

/// The one pipeline of a load: `ledger` places each second from `offset` on
/// the session clock, `stop` is the flag the source watches; the seconds go
/// to the decisions, then the outputs, in the order the module doc gives.
pub(crate) fn pipeline<'s>(
    ledger: StageLedger,
    offset: u32,
    step_names: &'s [String],
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    stations: Stations<'s>,
) -> Pipeline<'s> {
    let mut pipeline = Pipeline::new(ledger, offset, step_names, stop);
    for decision in stations.decisions {
        pipeline = pipeline.to(decision);
    }
    let mut outputs: Vec<Box<dyn Output + 's>> = Vec::new();
    if let Some(chosen) = stations.chosen {
        outputs.extend(chosen.0.iter_mut().map(|(_, o)| Box::new(o) as Box<dyn Output + 's>));
    }
    outputs.extend(stations.results);
    outputs.extend(stations.live);
    if let Some(tally) = stations.tally {
        outputs.push(Box::new(tally));
    }
    pipeline.then(Box::new(OutputList::new(outputs)))
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    use perfops_core::measure::Interval;
    use perfops_core::pipeline::{Flow, Second, SinkError, StagePlan};

    use super::*;

    type Log = Rc<RefCell<Vec<&'static str>>>;

    /// Says its name when it gets a second.
    struct Named(&'static str, Log);

    impl Output for Named {
        fn second(&mut self, _: &Second<'_>) -> Result<(), SinkError> {
            self.1.borrow_mut().push(self.0);
            Ok(())
        }
    }

    impl Sink for Named {
        fn second(&mut self, _: &Second<'_>) -> Result<Flow, SinkError> {
            self.1.borrow_mut().push(self.0);
            Ok(Flow::Continue)
        }
    }

    /// The order a second has always been handed on in: the judge first (an
    /// abort is decided before anything is written), then the outputs chosen
    /// by name in the order given, the results directory, the live line, a
    /// command's tally.
    #[test]
    fn the_pipeline_hands_each_second_to_the_decisions_then_the_outputs_in_order() {
        let log: Log = Rc::default();
        let mut judge = Named("judge", log.clone());
        let mut chosen = Chosen(vec![
            ("a".into(), Box::new(Named("chosen a", log.clone()))),
            ("b".into(), Box::new(Named("chosen b", log.clone()))),
        ]);
        let mut tally = Named("tally", log.clone());
        let names = Vec::new();
        let stations = Stations {
            decisions: vec![&mut judge as &mut dyn Sink],
            chosen: Some(&mut chosen),
            results: Some(Box::new(Named("results", log.clone()))),
            live: Some(Box::new(Named("live", log.clone()))),
            tally: Some(&mut tally),
        };
        let plan =
            StagePlan { name: "a".into(), target_rate: None, start_rate: None, duration: Duration::from_secs(2) };
        let stop = Arc::new(AtomicBool::new(false));
        let mut pipeline = pipeline(StageLedger::new(&[plan], 0.0), 0, &names, stop, stations);
        pipeline.second(&Interval { length: Duration::from_secs(1), ..Interval::empty(0) }, &mut |_| {});
        drop(pipeline);
        assert_eq!(*log.borrow(), ["judge", "chosen a", "chosen b", "results", "live", "tally"]);
    }

    /// `--metrics-listen ADDR` is `--output prometheus=ADDR`, first; then the
    /// flags' outputs, then the scenario's.
    #[test]
    fn metrics_listen_is_the_prometheus_output_and_comes_first() {
        let args = OutputArgs {
            outputs: vec![OutputSpec::parse("jsonl=-").expect("a spec")],
            metrics_listen: Some("127.0.0.1:0".into()),
            live: None,
        };
        let scenario = [OutputSpec::parse("jsonl=x.jsonl").expect("a spec")];
        let specs: Vec<String> = args.specs(&scenario).iter().map(ToString::to_string).collect();
        assert_eq!(specs, ["prometheus=127.0.0.1:0", "jsonl=-", "jsonl=x.jsonl"]);
    }
}
