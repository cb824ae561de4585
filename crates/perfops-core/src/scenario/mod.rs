//! Scenario files: YAML in, a validated [`Scenario`] out, or every error at
//! once with its file, line, column, field path and a hint.
//!
//! The raw form is the YAML node tree with positions (marked-yaml); [`decode`]
//! walks it once, checking every mapping against its known keys (unknown ones
//! get a "did you mean"), and builds the validated types below. It never stops
//! at the first error: a user fixing a file sees them all. Nothing here reads
//! files or the clock; the caller passes text in.

pub mod condition;
mod decode;
pub mod diag;
pub mod extract;
pub mod feeder;
mod load;
pub mod template;

use std::time::Duration;

pub use condition::{AbortRule, Condition, Metric};
pub use decode::{Override, parse};
pub use diag::{Diagnostic, Diagnostics};

use crate::model::Segment;
use extract::{Expect, Extractor};
use feeder::FeedMode;
use template::Template;

/// A validated scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Name, used in the results directory.
    pub name: String,
    /// Where the load goes.
    pub target: TargetSpec,
    /// Defaults for every request.
    pub defaults: Defaults,
    /// Steps run once before the load; what they save is global.
    pub setup: Vec<Step>,
    /// Flows; each arrival picks one by weight.
    pub flows: Vec<Flow>,
    /// CSV feeders (files are read by the caller).
    pub data: Vec<FeederSpec>,
    /// The load profile.
    pub load: Load,
    /// Service level objectives: the verdict.
    pub slo: Vec<Condition>,
    /// Stop early when one of these holds for its window.
    pub abort_when: Vec<AbortRule>,
}

/// The target: a URL, or the built-in demo server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetSpec {
    /// `http://...` or `https://...` (checked by the engine when it resolves it).
    Url(String),
    /// `demo:threads` or `demo:async`, optionally with settings
    /// (`demo:threads?io_wait=50ms&threads=5`): perfops starts its demo target.
    Demo(DemoModel, Vec<(String, String)>),
}

/// The built-in demo target's server model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DemoModel {
    /// A fixed thread pool behind a listen backlog.
    Threads,
    /// Concurrent request handling.
    Async,
}

/// Defaults applied to every step.
#[derive(Debug, Clone)]
pub struct Defaults {
    /// Whole-request timeout.
    pub timeout: Duration,
    /// Headers sent with every request (a step's own headers override them).
    pub headers: Vec<(String, Template)>,
}

/// A flow: steps run in order by one arrival.
#[derive(Debug, Clone)]
pub struct Flow {
    /// Its name, from the `flows` mapping.
    pub name: String,
    /// Relative weight among flows.
    pub weight: u32,
    /// The steps.
    pub steps: Vec<Step>,
}

/// One HTTP request of a flow.
#[derive(Debug, Clone)]
pub struct Step {
    /// Name used in results (defaults to `METHOD /path`).
    pub name: String,
    /// HTTP method.
    pub method: String,
    /// Path and query (templated).
    pub path: Template,
    /// Headers (templated values).
    pub headers: Vec<(String, Template)>,
    /// The body.
    pub body: Body,
    /// Checks on the response; a failure counts as `check_failed`.
    pub expect: Option<Expect>,
    /// Values to save from the response into variables.
    pub save: Vec<(String, Extractor)>,
    /// Think time after this step.
    pub pause: Duration,
}

/// A request body.
#[derive(Debug, Clone)]
pub enum Body {
    /// No body.
    None,
    /// Raw text (templated), sent as is.
    Raw(Template),
    /// JSON: literal JSON text with templated string values, JSON-escaped.
    Json(Vec<JsonPart>),
    /// `application/x-www-form-urlencoded` fields (templated values).
    Form(Vec<(String, Template)>),
}

/// A piece of a JSON body: literal JSON, or a template rendered as the inside
/// of a JSON string.
#[derive(Debug, Clone)]
pub enum JsonPart {
    /// JSON text, verbatim.
    Literal(String),
    /// The contents of a JSON string value (the quotes are literal parts).
    String(Template),
}

/// A CSV feeder declared under `data:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeederSpec {
    /// Variable prefix: `${users.email}`.
    pub name: String,
    /// The CSV file, as written (relative to the scenario file).
    pub csv: String,
    /// How rows are handed out.
    pub mode: FeedMode,
}

/// The load profile.
#[derive(Debug, Clone, PartialEq)]
pub enum Load {
    /// Arrivals per second follow the stages.
    Open {
        /// Stages, in order.
        stages: Vec<Stage>,
        /// In-flight cap; arrivals beyond it are dropped and counted.
        max_in_flight: u32,
    },
    /// N users loop through flows.
    Closed {
        /// Stages (rates are user counts).
        stages: Vec<Stage>,
        /// Pause between a user's iterations.
        think: Duration,
    },
}

/// A named stage: a rate (or user count) curve segment.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    /// Name in the results (`50/s`, `ramp to 300/s`, or given).
    pub name: String,
    /// The curve: rates in arrivals/s (open) or users (closed).
    pub segment: Segment,
}

impl Load {
    /// The stages, whatever the model.
    pub fn stages(&self) -> &[Stage] {
        match self {
            Load::Open { stages, .. } | Load::Closed { stages, .. } => stages,
        }
    }

    /// Total length of the profile.
    pub fn duration(&self) -> Duration {
        self.stages().iter().map(|s| s.segment.duration).sum()
    }
}
