//! The work of one arrival: pick a flow, then run its steps in order, each
//! request rendered from the scenario's templates.
//!
//! A step whose method, path, headers and body are all literal is rendered
//! once, when the plan is built: `perfops quick` is a plan of one flow of one
//! such step, so its hot path writes the same bytes every time and renders
//! nothing.
//!
//! What goes into the request's head (the target, header values, gRPC
//! metadata) is rendered with `Template::render_head`: a value holding CR,
//! LF or NUL makes [`Work::render`] refuse the request, which the worker
//! counts as `unsafe_value` without writing anything (issue #31), and the
//! target is percent-encoded. A literal step is checked once, here, when its
//! bytes are cached: its requests pay nothing per request.
//!
//! A whole value of a `json:` body (`qty: ${orders.qty}`) keeps its value's
//! JSON type (`Template::render_json_value`, issue #32); one forced to a
//! number that is not one refuses the request as `bad_value`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use perfops_core::cookie::Jar;
use perfops_core::scenario::feeder::Feeder;
use perfops_core::scenario::redact::redact_text;
use perfops_core::scenario::script::OnScriptError;
use perfops_core::scenario::template::head::{first_refused, is_token};
use perfops_core::scenario::template::{Escape, HeadPlace, RenderError, Template, VarRef, Vars};
use perfops_core::scenario::{Body, JsonPart, Step, WebSocket};
use perfops_script::{Hook, Limits, Scripts};

use crate::grpc::{GrpcError, GrpcMethod, Resolver};
use crate::reflection::Reflection;
use crate::target::{Target, TargetError};

/// Everything an arrival may do.
#[derive(Debug, Clone)]
pub struct Work {
    /// The flows, picked by weight.
    pub flows: Vec<FlowPlan>,
    /// Step names by global step index (the index in results).
    pub step_names: Vec<String>,
    /// Variables saved by setup, the starting values of every worker.
    pub globals: HashMap<String, String>,
    /// `${env.NAME}` values, read once before the run.
    pub env: HashMap<String, String>,
    /// CSV feeders.
    pub feeders: Vec<Feeder>,
    /// `host[:port]` for the Host header.
    authority: String,
    /// Default headers (name, value) sent unless a step sets the same name.
    defaults: Vec<(String, Template)>,
    /// Flow index for each slot of one weight cycle (see [`Work::pick`]); a
    /// replay's: each arrival's recorded flow, shared with its recording.
    cycle: Arc<[u32]>,
    /// A step through the cycle coprime with its length.
    stride: u64,
    /// Per feeder, which arrivals of a cycle use it ([`Work::feeder_seq`]).
    feeder_turns: Vec<FeederTurns>,
    /// Redirects to follow (0: none, the default: a 3xx is the answer).
    pub redirects: u8,
    /// Each flow instance keeps a cookie jar (`defaults.cookies`; off for `quick`).
    pub cookies: bool,
    /// The scenario's scripts, once attached ([`Work::attach_scripts`]);
    /// `None`: no step names a function, and none pays for one.
    pub scripts: Option<Arc<ScriptPlan>>,
}

/// The scripts a plan runs: the compiled files (each worker builds its own
/// runtime from them), the limits of `scripts:` and what a flow does after
/// a script error.
#[derive(Debug, Clone)]
pub struct ScriptPlan {
    /// The files, compiled.
    pub scripts: Scripts,
    /// Time per call, memory per runtime.
    pub limits: Limits,
    /// `scripts.on_error`.
    pub on_error: OnScriptError,
}

/// A step's functions, found by name once: a call instead of a request, or
/// hooks around it.
#[derive(Debug, Clone, Copy, Default)]
pub struct StepHooks {
    /// `script: NAME`.
    pub call: Option<Hook>,
    /// The request hook.
    pub before: Option<Hook>,
    /// The response hook.
    pub after: Option<Hook>,
}

impl Work {
    /// The values no result may show (#32: a failure's body head, `--debug`'s exchanges): every
    /// `${env.*}` value, the literal value of every header that is not harmless (the scenario's
    /// own rule, [`redact`](perfops_core::scenario::redact)) and the `user:password` of a literal
    /// `Basic` one, what was saved under a name that looks like a credential (`token`,
    /// `session_id`), was taken from a cookie (`cookie:NAME`) or goes into a header that is not
    /// harmless (`X-Session: ${s}`) in `saved` (the flow instance's values) or setup's, and every
    /// value of the flow's cookie `jar`; each also in the forms a template sends it in
    /// ([`encoded_forms`](perfops_core::scenario::template::encoded_forms)). Made when a failure
    /// is sampled (a few per step), never per request.
    pub fn secrets(&self, saved: Option<&HashMap<String, String>>, jar: Option<&Jar>) -> Vec<String> {
        use perfops_core::scenario::extract::Extractor;
        use perfops_core::scenario::redact::{credential_name, harmless_header};
        use perfops_core::scenario::template::encoded_forms;
        let from_cookie = |name: &str| {
            self.flows
                .iter()
                .flat_map(|f| f.steps.iter().flat_map(|s| s.step.save.iter()))
                .any(|(n, e)| n == name && matches!(e, Extractor::Cookie { .. }))
        };
        let steps = self.flows.iter().flat_map(|f| f.steps.iter().flat_map(|s| s.step.headers.iter()));
        let secret_headers: Vec<&Template> =
            self.defaults.iter().chain(steps).filter(|(name, _)| !harmless_header(name)).map(|(_, t)| t).collect();
        let in_header = |name: &str| {
            secret_headers.iter().flat_map(|t| t.vars()).any(|v| matches!(v, VarRef::Saved(n) if n == name))
        };
        let literal: Vec<String> = secret_headers
            .iter()
            .filter_map(|t| t.as_literal())
            .flat_map(|v| std::iter::once(v.to_string()).chain(basic_credentials(v)))
            .collect();
        let saved = saved
            .into_iter()
            .flatten()
            .chain(&self.globals)
            .filter(|(name, _)| credential_name(name) || from_cookie(name) || in_header(name))
            .map(|(_, v)| v);
        let mut out: Vec<String> = self.env.values().cloned().chain(literal).chain(saved.cloned()).collect();
        out.extend(jar.into_iter().flat_map(|j| j.values().map(str::to_string)));
        let forms: Vec<String> = out.iter().flat_map(|s| encoded_forms(s)).collect();
        out.extend(forms);
        // A secret that holds another is replaced first, whole.
        out.sort_by_key(|s| std::cmp::Reverse(s.len()));
        out.dedup();
        out
    }
}

