//! A worker's scripts: the one JavaScript runtime it owns (built from the
//! plan's compiled files when the worker starts, whatever its users or
//! arrivals), a flow instance's state ([`Flow`], one per arrival or
//! closed-loop iteration, never shared), and the three places a step calls
//! into them: a request hook on the rendered request just before it is sent
//! ([`Worker::before_hook`]), a response hook after the step's own checks
//! ([`Worker::after_hook`]) and a `script:` step ([`Worker::script_step`]).
//!
//! A scenario without scripts pays nothing here: the worker has no runtime,
//! an arrival no [`Flow`], a step no hooks, and the hot path's one test is
//! whether the step's `hooks` is `Some` (a literal step is never hooked:
//! [`crate::work::Work::attach_scripts`] uncaches a step with a request hook).
//!
//! Each call's time in JS is counted as the step's `script_ns` (the CPU
//! share spent in scripts, summed per second like every counter); a call
//! that fails (an exception, its time limit, memory) is `script_error` with
//! the script's file:line:column in the failure's sample; a response hook
//! that says no is `script_failed` with its reason.
//!
//! What a flow saves: its scripts' `vars` and its steps' `save:` go into the
//! flow instance's scope (`scope.rs`), the same one a flow without scripts
//! saves into, over setup's values; another flow instance does not see
//! them. [`Flow`]'s state holds a copy for the scripts, started from the
//! scope and setup's values, kept in step with the scope after each step
//! ([`Worker::saved_into`]) and each call ([`Worker::saved_back`]).

use std::cell::RefCell;
use std::time::SystemTime;

use perfops_core::measure::FailureKind;
use perfops_core::scenario::script::OnScriptError;
use perfops_script::{Clock, FlowState, Hook, Next, ResponseView, Runtime, ScriptError, stream_seed};
use tokio::time::Instant;

use super::sample::Sent;
use super::scope::Scope;
use super::{Ended, Request, Worker};
use crate::record::Key;
use crate::work::{FlowPlan, ScriptPlan, StepPlan};

/// The seed of every run's scripts' random streams, as the worker's own
/// generator's (`0x5eed`): each worker of each shard draws its own stream.
const RUN_SEED: u64 = 0x5eed;

/// How many steps one flow instance may take: a script that sends a flow
/// back to an earlier step forever would hold its worker (a `script:` step
/// never waits), so past this the flow ends as a script error.
pub(super) const MAX_STEPS: u32 = 10_000;

/// A flow instance's part in scripts: its state (saved values, arrival,
/// rows) and where its last `script:` step sends it.
#[derive(Debug, Default)]
pub(crate) struct Flow {
    pub(crate) state: FlowState,
    /// Set by a `script:` step, taken by the arrival's loop.
    pub(crate) next: Option<Next>,
    /// The last step failed in a script (its kind is `script_error`): with
    /// `on_error: continue` the flow goes on.
    pub(crate) script_error: bool,
    /// The key of the last request step it took: its iteration is counted
    /// there when it ends (`arrival.rs`).
    pub(crate) last_request: Option<Key>,
}

/// A response as a hook reads it: status, header fields, body.
pub(super) type Answer<'a> = (u16, &'a [(&'a str, &'a [u8])], &'a [u8]);

/// A worker's runtime, or why it could not be built (then every call fails with it).
pub(crate) type Scripted = RefCell<Result<Runtime, ScriptError>>;

/// The runtime of worker `id` of `shard` (index) for `plan`.
pub(crate) fn runtime(plan: &ScriptPlan, shard: u32, id: usize) -> Scripted {
    let clock = Clock::run(SystemTime::now(), std::time::Instant::now());
    let seed = stream_seed(RUN_SEED, shard, u32::try_from(id).unwrap_or(u32::MAX));
    RefCell::new(Runtime::new(&plan.scripts, plan.limits, seed, clock))
}

