//! Scenario files: YAML in, a validated [`Scenario`] out, or every error at
//! once with its file, line, column, field path and a hint.
//!
//! The raw form is the YAML node tree with positions (marked-yaml); [`decode`]
//! walks it once, checking every mapping against its known keys (unknown ones
//! get a "did you mean"), and builds the validated types below. It never stops
//! at the first error: a user fixing a file sees them all. Nothing here reads
//! files or the clock; the caller passes text in. [`sources`] resolves what a
//! scenario takes from outside (the environment, CSV files) through readers
//! the caller hands in; [`redact`] keeps its secrets out of the results.

pub mod condition;
mod decode;
pub mod diag;
pub mod extract;
pub mod feeder;
mod flow;
pub mod grpc;
mod llm;
mod load;
pub mod output;
pub mod redact;
pub mod script;
pub mod sources;
pub mod template;
pub mod warn;
mod watch;

use std::time::Duration;

pub use condition::{AbortRule, Agg, Condition, Metric};
pub use decode::{Override, Partial, parse, parse_partial};
pub use diag::{Diagnostic, Diagnostics};
pub use watch::chart_picks;

/// The SLO of a scenario file that writes no `slo:` (`slo: []` writes none): a stage
/// where more than 1% of requests failed does not hold, whatever its rate. Without it a
/// run where every request came back 404 read "PASSED: every stage held".
pub const DEFAULT_SLO: &str = "errors < 1%";

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
    /// Service level objectives: the verdict. [`DEFAULT_SLO`] when the file writes no `slo:`.
    pub slo: Vec<Condition>,
    /// Stop early when one of these holds for its window.
    pub abort_when: Vec<AbortRule>,
    /// What to watch on the target (`None`: nothing asked).
    pub watch: Option<Watch>,
    /// Kubernetes-style probes.
    pub probe: Probes,
    /// Outputs chosen by name besides those of the command line
    /// (`outputs: [ jsonl=results.jsonl ]`); the names are the binary's to check.
    pub outputs: Vec<output::OutputSpec>,
    /// `scripts:`: the JavaScript files its hooks and script steps call
    /// (`None`: the scenario has no scripts, and pays nothing for them).
    pub scripts: Option<script::ScriptsSpec>,
    /// Every `${env.NAME}` and `${feeder.column}` the scenario uses, where:
    /// the variables whose values come from outside the file, checked by
    /// [`sources`] when it reads them, whose errors point at the use.
    pub outside_vars: Vec<VarUse>,
}

/// Where in the scenario's text something is written, for an error found
/// after validation (an unset `${env.X}`, a CSV file that cannot be read).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Origin {
    /// The file as the user named it, or `--set`.
    pub file: String,
    /// 1-based line; 0 when unknown.
    pub line: usize,
    /// 1-based column; 0 when unknown.
    pub column: usize,
    /// The field path, e.g. `defaults.headers.X-Api-Key`.
    pub path: String,
}

impl Origin {
    /// A diagnostic at this place.
    pub fn error(&self, message: String, hint: Option<String>) -> Diagnostic {
        Diagnostic {
            file: self.file.clone(),
            line: self.line,
            column: self.column,
            path: self.path.clone(),
            message,
            hint,
        }
    }
}

/// One use of a variable in the scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VarUse {
    /// The variable.
    pub var: template::VarRef,
    /// The text that uses it, as written.
    pub used_in: String,
    /// Where.
    pub at: Origin,
}

/// The target: a URL, or the built-in demo server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetSpec {
    /// `http://`, `https://`, `ws://` or `wss://` (checked by the engine when it resolves it).
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
    /// How long a new connection may take to connect (`defaults.connect_timeout`; `None`:
    /// [`DEFAULT_CONNECT_TIMEOUT`]), at most `timeout`.
    pub connect_timeout: Option<Duration>,
    /// Headers sent with every request (a step's own headers override them).
    pub headers: Vec<(String, Template)>,
    /// The HTTP to speak whatever the target's scheme says (`None`: the
    /// scheme decides: `http://` HTTP/1.1, `https://` ALPN, `h2c://` HTTP/2).
    pub protocol: Option<HttpVersion>,
    /// HTTP/2's knobs (`defaults.http2`), each `None` when not given.
    pub http2: Http2Options,
    /// `defaults.cookies`: each flow instance keeps the cookies its answers set and sends them
    /// back, as a browser session does (`true`, the default, as in k6 and browsers).
    pub cookies: bool,
    /// The request and response hooks of every HTTP step that names none
    /// of its own (`defaults: { before: sign, after: check }`).
    pub hooks: script::StepScript,
}