/// The `user:password` of a `Basic` credential (RFC 7617), if `value` is
/// one: an answer that echoes it decoded shows the password.
fn basic_credentials(value: &str) -> Option<String> {
    use base64::Engine;
    let (scheme, token) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD.decode(token.trim()).ok()?;
    String::from_utf8(decoded).ok().filter(|d| d.contains(':'))
}

/// Which arrivals of one weight cycle use a feeder: those whose flow
/// renders one of its columns.
#[derive(Debug, Clone, Default)]
struct FeederTurns {
    /// How many arrivals of a cycle use it.
    per_cycle: u64,
    /// For each arrival of a cycle (by `seq mod cycle`), how many before it
    /// in the cycle use the feeder; `None`: its flow does not.
    rank: Vec<Option<u32>>,
}

/// One flow of the plan.
#[derive(Debug, Clone)]
pub struct FlowPlan {
    /// Name.
    pub name: String,
    /// Steps, in order.
    pub steps: Vec<StepPlan>,
}

impl FlowPlan {
    /// The step an arrival of this flow is counted under before any request
    /// of it went out (dropped, never sent, late): its first.
    pub(crate) fn first_step(&self) -> u16 {
        self.steps.first().map_or(0, |s| s.index)
    }
}

/// One step, ready to render.
#[derive(Debug, Clone)]
pub struct StepPlan {
    /// Global index: the step's column in results.
    pub index: u16,
    /// The scenario step.
    pub step: Step,
    /// The request bytes, when nothing in the step is templated.
    pub cached: Option<Vec<u8>>,
    /// HEAD: the response has no body whatever its headers say.
    pub head: bool,
    /// The response's head and body are needed (`save`, `expect`).
    pub capture: bool,
    /// A gRPC step's method, once resolved ([`Work::resolve_grpc`]).
    pub grpc: Option<Arc<GrpcMethod>>,
    /// A WebSocket step's row for its messages' round trips (the step's own
    /// `index` is its upgrade's): `None` for an HTTP step, and for a
    /// WebSocket step that sends nothing.
    pub messages: Option<u16>,
    /// Its script functions ([`Work::attach_scripts`]): `None` for a step
    /// that names none.
    pub hooks: Option<StepHooks>,
}

/// The values visible to one arrival's templates.
pub(crate) struct ArrivalVars<'a> {
    /// What this flow instance saved (`None`: nothing yet), read after `flow`.
    pub(crate) saved: Option<&'a HashMap<String, String>>,
    /// What setup saved, read when the instance saved no such name.
    pub(crate) globals: &'a HashMap<String, String>,
    /// A scripted flow instance's own values (its scripts' saves and its
    /// steps'), read first: `None` without scripts.
    pub(crate) flow: Option<&'a BTreeMap<String, String>>,
    pub(crate) env: &'a HashMap<String, String>,
    pub(crate) seq: u64,
    pub(crate) feeders: &'a [Feeder],
    /// Row of each feeder for this arrival.
    pub(crate) rows: &'a [Option<&'a [String]>],
}

impl Vars for ArrivalVars<'_> {
    fn saved(&self, name: &str) -> Option<&str> {
        if let Some(v) = self.flow.and_then(|f| f.get(name)) {
            return Some(v);
        }
        // The flow instance's own value shadows setup's (`worker/scope.rs`).
        self.saved.and_then(|s| s.get(name)).or_else(|| self.globals.get(name)).map(String::as_str)
    }
    fn env(&self, name: &str) -> Option<&str> {
        self.env.get(name).map(String::as_str)
    }
    fn seq(&self) -> u64 {
        self.seq
    }
    fn feeder(&self, feeder: &str, column: &str) -> Option<&str> {
        let i = self.feeders.iter().position(|f| f.name() == feeder)?;
        let col = self.feeders[i].column_index(column)?;
        self.rows.get(i)?.and_then(|row| row.get(col)).map(String::as_str)
    }
}

/// Values that never change, for rendering literal steps at plan time.
struct NoVars;

impl Vars for NoVars {
    fn saved(&self, _: &str) -> Option<&str> {
        None
    }
    fn env(&self, _: &str) -> Option<&str> {
        None
    }
    fn seq(&self) -> u64 {
        0
    }
    fn feeder(&self, _: &str, _: &str) -> Option<&str> {
        None
    }
}

fn step_is_literal(step: &Step, defaults: &[(String, Template)]) -> bool {
    let body = match &step.body {
        Body::None => true,
        Body::Raw(t) => t.is_literal(),
        Body::Json(parts) => parts.iter().all(|p| matches!(p, JsonPart::Literal(_))),
        Body::Form(fields) => fields.iter().all(|(_, t)| t.is_literal()),
    };
    body && step.path.is_literal()
        && step.headers.iter().all(|(_, t)| t.is_literal())
        && defaults.iter().all(|(_, t)| t.is_literal())
}

