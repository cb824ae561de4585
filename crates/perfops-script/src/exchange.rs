//! What passes between the engine and a hook, as plain Rust types: the flow instance's state
//! ([`FlowState`]), the request a request hook may change ([`RequestParts`]), the response a
//! response hook reads ([`ResponseView`]) and what hooks decide ([`Verdict`], [`StepOutcome`]).
//!
//! These types own no JavaScript value: the caller keeps them between calls (a flow instance's
//! state lives as long as the arrival, not as long as a runtime), and the runtime copies what a
//! call needs into JS and back (runtime.rs). Nothing here is shared between threads.

use std::collections::BTreeMap;

/// One flow instance's state: what it saved (`vars` in JS), its arrival number (`arrival`) and
/// the feeder rows it drew (`row.FEEDER.COLUMN`). The caller owns it, one per arrival (or per
/// closed-loop user iteration), and hands it to every hook of that flow instance.
///
/// A hook changes `vars` by assigning (`vars.token = t`) or deleting (`delete vars.token`); the
/// changes come back here only when the call succeeds, so a hook that throws saves nothing.
/// Values are text, as `save:` keeps them: a string stays as it is, a number or boolean is
/// written as JS writes it (`String(v)`), an object or array as JSON; `null` and `undefined`
/// remove the name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowState {
    /// Saved values by name: `setup`'s, then this flow instance's steps' and hooks'. (A name a
    /// script writes is cut at a NUL, if it has one: QuickJS hands names out as C strings.)
    pub vars: BTreeMap<String, String>,
    /// The arrival number (`${seq}` in templates).
    pub arrival: u64,
    /// Feeder rows of this arrival: feeder name, then its columns (name, value) in file order.
    pub rows: Vec<(String, Vec<(String, String)>)>,
}

/// The request a request hook may change just before it is sent.
///
/// In JS: `req.method`, `req.path` (with its query), `req.headers` (an object, name to value;
/// an array value sends the header once per element) and `req.body` (a string). The hook
/// changes `req` in place or returns a new object of the same shape.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestParts {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The request target: path and query (`/orders?page=2`).
    pub path: String,
    /// Header fields in order, names as the scenario wrote them. (In JS a name is one
    /// property, so the fields of a repeated name come back together, at the first one's
    /// place.)
    pub headers: Vec<(String, String)>,
    /// The body. A body that is not UTF-8 reaches JS with U+FFFD in place of its bad bytes; if
    /// the hook leaves `req.body` as it was, the original bytes are kept.
    pub body: Vec<u8>,
}

/// The response a response hook reads (it cannot change it).
///
/// In JS: `res.status` (a number), `res.headers` (an object, lower-case name to value; repeated
/// fields joined with `, `, as HTTP allows, except `set-cookie`, joined with `\n`) and
/// `res.body` (a string, U+FFFD for bytes that are not UTF-8).
#[derive(Debug, Clone, Copy)]
pub struct ResponseView<'a> {
    /// The status code.
    pub status: u16,
    /// Header fields as received.
    pub headers: &'a [(&'a str, &'a str)],
    /// The body as received (after the engine's decoding of chunked framing).
    pub body: &'a [u8],
}

/// What a response hook decided.
///
/// In JS the hook returns `undefined` or `true` (success), `false` (failure) or
/// `{ ok: bool, reason: string }`; what it saves goes into `vars`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the response counts as a success.
    pub ok: bool,
    /// Why it failed, when the hook said (cut to one line of
    /// [`MESSAGE_MAX`](crate::error::MESSAGE_MAX) characters).
    pub reason: Option<String>,
}

/// Where a flow goes after a `script:` step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// On to the step after this one (the hook returned `undefined`).
    Continue,
    /// To the step of this name (the hook returned a string). The caller checks that the flow
    /// has such a step.
    Goto(String),
    /// The flow instance ends here (the hook returned `false`).
    End,
}

/// What a `script:` step decided: where the flow goes (what it saved is in the flow's
/// [`FlowState`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepOutcome {
    /// Where the flow goes next.
    pub next: Next,
}