/// A connect's timeout when `defaults.connect_timeout` says none: long enough for a SYN
/// dropped by a full listen queue to be sent again (after 1 s, then 3 s), short beside a
/// request's timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

impl Defaults {
    /// The connect timeout of every new connection: `connect_timeout`, or
    /// [`DEFAULT_CONNECT_TIMEOUT`], never past the whole request's `timeout`.
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT).min(self.timeout)
    }
}

/// `defaults.protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpVersion {
    /// `http1`: HTTP/1.1 (over TLS, ALPN offers `http/1.1` alone).
    Http1,
    /// `h2`: HTTP/2 (in clear text with prior knowledge, or ALPN `h2` alone).
    H2,
}

/// `defaults.http2`: how HTTP/2 connections are used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Http2Options {
    /// Streams in flight per connection, at most (the server's SETTINGS may allow fewer).
    pub streams: Option<u32>,
    /// Connections over the whole run, at most (default: as many as the
    /// requests in flight need, `streams` to each).
    pub connections: Option<u32>,
    /// Each stream's receive window, bytes.
    pub stream_window: Option<u32>,
    /// The connection's receive window, bytes.
    pub connection_window: Option<u32>,
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
    /// A gRPC call (`grpc:`): the body is its message as JSON, sent as
    /// protobuf; its headers carry the metadata.
    pub grpc: Option<grpc::GrpcCall>,
    /// `websocket: /path`: the step is a WebSocket session, not a request
    /// (`method` is then `GET`, `path` the upgrade's, `body` none; `expect`
    /// and `save` look at each reply).
    pub websocket: Option<WebSocket>,
    /// Its scripts: `script: NAME` (a call instead of a request: `method`
    /// and `path` are then empty) or request and response hooks (empty
    /// when it names no function).
    pub script: script::StepScript,
    /// `stream:`: the answer is read as a stream of events (Server-Sent
    /// Events, or lines), each dated, and measured as one (time to the first
    /// event, gaps, events, duration). `None`: read as a whole, as always.
    pub stream: Option<StreamRead>,
    /// `openai: chat`: an LLM step, a POST of a chat completion whose answer is read as tokens
    /// (`body` holds the request's JSON; see `llm.rs`).
    pub llm: Option<Llm>,
}

/// How a step with `stream:` reads its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamRead {
    /// `stall`: the longest wait for an event (from the send to the first,
    /// or between two) before the answer fails as `stream_stall`; none: the
    /// step's timeout alone bounds it.
    pub stall: Option<Duration>,
}

/// What an LLM step (`openai: chat`) asks of the engine, beside its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Llm {
    /// The API it speaks.
    pub api: LlmApi,
    /// Streamed (`stream: true`, the default): its tokens are timed as they arrive. Not:
    /// one answer, its tokens counted from `usage`.
    pub stream: bool,
    /// `max_tokens`, if the step sets it.
    pub max_tokens: Option<u32>,
}

/// An OpenAI-compatible API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlmApi {
    /// `chat`: `/v1/chat/completions`, tokens in `choices[].delta.content`.
    Chat,
}

impl Step {
    /// The name its messages are measured under, apart from its upgrade's: a
    /// WebSocket step that sends has a row `NAME messages` of its own.
    pub fn messages_name(&self) -> Option<String> {
        self.websocket.as_ref().filter(|ws| !ws.send.is_empty()).map(|_| format!("{} messages", self.name))
    }

