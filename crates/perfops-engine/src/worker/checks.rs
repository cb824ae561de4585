//! What a response counts as for its step, whatever the protocol: its
//! status (none for one the step's `expect.status` lists: a 404 the
//! scenario asks for is its answer), then the step's `expect` and `save` on
//! its header fields and body; what is saved goes into the flow instance's
//! scope (`scope.rs`) for its steps after it. Not here: gRPC's status (`http2.rs`),
//! a WebSocket reply's checks (`websocket.rs`).

use perfops_core::measure::FailureKind;
use perfops_core::scenario::extract::{Extractor, ParsedBody};

use super::scope::Scope;
use super::{Request, Worker};
use crate::work::StepPlan;

/// What a streamed answer's events give its step's `save`s that read them
/// (`first_event`, `last_event`, `event:$.id`): the stream's consumer
/// (`http1.rs`'s `Streaming`) keeps what they need as the events come.
pub(super) trait EventValues {
    /// The value of `x`, the step's `at`-th `save`, if the events had one.
    fn value(&self, at: usize, x: &Extractor) -> Option<String>;
}

impl Worker {
    /// Run the step's `expect` and `save` on a response's header fields
    /// (`pairs`) and body, saving into the flow instance's `scope`; a save
    /// from a streamed answer's events reads `events`. `Err`: why it failed, as the checks say it
    /// (`status: expected 201, found 422`, `save id: $.id matched nothing`),
    /// made only for a response that failed (#32).
    pub(super) fn check_and_save(
        &self,
        step: &StepPlan,
        scope: &Scope,
        status: u16,
        pairs: &[(&str, &[u8])],
        body: &[u8],
        events: Option<&dyn EventValues>,
    ) -> Result<(), String> {
        let body = ParsedBody::new(body);
        if let Some(expect) = &step.step.expect
            && let Some(why) = expect.check_from(status, pairs, &body)
        {
            return Err(why);
        }
        let mut missed = None;
        for (at, (name, extractor)) in step.step.save.iter().enumerate() {
            let value = match extractor.event_pick() {
                None => extractor.extract_from(pairs, &body),
                Some(_) => events.and_then(|e| e.value(at, extractor)),
            };
            match value {
                Some(v) => {
                    scope.save(name, v);
                }
                None => {
                    if missed.is_none() {
                        missed = Some(extractor.missed(name, &body));
                    }
                }
            }
        }
        missed.map_or(Ok(()), Err)
    }

    /// [`Worker::check_and_save`] for an HTTP request `req`, then its step's
    /// response hook if it has one (`scripted.rs`). `Err`: the failure's
    /// kind (`check_failed`, or a script's) and why.
    pub(super) fn check_response(
        &self,
        req: &Request<'_>,
        status: u16,
        pairs: &[(&str, &[u8])],
        body: &[u8],
        events: Option<&dyn EventValues>,
    ) -> Result<(), (FailureKind, String)> {
        let step = req.step;
        self.check_and_save(step, req.scope, status, pairs, body, events)
            .map_err(|why| (FailureKind::CheckFailed, why))?;
        if step.hooks.is_none() {
            return Ok(());
        }
        // What the YAML saved, the hook reads.
        if let Some(f) = req.flow {
            self.saved_into(f, step, req.scope);
        }
        let verdict = self.after_hook(step, req.flow, req.key, (status, pairs, body));
        // What the hook saved, the flow's later templates read.
        if let Some(f) = req.flow {
            self.saved_back(f, req.scope);
        }
        verdict
    }
}

/// The failure a response's status counts as: none for a status the step's
/// `expect.status` lists (a 404 the scenario asks for is its answer), else
/// `http_4xx`/`http_5xx` for those.
pub(super) fn status_failure(step: &StepPlan, status: u16) -> Option<FailureKind> {
    if step.step.expect.as_ref().is_some_and(|e| e.lists_status(status)) {
        None
    } else {
        FailureKind::of_status(status)
    }
}