impl Work {
    /// What one arrival's templates read: `saved` (its flow instance's
    /// values so far, if any), then setup's, the environment, `seq` and its
    /// feeders' `rows`.
    pub(crate) fn vars<'a>(
        &'a self,
        saved: Option<&'a HashMap<String, String>>,
        seq: u64,
        rows: &'a [Option<&'a [String]>],
    ) -> ArrivalVars<'a> {
        ArrivalVars { saved, globals: &self.globals, flow: None, env: &self.env, seq, feeders: &self.feeders, rows }
    }

    /// A plan of one flow of the given steps.
    pub fn new(
        target: &Target,
        flows: Vec<(String, u32, Vec<Step>)>,
        defaults: Vec<(String, Template)>,
        env: HashMap<String, String>,
        feeders: Vec<Feeder>,
    ) -> Work {
        let mut step_names = Vec::new();
        let mut cycle = Vec::new();
        let mut plans = Vec::new();
        for (i, (name, weight, steps)) in flows.into_iter().enumerate() {
            cycle.extend(std::iter::repeat_n(i as u32, weight as usize));
            let steps = steps
                .into_iter()
                .map(|step| {
                    let index = step_names.len() as u16;
                    step_names.push(step.name.clone());
                    // A WebSocket step's messages are measured on a row of
                    // their own, next to its upgrade's (see `ws`).
                    let messages = step.messages_name().map(|name| {
                        step_names.push(name);
                        index + 1
                    });
                    // A non-streamed LLM answer is read whole for its `usage`.
                    let capture = !step.save.is_empty() || step.expect.is_some() || step.llm.is_some_and(|l| !l.stream);
                    let head = step.method.eq_ignore_ascii_case("HEAD");
                    StepPlan { index, step, cached: None, head, capture, grpc: None, messages, hooks: None }
                })
                .collect();
            plans.push(FlowPlan { name, steps });
        }
        let mut work = Work {
            flows: plans,
            step_names,
            globals: HashMap::new(),
            env,
            feeders,
            authority: target.authority.clone(),
            defaults,
            stride: coprime_stride(cycle.len() as u64),
            cycle: cycle.into(),
            feeder_turns: Vec::new(),
            redirects: 0,
            cookies: false,
            scripts: None,
        };
        work.feeder_turns = work.feeders.iter().map(|f| work.turns_of(f.name())).collect();
        let mut rng = fastrand::Rng::with_seed(0);
        for f in 0..work.flows.len() {
            for s in 0..work.flows[f].steps.len() {
                let step = &work.flows[f].steps[s].step;
                if step.websocket.is_none() && step_is_literal(step, &work.defaults) {
                    let mut out = Vec::new();
                    let mut body = Vec::new();
                    // Literal templates have no variable to miss. One holding
                    // CR/LF (`check` refuses it in a file) is not cached: each
                    // of its requests is then refused as `unsafe_value`.
                    let rendered = work.render(&work.flows[f].steps[s], &NoVars, &mut rng, &mut body, &mut out);
                    if !rendered.as_ref().is_err_and(RenderError::refuses) {
                        work.flows[f].steps[s].cached = Some(out);
                    }
                }
            }
        }
        work
    }

    /// `perfops quick`: one request, its headers given as `Name: value`; for
    /// a `ws://` or `wss://` target, one WebSocket session that sends `body`
    /// as its one message (none: the upgrade alone is measured).
    pub fn single(target: &Target, method: &str, headers: &[String], body: &[u8]) -> Result<Work, TargetError> {
        let parsed = headers.iter().map(|h| parse_header(h)).collect::<Result<Vec<_>, _>>()?;
        if target.websocket {
            let send =
                if body.is_empty() { Vec::new() } else { vec![Template::literal(&String::from_utf8_lossy(body))] };
            let step = Step {
                name: format!("websocket {}", redact_text(&target.path)),
                method: "GET".into(),
                path: Template::literal(&target.path),
                headers: parsed,
                body: Body::None,
                expect: None,
                save: Vec::new(),
                pause: std::time::Duration::ZERO,
                grpc: None,
                websocket: Some(WebSocket { send, hold: std::time::Duration::ZERO, every: None }),
                stream: None,
                script: Default::default(),
                llm: None,
            };
            return Ok(Work::new(
                target,
                vec![("session".into(), 1, vec![step])],
                Vec::new(),
                HashMap::new(),
                Vec::new(),
            ));
        }
        let body =
            if body.is_empty() { Body::None } else { Body::Raw(Template::literal(&String::from_utf8_lossy(body))) };
        let step = Step {
            // Named by its request line, redacted: the name is in every result.
            name: format!("{method} {}", redact_text(&target.path)),
            method: method.to_string(),
            path: Template::literal(&target.path),
            headers: parsed,
            body,
            expect: None,
            save: Vec::new(),
            pause: std::time::Duration::ZERO,
            grpc: None,
            websocket: None,
            stream: None,
            script: Default::default(),
            llm: None,
        };
        Ok(Work::new(target, vec![("request".into(), 1, vec![step])], Vec::new(), HashMap::new(), Vec::new()))
    }

    /// Resolve the gRPC steps' methods: each step's `proto` files (relative
    /// to `base`, the scenario's folder) and `extra` ones (`--proto`),
    /// compiled once per set; a step with neither asks the server's
    /// `reflection`, when given, once per service. A literal message is
    /// checked against its method's input type here, before the run.
    pub fn resolve_grpc(
        &mut self,
        base: &Path,
        extra: &[PathBuf],
        reflection: Option<Reflection>,
    ) -> Result<(), GrpcError> {
        let mut resolver = Resolver::default();
        resolver.reflection = reflection;
        for step in self.flows.iter_mut().flat_map(|f| f.steps.iter_mut()) {
            let Some(call) = &step.step.grpc else { continue };
            let mut protos: Vec<PathBuf> = call.protos.iter().map(|p| base.join(p)).collect();
            protos.extend(extra.iter().cloned());
            let method = resolver.resolve(protos, &call.service, &call.method)?;
            if let Some(bytes) = &step.cached {
                let body = bytes.windows(4).position(|w| w == b"\r\n\r\n").map_or(&[][..], |i| &bytes[i + 4..]);
                method.check(body)?;
            }
            step.grpc = Some(method);
        }
        Ok(())
    }

    /// A replay's plan: arrival n runs the flow the recording names for it
    /// (`flows`, by index, [`Work::pick`]) and takes row n of every feeder
    /// (a `once` feeder runs out after its rows), `values` among them: the
    /// recording's value columns as the feeder `replay` (`${replay.NAME}`).
    /// Nothing changes per request: the pick reads one slot of `flows`
    /// (stride 1) as it reads one of a weight cycle.
    pub fn replaying(mut self, flows: Arc<[u32]>, values: Option<Feeder>) -> Work {
        // `pick` reads slot 0 of a cycle of one without looking: a recording of one arrival is
        // written twice, so its flow is read.
        self.cycle = if flows.len() == 1 { Arc::from([flows[0], flows[0]]) } else { flows };
        self.stride = 1;
        self.feeders.extend(values);
        // Row n for arrival n: without a rank per arrival and feeder (8 bytes each).
        self.feeder_turns = vec![FeederTurns::default(); self.feeders.len()];
        self
    }

    /// Give each flow instance (an arrival, a closed-loop user's iteration)
    /// a cookie jar: what its answers set goes back on its later requests.
    pub fn with_cookies(mut self, on: bool) -> Work {
        self.cookies = on;
        self
    }

    /// Run the scenario's `scripts`: each step's functions found by name (a
    /// name the scripts do not define is an error that says which ones they
    /// do), a step with a request hook no longer cached (its requests are
    /// rendered and handed to the hook: a varying step), a step with a
    /// response hook captured.
    pub fn attach_scripts(&mut self, plan: ScriptPlan) -> Result<(), String> {
        let scripts = &plan.scripts;
        let find = |name: &Option<String>| -> Result<Option<Hook>, String> {
            let Some(name) = name else { return Ok(None) };
            scripts.hook(name).map(Some).ok_or_else(|| missing_function(scripts, name))
        };
        for step in self.flows.iter_mut().flat_map(|f| f.steps.iter_mut()) {
            let s = &step.step.script;
            if s.is_empty() {
                continue;
            }
            let hooks = StepHooks { call: find(&s.call)?, before: find(&s.before)?, after: find(&s.after)? };
            if hooks.before.is_some() {
                step.cached = None;
            }
            if hooks.after.is_some() {
                step.capture = true;
            }
            step.hooks = Some(hooks);
        }
        self.scripts = Some(Arc::new(plan));
        Ok(())
    }

    /// Follow up to `hops` redirects within the target (responses are then
    /// captured, to read `Location`).
    pub fn with_redirects(mut self, hops: u8) -> Work {
        self.redirects = hops;
        if hops > 0 {
            for step in self.flows.iter_mut().flat_map(|f| f.steps.iter_mut()) {
                step.capture = true;
            }
        }
        self
    }

    /// The request that follows a redirect response (`status`, `head`), if it
    /// is one and points within `target`: GET (HEAD stays HEAD), no body, as
    /// browsers do after 301/302/303. Elsewhere: `None`, the 3xx is the answer.
    pub(crate) fn redirect(&self, status: u16, head: &[u8], target: &Target, head_request: bool) -> Option<Vec<u8>> {
        if !matches!(status, 301 | 302 | 303 | 307 | 308) {
            return None;
        }
        let mut headers = [httparse::EMPTY_HEADER; crate::http1::MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        resp.parse(head).ok()?;
        let location = resp.headers.iter().find(|h| h.name.eq_ignore_ascii_case("location"))?;
        let location = std::str::from_utf8(location.value).ok()?.trim();
        let next = target.url.join(location).ok()?;
        let same_origin = next.scheme() == target.url.scheme()
            && next.host_str() == target.url.host_str()
            && next.port_or_known_default() == target.url.port_or_known_default();
        if !same_origin {
            return None;
        }
        let path = match next.query() {
            Some(q) => format!("{}?{q}", next.path()),
            None => next.path().to_string(),
        };
        let method = if head_request { "HEAD" } else { "GET" };
        Some(
            format!(
                "{method} {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: perfops/{}\r\n\r\n",
                self.authority,
                env!("CARGO_PKG_VERSION")
            )
            .into_bytes(),
        )
    }

    /// Which arrivals use feeder `name`: every arrival if a default header
    /// renders it, else those of the flows whose steps do.
    fn turns_of(&self, name: &str) -> FeederTurns {
        let reads = |t: &Template| t.vars().any(|v| matches!(v, VarRef::Feeder { feeder, .. } if feeder == name));
        let everyone = self.defaults.iter().any(|(_, t)| reads(t));
        let uses: Vec<bool> = self
            .flows
            .iter()
            .map(|f| everyone || f.steps.iter().any(|s| s.step.templates().into_iter().any(reads)))
            .collect();
        let n = self.cycle.len() as u64;
        let mut per_cycle = 0;
        let rank = (0..n)
            .map(|r| {
                uses[self.pick(r)].then(|| {
                    per_cycle += 1;
                    per_cycle as u32 - 1
                })
            })
            .collect();
        FeederTurns { per_cycle, rank }
    }

    /// The row number feeder `i` gives arrival `seq`: how many arrivals
    /// before it use that feeder, so that each of them takes the next row
    /// (`None`: its flow does not use the feeder). A pure function of `seq`,
    /// as the flow's pick is, so shards and workers share no counter and a
    /// `once` feeder's rows stay disjoint. The global `seq` itself gave a
    /// flow of weight 1 beside one of weight 9 every tenth row: with 5 rows,
    /// row 1 alone (review 2's tester, S1).
    pub fn feeder_seq(&self, i: usize, seq: u64) -> Option<u64> {
        let t = &self.feeder_turns[i];
        let n = t.rank.len() as u64;
        if n == 0 {
            return Some(seq);
        }
        let before = t.rank[(seq % n) as usize]?;
        Some(seq / n * t.per_cycle + u64::from(before))
    }

    /// The flow of arrival `seq`. Weights are honoured exactly over every
    /// cycle of `sum(weights)` arrivals, in a scattered order (a stride
    /// coprime with the cycle), so 1:1000 means one in each 1001.
    pub fn pick(&self, seq: u64) -> usize {
        let n = self.cycle.len() as u64;
        if n <= 1 {
            return 0;
        }
        self.cycle[(seq.wrapping_mul(self.stride) % n) as usize] as usize
    }

    /// The headers `step` sends: the defaults it does not set itself, then
    /// its own (for a WebSocket upgrade, which builds its request itself).
    pub(crate) fn headers_of<'a>(&'a self, step: &'a Step) -> impl Iterator<Item = &'a (String, Template)> {
        let has = |name: &str| step.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
        self.defaults.iter().filter(move |(n, _)| !has(n)).chain(step.headers.iter())
    }

    /// Render `step`'s request into `out` (`body` is scratch space).
    ///
    /// A missing value renders empty and is reported (the first one); a
    /// value holding CR, LF or NUL where it would go into the head stops
    /// rendering with [`RenderError::Unsafe`]: then `out` must not be sent.
    pub(crate) fn render(
        &self,
        step: &StepPlan,
        vars: &dyn Vars,
        rng: &mut fastrand::Rng,
        body: &mut Vec<u8>,
        out: &mut Vec<u8>,
    ) -> Result<(), RenderError> {
        let s = &step.step;
        let mut missing = Ok(());
        // A refused value stops rendering; the first missing one is kept and rendering goes on.
        let mut keep = |r: Result<(), RenderError>| -> Result<(), RenderError> {
            match r {
                Err(e) if e.refuses() => return Err(e),
                Err(m) if missing.is_ok() => missing = Err(m),
                _ => {}
            }
            Ok(())
        };
        body.clear();
        let content_type = match &s.body {
            Body::None => None,
            Body::Raw(t) => {
                keep(t.render(vars, rng, body).map_err(RenderError::from))?;
                None
            }
            Body::Json(parts) => {
                for p in parts {
                    match p {
                        JsonPart::Literal(l) => body.extend_from_slice(l.as_bytes()),
                        JsonPart::String(t) => {
                            keep(t.render_escaped(vars, rng, body, Escape::JsonString).map_err(RenderError::from))?;
                        }
                        JsonPart::Value(t) => keep(t.render_json_value(vars, rng, body))?,
                    }
                }
                Some("application/json")
            }
            Body::Form(fields) => {
                for (i, (name, t)) in fields.iter().enumerate() {
                    if i > 0 {
                        body.push(b'&');
                    }
                    keep(
                        Template::literal(name)
                            .render_escaped(vars, rng, body, Escape::Form)
                            .map_err(RenderError::from),
                    )?;
                    body.push(b'=');
                    keep(t.render_escaped(vars, rng, body, Escape::Form).map_err(RenderError::from))?;
                }
                Some("application/x-www-form-urlencoded")
            }
        };
        out.clear();
        out.extend_from_slice(s.method.as_bytes());
        out.push(b' ');
        keep(s.path.render_head(vars, rng, out, HeadPlace::Target))?;
        out.extend_from_slice(b" HTTP/1.1\r\n");
        let has = |name: &str| s.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
        let defaults_have = |name: &str| self.defaults.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
        if !has("host") && !defaults_have("host") {
            out.extend_from_slice(b"Host: ");
            out.extend_from_slice(self.authority.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        if !has("user-agent") && !defaults_have("user-agent") {
            out.extend_from_slice(concat!("User-Agent: perfops/", env!("CARGO_PKG_VERSION"), "\r\n").as_bytes());
        }
        for (name, value) in self.defaults.iter().filter(|(n, _)| !has(n)).chain(s.headers.iter()) {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            keep(value.render_head(vars, rng, out, HeadPlace::HeaderValue))?;
            out.extend_from_slice(b"\r\n");
        }
        if let Some(ct) = content_type
            && !has("content-type")
            && !defaults_have("content-type")
        {
            out.extend_from_slice(b"Content-Type: ");
            out.extend_from_slice(ct.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        let wants_length = !body.is_empty() || matches!(s.method.as_str(), "POST" | "PUT" | "PATCH");
        if wants_length && !has("content-length") {
            out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(body);
        missing
    }
}

/// "no function `sgin` in auth.js; did you mean `sign`?": what is said of a
/// name the scripts do not define.
pub fn missing_function(scripts: &Scripts, name: &str) -> String {
    let files: Vec<&str> = scripts
        .files()
        .map(|(f, _)| f)
        .filter(|f| !f.ends_with(perfops_core::scenario::script::INLINE_FILE_SUFFIX))
        .collect();
    // Inline code's functions are nobody's to name.
    let functions: Vec<&str> = scripts
        .functions()
        .iter()
        .map(String::as_str)
        .filter(|f| !f.starts_with(perfops_core::scenario::script::INLINE_PREFIX))
        .collect();
    let hint = match perfops_core::scenario::diag::did_you_mean(name, &functions) {
        Some(d) => format!("; did you mean `{d}`?"),
        None if functions.is_empty() => "; they define no function".to_string(),
        None => format!("; they define {}", functions.join(", ")),
    };
    format!("no function `{name}` in {}{hint}", files.join(", "))
}

/// A header given as `Name: value` (`quick -H`): the name must be a token
/// and the value hold no CR, LF or NUL, or the request could carry a header
/// (or a request) of its own.
pub fn parse_header(h: &str) -> Result<(String, Template), TargetError> {
    let bad = || TargetError::BadHeader(h.escape_debug().to_string());
    let (name, value) = h.split_once(':').ok_or_else(bad)?;
    let (name, value) = (name.trim(), value.trim());
    // The whole text: a trailing CR/LF, trimmed off, still says it was not meant.
    if !is_token(name.as_bytes()) || first_refused(h.as_bytes()).is_some() {
        return Err(bad());
    }
    Ok((name.to_string(), Template::literal(value)))
}

/// Check a gRPC `step` as [`Work::resolve_grpc`] would (its `.proto` files
/// relative to `base`, the method, a literal message), without a plan:
/// `check` says what `run` would refuse.
///
/// A step without `.proto` files takes its descriptors from the server's
/// reflection when it runs: `check` does not contact the server, so it has
/// nothing to check there.
pub fn check_grpc(base: &Path, step: &Step) -> Result<(), GrpcError> {
    let Some(call) = &step.grpc else { return Ok(()) };
    if call.protos.is_empty() {
        return Ok(());
    }
    let protos: Vec<PathBuf> = call.protos.iter().map(|p| base.join(p)).collect();
    let method = Resolver::default().resolve(protos, &call.service, &call.method)?;
    if let Body::Json(parts) = &step.body
        && let [JsonPart::Literal(json)] = parts.as_slice()
    {
        method.check(json.as_bytes())?;
    }
    Ok(())
}

/// A stride near 7919 that visits every slot of a cycle of `n` (coprime with `n`).
fn coprime_stride(n: u64) -> u64 {
    if n <= 1 {
        return 1;
    }
    let mut stride = 7919 % n;
    while stride == 0 || gcd(stride, n) != 1 {
        stride += 1;
    }
    stride
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target::parse("http://127.0.0.1:8080/orders?page=2").unwrap()
    }

    #[test]
    fn quick_requests_are_rendered_once_in_one_buffer() {
        let w = Work::single(&target(), "POST", &["Authorization: Bearer x".into()], b"{}").unwrap();
        let step = &w.flows[0].steps[0];
        let bytes = String::from_utf8(step.cached.clone().expect("a literal step is cached")).unwrap();
        assert!(bytes.starts_with("POST /orders?page=2 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"), "{bytes}");
        assert!(bytes.contains("Authorization: Bearer x\r\n"));
        assert!(bytes.ends_with("Content-Length: 2\r\n\r\n{}"), "{bytes}");
        assert!(Work::single(&target(), "GET", &["X: a\r\nEvil: 1".into()], b"").is_err());
        assert!(Work::single(&target(), "GET", &["no colon".into()], b"").is_err());
        let custom_host = Work::single(&target(), "GET", &["host: example".into()], b"").unwrap();
        let bytes = custom_host.flows[0].steps[0].cached.clone().unwrap();
        assert_eq!(String::from_utf8_lossy(&bytes).matches("ost:").count(), 1, "a given Host replaces ours");
    }

    /// #31: `quick -H` (and gRPC metadata from it): a name must be a token,
    /// and the text hold no CR, LF or NUL.
    #[test]
    fn quick_headers_are_tokens_without_crlf() {
        // (header as given, accepted)
        let cases = [
            ("Authorization: Bearer x", true), // the ordinary case
            ("  X-Id :  42 ", true),           // blanks around name and value are trimmed
            ("X-A: a b \"c\"", true),          // spaces and quotes in a value are the header's business
            ("X-A: a\r\nEvil: 1", false),      // the smuggle
            ("X-A: a\0b", false),              // NUL
            ("X-A: v\n", false),               // a trailing LF, though trimmed, was not meant
            ("X Evil: 1", false),              // a space in the name: it went out as `X Evil: 1`
            ("X-\u{e9}: 1", false),            // non-ASCII in the name
            (": v", false),                    // no name
            ("no colon", false),               // no value
        ];
        for (header, ok) in cases {
            assert_eq!(parse_header(header).is_ok(), ok, "{header:?}");
            assert_eq!(Work::single(&target(), "GET", &[header.to_string()], b"").is_ok(), ok, "{header:?}");
        }
        let err = parse_header("X-A: a\r\nb").unwrap_err().to_string();
        // Printed without a line break, and without the value: it may be a secret (#31, redaction).
        assert!(!err.contains(['\r', '\n']) && err.contains("X-A: <redacted>"), "{err}");
    }

    /// #31: a templated step's values go into the head through the head's
    /// rules: a saved value with CR/LF refuses the request, a space in the
    /// path is percent-encoded; a literal step with CR/LF (built in code:
    /// `check` refuses it in a file) is not cached, so each request renders
    /// and is refused.
    #[test]
    fn head_values_with_crlf_refuse_the_request_and_paths_are_encoded() {
        let mut step = Work::single(&target(), "GET", &[], b"").unwrap().flows[0].steps[0].step.clone();
        step.path = Template::parse("/s?q=${q}", &[]).unwrap();
        step.headers = vec![("Authorization".into(), Template::parse("Bearer ${token}", &[]).unwrap())];
        let w = Work::new(&target(), vec![("f".into(), 1, vec![step])], Vec::new(), HashMap::new(), Vec::new());
        let plan = &w.flows[0].steps[0];
        assert!(plan.cached.is_none(), "templated");
        let render = |saved: &[(&str, &str)]| {
            let saved: HashMap<String, String> = saved.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
            let (mut body, mut out) = (Vec::new(), Vec::new());
            let r =
                w.render(plan, &w.vars(Some(&saved), 1, &[]), &mut fastrand::Rng::with_seed(1), &mut body, &mut out);
            (r, String::from_utf8_lossy(&out).into_owned())
        };
        // (saved values, refused, the request line when sent)
        type Case<'a> = (&'a [(&'a str, &'a str)], bool, &'a str);
        let cases: &[Case<'_>] = &[
            // Clean values: sent, the space in the query encoded.
            (&[("q", "two words"), ("token", "abc")], false, "GET /s?q=two%20words HTTP/1.1\r\n"),
            // The token of #31 in the header: refused.
            (&[("q", "x"), ("token", "abc\r\nX-Evil: 1\r\n\r\nGET /other HTTP/1.1")], true, ""),
            // A bare LF in the query: refused.
            (&[("q", "x\ny"), ("token", "abc")], true, ""),
        ];
        for (saved, refused, line) in cases {
            let (r, out) = render(saved);
            assert_eq!(matches!(r, Err(RenderError::Unsafe(_))), *refused, "{saved:?}: {r:?}");
            if !refused {
                assert!(out.starts_with(line), "{out}");
                assert!(out.contains("Authorization: Bearer abc\r\n"), "{out}");
            }
        }

        let mut literal = Work::single(&target(), "GET", &[], b"").unwrap().flows[0].steps[0].step.clone();
        literal.headers = vec![("X-A".into(), Template::literal("a\r\nX-Evil: 1"))];
        let w = Work::new(&target(), vec![("f".into(), 1, vec![literal])], Vec::new(), HashMap::new(), Vec::new());
        assert!(w.flows[0].steps[0].cached.is_none(), "a literal that would smuggle is not cached");
        let (mut body, mut out) = (Vec::new(), Vec::new());
        let saved = HashMap::new();
        let r = w.render(
            &w.flows[0].steps[0],
            &w.vars(Some(&saved), 1, &[]),
            &mut fastrand::Rng::with_seed(1),
            &mut body,
            &mut out,
        );
        assert!(matches!(r, Err(RenderError::Unsafe(_))), "{r:?}");
    }

    /// What `${name}` renders for one flow instance: its own saved value,
    /// else setup's (the globals), else nothing; setup's values are never
    /// written by a flow's.
    #[test]
    fn a_flow_instance_reads_its_own_saved_values_before_setups() {
        let mut step = Work::single(&target(), "GET", &[], b"").unwrap().flows[0].steps[0].step.clone();
        step.path = Template::parse("/carts/${cart_id}?t=${token}", &[]).unwrap();
        let mut w = Work::new(&target(), vec![("f".into(), 1, vec![step])], Vec::new(), HashMap::new(), Vec::new());
        w.globals = [("token", "setup"), ("cart_id", "global-cart")].map(|(k, v)| (k.into(), v.into())).into();
        let plan = &w.flows[0].steps[0];
        // (the instance's saved values, `None`: it saved nothing; the request line)
        type Case<'a> = (Option<&'a [(&'a str, &'a str)]>, &'a str);
        let cases: &[Case<'_>] = &[
            // Nothing saved (no scope allocated): setup's values.
            (None, "GET /carts/global-cart?t=setup "),
            // Its own cart: shadows setup's, setup's token still read.
            (Some(&[("cart_id", "c7")]), "GET /carts/c7?t=setup "),
            // A token of its own (a flow that logged in again): its own.
            (Some(&[("cart_id", "c7"), ("token", "mine")]), "GET /carts/c7?t=mine "),
            // Saved something else: every name read from setup.
            (Some(&[("other", "x")]), "GET /carts/global-cart?t=setup "),
        ];
        for (saved, line) in cases {
            let saved: Option<HashMap<String, String>> =
                saved.map(|s| s.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect());
            let (mut body, mut out) = (Vec::new(), Vec::new());
            let av = w.vars(saved.as_ref(), 1, &[]);
            w.render(plan, &av, &mut fastrand::Rng::with_seed(1), &mut body, &mut out).unwrap();
            assert!(String::from_utf8_lossy(&out).starts_with(line), "{saved:?}: {}", String::from_utf8_lossy(&out));
        }
        assert_eq!(w.globals["cart_id"], "global-cart");
    }

    /// `Work::secrets` sees a credential-like value the instance saved and
    /// setup's, and nothing another instance saved.
    #[test]
    fn secrets_come_from_the_instance_and_setup() {
        let mut w = Work::single(&target(), "GET", &[], b"").unwrap();
        w.globals = [("token", "setup-secret")].map(|(k, v)| (k.into(), v.into())).into();
        let mine: HashMap<String, String> =
            [("session_id", "my-session"), ("cart_id", "c7")].map(|(k, v)| (k.into(), v.into())).into();
        let s = w.secrets(Some(&mine), None);
        assert!(s.contains(&"setup-secret".to_string()) && s.contains(&"my-session".to_string()), "{s:?}");
        assert!(!s.contains(&"c7".to_string()), "a cart id is no secret: {s:?}");
        assert_eq!(w.secrets(None, None), vec!["setup-secret".to_string()]);
    }

    /// A secret is known in every form it is sent in (a space in an env
    /// value went into a request line as `%20`, unredacted); a saved value
    /// that goes into a header that is not harmless is one, whatever its
    /// name; a literal `Basic` header's `user:password` is one.
    #[test]
    fn secrets_are_known_in_their_sent_forms() {
        let headers = ["Authorization: Basic dXNlcjpodW50ZXIy".to_string()];
        let mut w = Work::single(&target(), "GET", &headers, b"").unwrap();
        w.defaults.push(("X-Saved".into(), Template::parse("${t}", &[]).unwrap()));
        w.env = [("SECRET".to_string(), "Sup3r s3cret".to_string())].into();
        let mine: HashMap<String, String> =
            [("t", "SAVEDTOK_9f8e7d"), ("cart_id", "c7")].map(|(k, v)| (k.into(), v.into())).into();
        let s = w.secrets(Some(&mine), None);
        for want in ["Sup3r s3cret", "Sup3r%20s3cret", "Sup3r+s3cret", "user:hunter2", "SAVEDTOK_9f8e7d"] {
            assert!(s.contains(&want.to_string()), "{want}: {s:?}");
        }
        assert!(!s.contains(&"c7".to_string()), "a cart id in no header is no secret: {s:?}");
    }

    #[test]
    fn redirects_stay_within_the_target() {
        let w = Work::single(&target(), "POST", &[], b"x").unwrap().with_redirects(2);
        assert!(w.flows[0].steps[0].capture, "Location must be read");
        let head =
            |loc: &str| format!("HTTP/1.1 302 Found\r\nLocation: {loc}\r\nContent-Length: 0\r\n\r\n").into_bytes();
        let next = w.redirect(302, &head("/next?x=1"), &target(), false).unwrap();
        assert!(String::from_utf8(next).unwrap().starts_with("GET /next?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"));
        assert!(w.redirect(301, &head("http://127.0.0.1:8080/abs"), &target(), false).is_some());
        assert!(
            w.redirect(302, &head("http://elsewhere.example/"), &target(), false).is_none(),
            "other origins are not followed"
        );
        assert!(w.redirect(200, &head("/next"), &target(), false).is_none());
        assert!(w.redirect(302, b"HTTP/1.1 302 Found\r\n\r\n", &target(), false).is_none(), "no Location");
    }

    #[test]
    fn weights_are_exact_over_each_cycle() {
        let step = Work::single(&target(), "GET", &[], b"").unwrap().flows[0].steps[0].step.clone();
        let flows = vec![("login".into(), 1, vec![step.clone()]), ("orders".into(), 1000, vec![step])];
        let w = Work::new(&target(), flows, Vec::new(), HashMap::new(), Vec::new());
        let logins = (0..1001 * 7).filter(|&seq| w.pick(seq) == 0).count();
        assert_eq!(logins, 7, "one login in every 1001 arrivals");
        // ... and not all at the start of the cycle
        let first: Vec<u64> = (0..1001).filter(|&s| w.pick(s) == 0).collect();
        assert_eq!(first.len(), 1);
    }

    /// A replay: arrival n runs its recorded flow, not one by weight, and takes row n of every
    /// feeder, the recording's values (`replay`) among them.
    #[test]
    fn a_replay_runs_each_arrival_s_recorded_flow_and_row() {
        use perfops_core::scenario::feeder::FeedMode;
        let step = Work::single(&target(), "GET", &[], b"").unwrap().flows[0].steps[0].step.clone();
        let flows = || vec![("login".into(), 1, vec![step.clone()]), ("orders".into(), 1000, vec![step.clone()])];
        let users = Feeder::from_csv("users", "email\nu0\nu1\nu2\n", FeedMode::Cycle).unwrap();
        let values =
            Feeder::of_rows("replay", vec!["id".into()], vec![vec!["7".into()], vec!["8".into()]], FeedMode::Cycle);
        // (recorded flows, each arrival's flow)
        let cases: [(&[u32], &[usize]); 3] = [
            // Three logins in a row, then an order: the weights (1:1000) have no say.
            (&[0, 0, 0, 1], &[0, 0, 0, 1]),
            // One arrival, of the second flow: read, not taken for the cycle of one's slot 0.
            (&[1], &[1]),
            // Orders only.
            (&[1, 1], &[1, 1]),
        ];
        for (i, (recorded, want)) in cases.into_iter().enumerate() {
            let w = Work::new(&target(), flows(), Vec::new(), HashMap::new(), vec![users.clone()])
                .replaying(Arc::from(recorded), values.clone());
            let got: Vec<usize> = (0..want.len() as u64).map(|n| w.pick(n)).collect();
            assert_eq!(got, want, "case {i}");
            // Row n of every feeder, whichever flow reads it.
            assert!((0..4).all(|n| w.feeder_seq(0, n) == Some(n) && w.feeder_seq(1, n) == Some(n)), "case {i}");
            assert_eq!(w.feeders[1].name(), "replay");
        }
    }

    /// Each arrival that uses a feeder takes its next row, whichever flows
    /// use it (review 2's tester, S1: a login flow of weight 1 beside orders
    /// of weight 9 took row `seq mod 5`, always row 0, of a 5-row file).
    #[test]
    fn the_arrivals_that_use_a_feeder_take_its_rows_in_turn() {
        use perfops_core::scenario::feeder::FeedMode;
        let plain = Work::single(&target(), "GET", &[], b"").unwrap().flows[0].steps[0].step.clone();
        let mut login = plain.clone();
        login.path = Template::parse("/login?u=${users.email}", &["users"]).unwrap();
        let users = |mode| Feeder::from_csv("users", "email\nu1\nu2\nu3\nu4\nu5\n", mode).unwrap();
        let flows =
            |a: &Step, b: &Step| vec![("login".into(), 1, vec![a.clone()]), ("orders".into(), 9, vec![b.clone()])];
        let w = Work::new(&target(), flows(&login, &plain), Vec::new(), HashMap::new(), vec![users(FeedMode::Cycle)]);
        let logins: Vec<u64> = (0..100).filter(|&s| w.pick(s) == 0).collect();
        let turns: Vec<Option<u64>> = logins.iter().map(|&s| w.feeder_seq(0, s)).collect();
        assert_eq!(turns, (0..10).map(Some).collect::<Vec<_>>(), "the logins take turns 0, 1, 2, ...");
        assert!((0..100).filter(|&s| w.pick(s) == 1).all(|s| w.feeder_seq(0, s).is_none()), "orders use no row");
        // Both flows read it: every arrival takes a turn, in seq order.
        let w = Work::new(&target(), flows(&login, &login), Vec::new(), HashMap::new(), vec![users(FeedMode::Once)]);
        assert!((0..30).all(|s| w.feeder_seq(0, s) == Some(s)));
        // A default header that reads it: every flow uses it.
        let header = vec![("X-User".to_string(), Template::parse("${users.email}", &["users"]).unwrap())];
        let w = Work::new(&target(), flows(&plain, &plain), header, HashMap::new(), vec![users(FeedMode::Cycle)]);
        assert!((0..30).all(|s| w.feeder_seq(0, s) == Some(s)));
    }
}