    /// Every template it renders: its path, headers, body and WebSocket messages.
    pub fn templates(&self) -> Vec<&Template> {
        let mut out: Vec<&Template> = vec![&self.path];
        out.extend(self.headers.iter().map(|(_, t)| t));
        match &self.body {
            Body::Raw(t) => out.push(t),
            Body::Form(f) => out.extend(f.iter().map(|(_, t)| t)),
            Body::Json(parts) => out.extend(parts.iter().filter_map(|p| match p {
                JsonPart::String(t) | JsonPart::Value(t) => Some(t),
                JsonPart::Literal(_) => None,
            })),
            Body::None => {}
        }
        out.extend(self.websocket.iter().flat_map(|ws| ws.send.iter()));
        out
    }
}

/// A WebSocket step's session: upgrade, send each message and await its
/// reply, keep the connection open for `hold` (sending the messages again
/// every `every`), then close it.
#[derive(Debug, Clone)]
pub struct WebSocket {
    /// Text messages sent in order, each awaiting one reply (templated).
    pub send: Vec<Template>,
    /// How long the connection stays open, from the upgrade (zero: closed
    /// once the messages are answered).
    pub hold: Duration,
    /// During the hold, send the messages again at this period.
    pub every: Option<Duration>,
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
    /// A whole JSON value that is one `${...}` (`qty: ${orders.qty}`): sent with its value's JSON type,
    /// quotes included when it is a string ([`Template::render_json_value`], issue #32).
    Value(Template),
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
    /// Where `csv:` is written.
    pub at: Origin,
}

/// The load profile.
#[derive(Debug, Clone, PartialEq)]
pub enum Load {
    /// Arrivals per second follow the stages.
    Open {
        /// Stages, in order (a replay's: cut from its recording once it is
        /// read, [`Load::attach`]; empty before).
        stages: Vec<Stage>,
        /// In-flight cap; arrivals beyond it are dropped and counted.
        max_in_flight: u32,
        /// `model: replay`: arrivals at a recording's offsets instead of a
        /// rate curve.
        replay: Option<Replay>,
    },
    /// N users loop through flows.
    Closed {
        /// Stages (rates are user counts).
        stages: Vec<Stage>,
        /// Pause between a user's iterations.
        think: Duration,
    },
}

/// `load: { model: replay, file, speed, stage_every }`: a recording's
/// arrivals at their offsets ([`crate::model::replay`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    /// The replay file, as written (relative to the scenario file).
    pub file: String,
    /// How many times as fast as recorded (> 0; 2: in half the time).
    pub speed: f64,
    /// One stage per this many seconds of the replay; `None`: one stage.
    pub stage_every: Option<u32>,
    /// Where `file:` is written.
    pub at: Origin,
    /// The recording, once read ([`Load::attach`]).
    pub recording: Option<std::sync::Arc<crate::model::Recording>>,
}

impl Replay {
    /// Its stages, from the arrivals due in each second of the replay.
    pub fn stages(&self, per_second: &[f64]) -> Vec<Stage> {
        crate::model::replay::stages(per_second, self.stage_every)
            .into_iter()
            .map(|(name, segment)| Stage { name, segment })
            .collect()
    }
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

    /// Is it the open model?
    pub fn is_open(&self) -> bool {
        matches!(self, Load::Open { .. })
    }

    /// A replay's settings (`model: replay`).
    pub fn replay(&self) -> Option<&Replay> {
        match self {
            Load::Open { replay, .. } => replay.as_ref(),
            Load::Closed { .. } => None,
        }
    }

    /// A replay's recording, read: its stages are cut from it. Nothing for
    /// another model.
    pub fn attach(&mut self, recording: std::sync::Arc<crate::model::Recording>) {
        if let Load::Open { stages, replay: Some(replay), .. } = self {
            *stages = replay.stages(&recording.per_second(replay.speed));
            replay.recording = Some(recording);
        }
    }

    /// A replay's stages from the arrivals due in each second (`merge`: the
    /// shards' targets added, the recording not at hand). Nothing for
    /// another model.
    pub fn attach_seconds(&mut self, per_second: &[f64]) {
        if let Load::Open { stages, replay: Some(replay), .. } = self {
            *stages = replay.stages(per_second);
        }
    }