impl Worker {
    /// A flow instance's state for arrival `seq` with its feeders' `rows`:
    /// `None` without scripts. Starts with the instance's `scope`: its own
    /// saved values over setup's.
    pub(super) fn flow(&self, seq: u64, rows: &[Option<&[String]>], scope: &Scope) -> Option<RefCell<Flow>> {
        self.script.as_ref()?;
        let work = &*self.shared.work;
        let mut vars: std::collections::BTreeMap<String, String> =
            work.globals.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        if let Some(saved) = scope.saved().as_ref() {
            vars.extend(saved.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        let rows = work
            .feeders
            .iter()
            .zip(rows)
            .filter_map(|(f, row)| {
                let row = (*row)?;
                let columns = f.columns().iter().cloned().zip(row.iter().cloned()).collect();
                Some((f.name().to_string(), columns))
            })
            .collect();
        Some(RefCell::new(Flow {
            state: FlowState { vars, arrival: seq, rows },
            next: None,
            script_error: false,
            last_request: None,
        }))
    }

    /// One call into the runtime under `key`: its time counted as the
    /// step's `script_ns`. `Err`: the call failed, said on one line.
    fn call<T>(&self, key: Key, f: impl FnOnce(&mut Runtime) -> Result<T, ScriptError>) -> Result<T, String> {
        let Some(cell) = &self.script else { return Err("the scenario has no scripts".into()) };
        let mut rt = cell.borrow_mut();
        let rt = match rt.as_mut() {
            Ok(rt) => rt,
            Err(e) => return Err(format!("the script runtime could not be built: {e}")),
        };
        let out = f(rt);
        let spent = rt.take_spent();
        self.rec.borrow_mut().scripted(key, spent);
        out.map_err(|e| e.to_string())
    }

    /// The request hook `hook` of `req` on its rendered `bytes`, rewritten
    /// with what the hook returned. `Err`: why nothing may be sent (a
    /// script error, or a request the hook made that cannot be sent).
    pub(super) fn before_hook(&self, req: &Request<'_>, hook: Hook, bytes: &mut Vec<u8>) -> Result<(), String> {
        let Some(flow) = req.flow else { return Err("a request hook outside a flow".into()) };
        let mut parts = crate::hook::parts(bytes).ok_or("the rendered request could not be read back")?;
        let mut f = flow.borrow_mut();
        let called = self.call(req.key, |rt| rt.before_request(hook, &mut f.state, &mut parts));
        drop(f);
        self.saved_back(flow, req.scope);
        called?;
        crate::hook::write(&parts, bytes)
    }

    /// The response hook of `step` on a response: `Ok` passes; `Err` is the
    /// failure's kind (`script_failed`, the hook's reason; `script_error`,
    /// the call's error) and why.
    pub(super) fn after_hook(
        &self,
        step: &StepPlan,
        flow: Option<&RefCell<Flow>>,
        key: Key,
        response: Answer<'_>,
    ) -> Result<(), (FailureKind, String)> {
        let Some(hook) = step.hooks.and_then(|h| h.after) else { return Ok(()) };
        let script_error = |why: String| (FailureKind::ScriptError, why);
        let Some(flow) = flow else { return Err(script_error("a response hook outside a flow".into())) };
        let (status, pairs, body) = response;
        // Header values that are not UTF-8 reach the hook with U+FFFD, as a body's do.
        let text: Vec<(&str, std::borrow::Cow<'_, str>)> =
            pairs.iter().map(|(n, v)| (*n, String::from_utf8_lossy(v))).collect();
        let headers: Vec<(&str, &str)> = text.iter().map(|(n, v)| (*n, v.as_ref())).collect();
        let view = ResponseView { status, headers: &headers, body };
        let mut f = flow.borrow_mut();
        let verdict = self.call(key, |rt| rt.after_response(hook, &mut f.state, view));
        match verdict {
            Ok(v) if v.ok => Ok(()),
            Ok(v) => {
                let name = self.script_name(hook);
                let why = v.reason.map_or_else(|| format!("{name} failed the response"), |r| format!("{name}: {r}"));
                Err((FailureKind::ScriptFailed, why))
            }
            Err(why) => {
                f.script_error = true;
                Err(script_error(why))
            }
        }
    }

    /// A `script:` step: its function called on the flow's state; where the
    /// flow goes next is left in the flow. A failed call is counted under the
    /// step as `script_error` (no latency: nothing was sent, no one waited
    /// on the server) with its message in the sample.
    pub(super) fn script_step(&self, req: Request<'_>) -> Ended {
        let Some(hook) = req.step.hooks.and_then(|h| h.call) else {
            return self.script_failure(&req, "the step's function was not found".into());
        };
        let Some(flow) = req.flow else { return self.script_failure(&req, "a script step outside a flow".into()) };
        let outcome = {
            let mut f = flow.borrow_mut();
            self.call(req.key, |rt| rt.step(hook, &mut f.state))
        };
        self.saved_back(flow, req.scope);
        match outcome {
            Ok(o) => {
                flow.borrow_mut().next = Some(o.next);
                Ended { at: Instant::now(), failed: false }
            }
            Err(why) => {
                flow.borrow_mut().script_error = true;
                self.script_failure(&req, why)
            }
        }
    }

    /// `req`'s step failed in a script before anything was sent: counted as
    /// `script_error` with `why` as its sample's reason.
    pub(super) fn script_failure(&self, req: &Request<'_>, why: String) -> Ended {
        if let Some(flow) = req.flow {
            flow.borrow_mut().script_error = true;
        }
        let at = Instant::now();
        let kind = FailureKind::ScriptError;
        if req.step.hooks.is_some_and(|h| h.call.is_some()) {
            self.rec.borrow_mut().closed(req.key, kind);
            self.sample(req.step, kind, at, Some(why), None, Sent::of(req, None, None));
            return Ended { at, failed: true };
        }
        // A request step whose request hook failed: counted as a request refused before it was
        // sent, as an unsafe value is, so the error rate shows it.
        self.rec.borrow_mut().sent(req.key);
        let failure =
            crate::record::Failure { due: req.due, start: req.start, sent: None, at, kind, bytes_out: 0, bytes_in: 0 };
        self.rec.borrow_mut().failed(req.key, &failure);
        self.sample(req.step, kind, at, Some(why), None, Sent::of(req, None, None));
        Ended { at, failed: true }
    }

    /// The name of `hook`, as errors say it.
    fn script_name(&self, hook: Hook) -> String {
        match self.shared.work.scripts.as_deref() {
            Some(plan) => plan.scripts.name(hook).to_string(),
            None => "?".into(),
        }
    }

    /// After `step` (its `key`) of a scripted `flow` instance `f`: whether the
    /// flow goes on, with `i` the index of the step it goes to (the next,
    /// or the one a `script:` step named). A failed step ends it, but one
    /// that failed in a script goes on with `on_error: continue`; past
    /// [`MAX_STEPS`] steps (`taken`) it ends as a script error.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn next_step(
        &self,
        f: &RefCell<Flow>,
        scope: &Scope,
        flow: &FlowPlan,
        step: &StepPlan,
        key: Key,
        i: &mut usize,
        taken: &mut u32,
        failed: bool,
    ) -> bool {
        self.saved_into(f, step, scope);
        let (next, script_error) = {
            let mut f = f.borrow_mut();
            (f.next.take(), std::mem::take(&mut f.script_error))
        };
        let on_error = self.shared.work.scripts.as_deref().map_or(OnScriptError::EndFlow, |p| p.on_error);
        if failed && !(script_error && on_error == OnScriptError::Continue) {
            return false;
        }
        *taken += 1;
        let stop = |why: String| {
            self.rec.borrow_mut().closed(key, FailureKind::ScriptError);
            self.sample(
                step,
                FailureKind::ScriptError,
                Instant::now(),
                Some(why),
                None,
                Sent {
                    wire: None,
                    due: crate::record::Due::OnSend,
                    start: Instant::now(),
                    sent: None,
                    jar: None,
                    scope,
                    cookie: false,
                },
            );
            false
        };
        if *taken >= MAX_STEPS {
            return stop(format!("flow `{}` took {MAX_STEPS} steps: its scripts send it round without end", flow.name));
        }
        match next {
            None | Some(Next::Continue) => true,
            Some(Next::End) => false,
            Some(Next::Goto(name)) => match flow.steps.iter().position(|s| s.step.name == name) {
                Some(j) => {
                    *i = j;
                    true
                }
                None => {
                    let names: Vec<&str> = flow.steps.iter().map(|s| s.step.name.as_str()).collect();
                    stop(format!(
                        "{} sent the flow to step `{}`, and flow `{}` has none: its steps are {}",
                        step.step.name,
                        name.escape_debug(),
                        flow.name,
                        names.join(", ")
                    ))
                }
            },
        }
    }

    /// After a step of a scripted flow: what its YAML `save:` saved into
    /// the instance's `scope` goes into the flow's state too, so that its
    /// later scripts read the newest (a re-login's token).
    pub(super) fn saved_into(&self, flow: &RefCell<Flow>, step: &StepPlan, scope: &Scope) {
        let globals = &self.shared.work.globals;
        let mut f = flow.borrow_mut();
        for (name, _) in &step.step.save {
            if let Some(v) = scope.get(name, globals) {
                f.state.vars.insert(name.clone(), v);
            }
        }
    }

    /// After a call into the scripts: what they saved (a value of the
    /// flow's state that the instance's `scope` does not read the same) goes
    /// into the scope, so that templates, `Work::secrets` and `--debug` see
    /// it as they see a YAML `save:`. A flow whose scripts saved nothing
    /// writes nothing (its state was started from the scope). A name the
    /// scripts removed (`delete vars.x`) leaves the scope too, as it did
    /// the flow's state (setup's value, if any, is read again).
    pub(super) fn saved_back(&self, flow: &RefCell<Flow>, scope: &Scope) {
        let globals = &self.shared.work.globals;
        let f = flow.borrow();
        scope.retain(|name| f.state.vars.contains_key(name));
        for (name, value) in &f.state.vars {
            let same = {
                let saved = scope.saved();
                saved.as_ref().and_then(|m| m.get(name)).or_else(|| globals.get(name)) == Some(value)
            };
            if !same {
                scope.save(name, value.clone());
            }
        }
    }
}