    /// Total length of the profile.
    pub fn duration(&self) -> Duration {
        self.stages().iter().map(|s| s.segment.duration).sum()
    }
}

/// What to watch on the target while the load runs (`watch:`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Watch {
    /// How often every source is sampled.
    pub every: Duration,
    /// Prometheus endpoints: absolute URLs, or paths (`/metrics`) on the target.
    pub prometheus: Vec<String>,
    /// JSON stats endpoints and the fields to sample from each.
    pub json: Vec<JsonWatch>,
    /// A local process to sample (CPU, memory, threads, its listen queue).
    pub process: Option<ProcessWatch>,
    /// Which watched metrics say how busy the server's worker pool is.
    pub pool: Option<PoolMetrics>,
    /// PromQL queries against the team's Prometheus.
    pub promql: Option<PromqlWatch>,
    /// Watched metrics the report charts first, in this order.
    pub chart: Vec<String>,
}

/// Instant PromQL queries against a Prometheus server, each `every` (`watch.promql`).
#[derive(Debug, Clone, PartialEq)]
pub struct PromqlWatch {
    /// The server's base URL (`http://prometheus:9090`); `/api/v1/query` is appended.
    pub url: String,
    /// How often the queries run (the watch's `every` when not given).
    pub every: Option<Duration>,
    /// Per query; `every` capped at 5 s when not given.
    pub timeout: Option<Duration>,
    /// (name in `watch.jsonl`, PromQL expression), in the order written.
    pub queries: Vec<(String, String)>,
    /// How to authenticate: secrets are named by environment variable, never written.
    pub auth: PromqlAuth,
    /// A PEM file of CA certificates to trust for an `https` URL (besides the system's).
    pub ca_file: Option<String>,
}

/// Credentials for a Prometheus behind a proxy, read from the environment when the run starts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PromqlAuth {
    /// None.
    #[default]
    None,
    /// `Authorization: Bearer $VAR` (`bearer_env: VAR`).
    Bearer {
        /// The environment variable holding the token.
        token_env: String,
    },
    /// `Authorization: Basic` (`user: NAME, password_env: VAR`).
    Basic {
        /// The user name (not a secret).
        user: String,
        /// The environment variable holding the password.
        password_env: String,
    },
}

/// A JSON stats endpoint (`{ url: /stats, fields: { gvl: $.avg_gvl_vs_running } }`).
#[derive(Debug, Clone, PartialEq)]
pub struct JsonWatch {
    /// Absolute URL or a path on the target.
    pub url: String,
    /// Metric name and the JSONPath that reads it.
    pub fields: Vec<(String, Extractor)>,
}

/// Which local process is the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessWatch {
    /// By process id.
    Pid(u32),
    /// The process listening on this TCP port.
    Port(u16),
}

/// The pool gauge pair: busy workers and their maximum.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolMetrics {
    /// Metric with the number of busy workers (threads).
    pub busy: String,
    /// Metric with the pool size, or the size itself.
    pub max: PoolMax,
}

/// The pool size: a watched metric or a number.
#[derive(Debug, Clone, PartialEq)]
pub enum PoolMax {
    /// Read from this metric.
    Metric(String),
    /// Fixed.
    Value(f64),
}

/// Kubernetes-style probes (`probe:`), run on their own connections.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Probes {
    /// A failing liveness probe means Kubernetes would restart the pod.
    pub liveness: Option<ProbeSettings>,
    /// A failing readiness probe means it would stop sending it traffic.
    pub readiness: Option<ProbeSettings>,
}

/// One probe, with Kubernetes' defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeSettings {
    /// Path on the target (`/health`).
    pub path: String,
    /// Time between checks (default 10s).
    pub period: Duration,
    /// A check slower than this fails (default 1s).
    pub timeout: Duration,
    /// Consecutive failures that trip the probe (default 3).
    pub failure_threshold: u32,
    /// Consecutive successes that clear it (default 1).
    pub success_threshold: u32,
    /// Wait before the first check (default 0s).
    pub initial_delay: Duration,
}
