//! Decoding `flows:` and `setup:`: each flow's weight and steps, a step's
//! request line, headers, body (`json`, `body` or `form`), `expect`, `save`
//! and `pause`, or a WebSocket step's path, `send`, `hold` and `every`
//! (`websocket: /path`, see the engine's `ws` module for what it measures),
//! and the final check that every `${saved}` variable used is
//! saved somewhere. Part of the decoder in `decode.rs`, kept apart like
//! `load.rs` and `watch.rs`: it is the one place that knows what a request is.

use marked_yaml::Node;
use marked_yaml::types::MarkedMappingNode;

use super::decode::{Dec, join, kind};
use super::diag::did_you_mean;
use super::extract::{EventExpect, Expect, Extractor, StatusRange};
use super::grpc::{GRPC_CODES, GrpcCall, GrpcCode};
use super::llm::LLM_ONLY;
use super::redact::redact_text;
use super::script::{StepScript, is_script_step};
use super::template::Template;
use super::{Body, Flow, JsonPart, Step, StreamRead, WebSocket};

pub(super) const FLOW: &[&str] = &["weight", "steps"];
pub(super) const STEP: &[&str] = &[
    "name",
    "request",
    "websocket",
    "send",
    "hold",
    "every",
    "headers",
    "json",
    "body",
    "form",
    "expect",
    "save",
    "pause",
    "grpc",
    "message",
    "metadata",
    "proto",
    "stream",
    "script",
    "before",
    "after",
    "openai",
    "model",
    "messages",
    "max_tokens",
    "params",
    "path",
];
pub(super) const EXPECT: &[&str] = &[
    "status",
    "body_contains",
    "message_contains",
    "json",
    "grpc_status",
    "event_contains",
    "first_event_contains",
    "last_event_contains",
];
/// Fields of a `websocket:` step that an HTTP step does not have.
const WS_ONLY: &[&str] = &["send", "hold", "every"];
/// Fields of an HTTP step that a `websocket:` step does not have.
const HTTP_ONLY: &[&str] = &["request", "json", "body", "form"];
const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];

impl Dec<'_> {
    pub(super) fn flows(&mut self, node: &Node, feeders: &[&str], hooks: &StepScript) -> Vec<Flow> {
        let Some(m) = node.as_mapping() else {
            self.at(
                node.span(),
                "flows",
                format!("expected a mapping of flow names, found {}", kind(node)),
                Some("flows: { browse: { steps: [ { request: GET / } ] } }".into()),
            );
            return Vec::new();
        };
        if m.is_empty() {
            self.at(node.span(), "flows", "no flows: nothing would be sent", None);
        }
        let mut out = Vec::new();
        for (k, v) in m.iter() {
            let p = join("flows", k.as_str());
            let Some(f) = self.map(v, &p, FLOW) else { continue };
            let weight = match f.get_node("weight") {
                Some(w) => match self.number::<u32>(w, &join(&p, "weight"), "a whole number") {
                    Some(0) => {
                        self.at(
                            w.span(),
                            &join(&p, "weight"),
                            "a weight of 0 never runs this flow",
                            Some("remove the flow, or give it weight 1 or more".into()),
                        );
                        0
                    }
                    Some(w) => w,
                    // Reported; keep the flow so its steps are still checked.
                    None => 0,
                },
                None => 1,
            };
            let steps: Vec<Step> = match self.required(f, "steps", &p, "steps: [ { request: GET / } ]") {
                Some(s) => {
                    let sp = join(&p, "steps");
                    let items = self.list(s, &sp, "steps");
                    if items.is_empty() && s.as_sequence().is_some() {
                        self.at(s.span(), &sp, "a flow needs at least one step", None);
                    }
                    items
                        .iter()
                        .enumerate()
                        .filter_map(|(i, s)| self.step_or_salvage(s, &format!("{sp}[{i}]"), feeders, hooks))
                        .collect()
                }
                None => Vec::new(),
            };
            out.push(Flow { name: k.as_str().to_string(), weight, steps });
        }
        out
    }

    /// [`Dec::step`]; and what a step with errors still says (its name, the names it saves), so
    /// that an SLO line naming it or a later `${token}` it saves is not a second, false error (#32).
    pub(super) fn step_or_salvage(
        &mut self,
        node: &Node,
        path: &str,
        feeders: &[&str],
        hooks: &StepScript,
    ) -> Option<Step> {
        let step = self.step(node, path, feeders, hooks);
        let Some(m) = node.as_mapping() else { return step };
        // Every name a step saves, with where: a save whose extractor is wrong is dropped from
        // the step, but its name was meant; and where decides who can read it.
        if let Some(save) = m.get_node("save").and_then(Node::as_mapping) {
            self.salvaged_saves.extend(save.keys().map(|k| (k.as_str().to_string(), path.to_string())));
        }
        if step.is_none() {
            let text = |key: &str| m.get_node(key).and_then(Node::as_scalar).map(|s| s.as_str().trim().to_string());
            let name = text("name")
                .or_else(|| text("request"))
                .or_else(|| text("websocket"))
                .or_else(|| text("grpc"))
                .or_else(|| text("openai"))
                .or_else(|| text("script").map(|f| format!("script {f}")));
            self.salvaged_steps.extend(name);
        }
        step
    }

    pub(super) fn step(&mut self, node: &Node, path: &str, feeders: &[&str], hooks: &StepScript) -> Option<Step> {
        // A call, not a request: its own few fields (an unknown one is named with them).
        if is_script_step(node) {
            return self.script_step(node, path);
        }
        let m = self.map(node, path, STEP)?;
        if m.get_node("grpc").is_some() || m.get_node("websocket").is_some() {
            // Hooks see an HTTP request and its response; defaults' hooks pass these steps by.
            self.misplaced(
                m,
                path,
                &["before", "after"],
                "is a hook of an HTTP step",
                "a `script:` step before or after this one can compute and check values",
            );
        }
        if m.get_node("grpc").is_some() {
            return self.grpc_step(m, path, feeders);
        }
        if let Some(api) = m.get_node("openai") {
            return self.llm_step(m, api, path, feeders, hooks);
        }
        if let Some(ws) = m.get_node("websocket") {
            return self.websocket_step(m, ws, path, feeders);
        }
        for key in ["message", "metadata", "proto"] {
            if let Some(k) = m.keys().find(|k| k.as_str() == key) {
                self.at(
                    k.span(),
                    &join(path, key),
                    format!("`{key}` belongs to a gRPC step"),
                    Some("add `grpc: package.Service/Method`, or use `json`/`headers` for HTTP".into()),
                );
            }
        }
        self.misplaced(m, path, WS_ONLY, "belongs to a `websocket:` step", "an HTTP step is `request: METHOD /path`");
        self.misplaced(m, path, LLM_ONLY, "belongs to an `openai:` step", "an LLM step is `openai: chat`");
        self.misplaced_expect(
            m,
            path,
            "message_contains",
            "checks a WebSocket reply; for a response use `body_contains`",
        );
        // A request line that is missing or malformed does not stop the
        // step's other fields from being checked: every mistake at once.
        let rp = join(path, "request");
        let s = self
            .required(m, "request", path, "request: GET /path (or websocket: /path, grpc: pkg.Service/Method)")
            .and_then(|request| self.scalar(request, &rp, "`METHOD /path`"));
        let text = s.map_or("", |s| s.as_str().trim());
        let line = s.and_then(|s| match text.split_once(char::is_whitespace) {
            Some((m, t)) => Some((s, m.to_string(), t.trim())),
            None => {
                self.at(
                    s.span(),
                    &rp,
                    format!("`{text}` is not `METHOD /path`"),
                    Some("e.g. `GET /orders` or `POST /auth`".into()),
                );
                None
            }
        });
        let request = line.and_then(|(s, method, target)| {
            if !METHODS.contains(&method.as_str()) {
                let hint = did_you_mean(&method.to_ascii_uppercase(), METHODS)
                    .map_or_else(|| format!("one of {}", METHODS.join(", ")), |m| format!("did you mean `{m}`?"));
                self.at(s.span(), &rp, format!("unknown method `{method}`"), Some(hint));
            }
            if !target.starts_with('/') {
                self.at(
                    s.span(),
                    &rp,
                    format!("`{target}`: the path must start with `/`"),
                    Some("the host comes from `target:`".into()),
                );
            }
            // A CR/LF in the path would end the request line (issue #31): refused at its column.
            if self.refuse_in_head(s, s.as_str().find(target).unwrap_or(0), &rp, "a request's path") {
                return None;
            }
            match Template::parse(target, feeders) {
                Ok(t) if t.conversion_at().is_some() => {
                    let target_at = s.as_str().find(target).unwrap_or(0);
                    // Its variables are still checked: an error of theirs is an error of its own.
                    self.record_uses(&t, s, target_at, &rp);
                    self.misplaced_conversion(s, target_at + t.conversion_at().unwrap_or(0), &rp);
                    None
                }
                Ok(t) => {
                    self.record_uses(&t, s, s.as_str().find(target).unwrap_or(0), &rp);
                    Some((method, t))
                }
                Err(e) => {
                    let mut marker = s.span().start().copied();
                    if let Some(m) = marker.as_mut() {
                        let target_at = s.as_str().find(target).unwrap_or(0);
                        m.set_column(m.column() + target_at + e.offset + usize::from(!s.may_coerce()));
                    }
                    self.at_marker(marker.as_ref(), &rp, e.message, e.hint);
                    None
                }
            }
        });
        let headers =
            m.get_node("headers").map(|h| self.headers(h, &join(path, "headers"), feeders)).unwrap_or_default();
        let bodies: Vec<&str> = ["json", "body", "form"].into_iter().filter(|k| m.get_node(k).is_some()).collect();
        if bodies.len() > 1 {
            self.at(
                m.span(),
                path,
                format!("a step has one body: found {}", bodies.join(" and ")),
                Some("keep one of json, body, form".into()),
            );
        }
        let body = if let Some(j) = m.get_node("json") {
            let mut parts = Vec::new();
            self.json(j, &join(path, "json"), feeders, &mut parts);
            Body::Json(parts)
        } else if let Some(b) = m.get_node("body") {
            self.template(b, &join(path, "body"), feeders).map_or(Body::None, Body::Raw)
        } else if let Some(f) = m.get_node("form") {
            // Not in the head: a form's values are percent-encoded, a line break in them is data.
            Body::Form(self.fields(f, &join(path, "form"), feeders, false))
        } else {
            Body::None
        };
        let expect = m.get_node("expect").and_then(|e| self.expect(e, &join(path, "expect")));
        let stream = m.get_node("stream").and_then(|s| self.stream(s, &join(path, "stream")));
        let save = m.get_node("save").map(|s| self.save(s, &join(path, "save"), stream.is_some())).unwrap_or_default();
        let pause = m.get_node("pause").and_then(|p| self.duration(p, &join(path, "pause"))).unwrap_or_default();
        // Unnamed, a step is named by its request line, redacted: its name is in every result
        // (`GET /?api_key=K123` was, in meta.json, summary.json and the Prometheus labels).
        let name = m
            .get_node("name")
            .and_then(|n| self.string(n, &join(path, "name")))
            .unwrap_or_else(|| redact_text(text).into_owned());
        let script = self.hooks(m, path, hooks);
        let (method, path) = request?;
        Some(Step {
            name,
            method,
            path,
            headers,
            body,
            expect,
            save,
            pause,
            grpc: None,
            websocket: None,
            stream,
            script,
            llm: None,
        })
    }

    /// `stream: true` (or `false`), or `stream: { stall: 2s }`.
    pub(super) fn stream(&mut self, node: &Node, path: &str) -> Option<StreamRead> {
        if node.as_mapping().is_some() {
            let m = self.map(node, path, &["stall"])?;
            let sp = join(path, "stall");
            let stall = m.get_node("stall").and_then(|s| self.duration(s, &sp));
            if let Some(s) = m.get_node("stall")
                && stall.is_some_and(|d| d.is_zero())
            {
                self.at(s.span(), &sp, "a stall limit of 0 fails every stream", Some("e.g. stall: 2s".into()));
            }
            return Some(StreamRead { stall });
        }
        match node.as_scalar().map(|s| s.as_str().trim()) {
            Some("true") => Some(StreamRead::default()),
            Some("false") => None,
            _ => {
                self.at(
                    node.span(),
                    path,
                    format!("expected true, false or a mapping, found {}", kind(node)),
                    Some("stream: true, or stream: { stall: 2s }".into()),
                );
                None
            }
        }
    }

    /// A gRPC step: `grpc: package.Service/Method`, its `proto` file(s),
    /// `message` (templated JSON, the request message), `metadata`
    /// (templated headers), `expect` (with `grpc_status`), `save` (from the
    /// response message as JSON) and `pause`. It becomes a POST of the
    /// message to `/package.Service/Method` with gRPC's headers; the engine
    /// encodes the message with the method's descriptor.
    fn grpc_step(&mut self, m: &marked_yaml::types::MarkedMappingNode, path: &str, feeders: &[&str]) -> Option<Step> {
        for key in ["request", "json", "body", "form", "headers"] {
            if let Some(k) = m.keys().find(|k| k.as_str() == key) {
                let hint = match key {
                    "headers" => "gRPC metadata goes in `metadata:`",
                    "request" => "a step is either `request:` (HTTP) or `grpc:`",
                    _ => "the request message goes in `message:`",
                };
                self.at(k.span(), &join(path, key), format!("`{key}` is not part of a gRPC step"), Some(hint.into()));
            }
        }
        // Silently ignored before: a gRPC call's replies are its messages, read whole.
        self.misplaced(
            m,
            path,
            &["stream"],
            "does not belong to a gRPC step",
            "`stream:` reads an HTTP answer as events; a gRPC call's replies are its messages",
        );
        let gp = join(path, "grpc");
        let g = m.get_node("grpc").and_then(|n| self.scalar(n, &gp, "`package.Service/Method`"))?;
        let protos: Vec<String> = match m.get_node("proto") {
            None => Vec::new(),
            Some(n) => match n.as_sequence() {
                Some(items) => items.iter().filter_map(|i| self.string(i, &join(path, "proto"))).collect(),
                None => self.string(n, &join(path, "proto")).into_iter().collect(),
            },
        };
        // A malformed method does not stop the rest from being checked.
        let call = match GrpcCall::parse(g.as_str(), protos) {
            Ok(c) => Some(c),
            Err(e) => {
                self.at(g.span(), &gp, e, Some("e.g. `grpc: bench.Echo/Say`".into()));
                None
            }
        };
        let mut headers = vec![
            ("content-type".to_string(), Template::literal("application/grpc")),
            ("te".to_string(), Template::literal("trailers")),
        ];
        if let Some(md) = m.get_node("metadata") {
            headers.extend(self.headers(md, &join(path, "metadata"), feeders));
        }
        let mut parts = Vec::new();
        match m.get_node("message") {
            Some(j) => self.json(j, &join(path, "message"), feeders, &mut parts),
            None => parts.push(JsonPart::Literal("{}".into())),
        }
        let expect = m.get_node("expect").and_then(|e| self.expect(e, &join(path, "expect")));
        let save = m.get_node("save").map(|s| self.save(s, &join(path, "save"), false)).unwrap_or_default();
        let pause = m.get_node("pause").and_then(|p| self.duration(p, &join(path, "pause"))).unwrap_or_default();
        let text = g.as_str().trim().trim_start_matches('/').to_string();
        let name = m.get_node("name").and_then(|n| self.string(n, &join(path, "name"))).unwrap_or(text);
        let call = call?;
        Some(Step {
            name,
            method: "POST".into(),
            path: Template::literal(&call.path()),
            headers,
            body: Body::Json(parts),
            expect,
            save,
            pause,
            grpc: Some(call),
            websocket: None,
            stream: None,
            script: StepScript::default(),
            llm: None,
        })
    }

    /// A `websocket: /path` step: its path, the messages it sends, how long
    /// it holds the connection and how often it sends again.
    fn websocket_step(&mut self, m: &MarkedMappingNode, ws: &Node, path: &str, feeders: &[&str]) -> Option<Step> {
        self.misplaced(m, path, HTTP_ONLY, "does not belong to a `websocket:` step", "it sends its `send:` messages");
        self.misplaced(
            m,
            path,
            &["stream"],
            "does not belong to a `websocket:` step",
            "`stream:` reads an HTTP answer as events; a WebSocket step measures its replies to `send:`",
        );
        self.misplaced_expect(m, path, "status", "a WebSocket step is upgraded (101) or failed: expect checks replies");
        self.misplaced_expect(m, path, "body_contains", "use `message_contains` for a WebSocket reply");
        let wp = join(path, "websocket");
        let target = self.scalar(ws, &wp, "a path such as /ws")?;
        let text = target.as_str().trim().to_string();
        if !text.starts_with('/') {
            self.at(
                target.span(),
                &wp,
                format!("`{text}`: the path must start with `/`"),
                Some("the host comes from `target:` (ws:// or wss://, or http:// and https://)".into()),
            );
        }
        let path_t = if self.refuse_in_head(target, 0, &wp, "a WebSocket path") {
            None
        } else {
            self.template(ws, &wp, feeders)
        };
        let sp = join(path, "send");
        let send: Vec<Template> = match m.get_node("send") {
            None => Vec::new(),
            Some(Node::Sequence(items)) => {
                items.iter().enumerate().filter_map(|(i, n)| self.template(n, &format!("{sp}[{i}]"), feeders)).collect()
            }
            Some(one) => self.template(one, &sp, feeders).into_iter().collect(),
        };
        let hold = m.get_node("hold").and_then(|h| self.duration(h, &join(path, "hold"))).unwrap_or_default();
        let every = m.get_node("every").and_then(|e| {
            let ep = join(path, "every");
            let d = self.duration(e, &ep)?;
            if d.is_zero() {
                self.at(e.span(), &ep, "`every: 0s` would send without pause", Some("e.g. `every: 10s`".into()));
                return None;
            }
            if hold.is_zero() {
                self.at(
                    e.span(),
                    &ep,
                    "`every` repeats the messages during `hold`, and there is no hold",
                    Some("add `hold: 60s`, or remove `every`".into()),
                );
            }
            if m.get_node("send").is_none() {
                self.at(e.span(), &ep, "`every` repeats the `send:` messages, and there are none", None);
            }
            Some(d)
        });
        let expect = m.get_node("expect").and_then(|e| self.expect(e, &join(path, "expect")));
        let save = m.get_node("save").map(|s| self.save(s, &join(path, "save"), false)).unwrap_or_default();
        for key in ["expect", "save"] {
            if let Some(k) = m.keys().find(|k| k.as_str() == key)
                && m.get_node("send").is_none()
            {
                self.at(
                    k.span(),
                    &join(path, key),
                    format!("`{key}` looks at the replies to `send:` messages, and there are none"),
                    Some("send: [\"hello ${seq}\"]".into()),
                );
            }
        }
        let headers =
            m.get_node("headers").map(|h| self.headers(h, &join(path, "headers"), feeders)).unwrap_or_default();
        let pause = m.get_node("pause").and_then(|p| self.duration(p, &join(path, "pause"))).unwrap_or_default();
        let name = m
            .get_node("name")
            .and_then(|n| self.string(n, &join(path, "name")))
            .unwrap_or_else(|| format!("websocket {}", redact_text(&text)));
        Some(Step {
            name,
            method: "GET".into(),
            path: path_t?,
            headers,
            body: Body::None,
            expect,
            save,
            pause,
            grpc: None,
            websocket: Some(WebSocket { send, hold, every }),
            stream: None,
            script: StepScript::default(),
            llm: None,
        })
    }

    /// Report each of `fields` present in step `m`: it `what` (`hint`).
    fn misplaced(&mut self, m: &MarkedMappingNode, path: &str, fields: &[&str], what: &str, hint: &str) {
        for k in m.keys().filter(|k| fields.contains(&k.as_str())) {
            self.at(k.span(), &join(path, k.as_str()), format!("`{}` {what}", k.as_str()), Some(hint.to_string()));
        }
    }

    /// Report `field` in step `m`'s `expect`, if there: `hint` says why it does not fit.
    fn misplaced_expect(&mut self, m: &MarkedMappingNode, path: &str, field: &str, hint: &str) {
        let Some(e) = m.get_node("expect").and_then(Node::as_mapping) else { return };
        if let Some(k) = e.keys().find(|k| k.as_str() == field) {
            let p = join(&join(path, "expect"), field);
            self.at(k.span(), &p, format!("`{field}` does not fit this step"), Some(hint.to_string()));
        }
    }

    /// A YAML value as JSON text, with templated strings left as holes.
    pub(super) fn json(&mut self, node: &Node, path: &str, feeders: &[&str], out: &mut Vec<JsonPart>) {
        let lit = |out: &mut Vec<JsonPart>, s: &str| match out.last_mut() {
            Some(JsonPart::Literal(l)) => l.push_str(s),
            _ => out.push(JsonPart::Literal(s.to_string())),
        };
        match node {
            Node::Mapping(m) => {
                lit(out, "{");
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        lit(out, ",");
                    }
                    lit(out, &serde_json::to_string(k.as_str()).unwrap_or_default());
                    lit(out, ":");
                    self.json(v, &join(path, k.as_str()), feeders, out);
                }
                lit(out, "}");
            }
            Node::Sequence(items) => {
                lit(out, "[");
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        lit(out, ",");
                    }
                    self.json(v, &format!("{path}[{i}]"), feeders, out);
                }
                lit(out, "]");
            }
            Node::Scalar(s) => {
                let text = s.as_str();
                // Plain (unquoted) numbers, booleans and null keep their JSON type.
                if s.may_coerce()
                    && (matches!(text, "true" | "false" | "null")
                        || serde_json::from_str::<serde_json::Number>(text).is_ok())
                {
                    lit(out, text);
                    return;
                }
                let Some(t) = self.typed_template(node, path, feeders) else { return };
                match t.as_literal() {
                    Some(l) => lit(out, &serde_json::to_string(l).unwrap_or_default()),
                    // One `${...}` and nothing else keeps its value's type (issue #32).
                    None if t.is_whole_value() => out.push(JsonPart::Value(t)),
                    None => {
                        lit(out, "\"");
                        out.push(JsonPart::String(t));
                        lit(out, "\"");
                    }
                }
            }
        }
    }

    pub(super) fn expect(&mut self, node: &Node, path: &str) -> Option<Expect> {
        let m = self.map(node, path, EXPECT)?;
        let status = m.get_node("status").and_then(|s| {
            let sp = join(path, "status");
            let items: Vec<&Node> = match s {
                Node::Sequence(seq) => seq.iter().collect(),
                other => vec![other],
            };
            let mut ranges = Vec::new();
            for item in items {
                let sc = self.scalar(item, &sp, "a status such as 200 or 2xx")?;
                match StatusRange::parse(sc.as_str()) {
                    Ok(r) => ranges.push(r),
                    Err(e) => self.at(sc.span(), &sp, e.to_string(), Some("e.g. 200, 201 or 2xx".into())),
                }
            }
            Some(ranges)
        });
        let body_contains = m.get_node("body_contains").and_then(|b| self.string(b, &join(path, "body_contains")));
        let message_contains =
            m.get_node("message_contains").and_then(|b| self.string(b, &join(path, "message_contains")));
        let mut json = Vec::new();
        if let Some(j) = m.get_node("json") {
            let jp = join(path, "json");
            if let Some(jm) = j.as_mapping() {
                for (k, v) in jm.iter() {
                    match Extractor::parse(k.as_str()) {
                        Ok(x @ Extractor::JsonPath { .. }) => json.push((x, yaml_to_json(v))),
                        Ok(_) => self.at(
                            k.span(),
                            &jp,
                            format!("`{}` is not a JSONPath", k.as_str()),
                            Some("e.g. `$.status: ok`".into()),
                        ),
                        Err(e) => self.at(k.span(), &jp, e.to_string(), None),
                    }
                }
            } else {
                self.at(
                    j.span(),
                    &jp,
                    "expected a mapping of JSONPath to expected value",
                    Some("json: { \"$.status\": ok }".into()),
                );
            }
        }
        let grpc_status = m.get_node("grpc_status").and_then(|g| {
            let gp = join(path, "grpc_status");
            let items: Vec<&Node> = match g {
                Node::Sequence(seq) => seq.iter().collect(),
                other => vec![other],
            };
            let mut codes = Vec::new();
            for item in items {
                let sc = self.scalar(item, &gp, "a gRPC status such as OK or UNAVAILABLE")?;
                match GrpcCode::parse(sc.as_str()) {
                    Some(c) => codes.push(c),
                    None => {
                        let hint = did_you_mean(&sc.as_str().to_ascii_uppercase(), &GRPC_CODES).map_or_else(
                            || format!("one of {}", GRPC_CODES.join(", ")),
                            |d| format!("did you mean `{d}`?"),
                        );
                        self.at(sc.span(), &gp, format!("unknown gRPC status `{}`", sc.as_str()), Some(hint));
                    }
                }
            }
            Some(codes)
        });
        let text = |d: &mut Self, key: &str| m.get_node(key).and_then(|b| d.string(b, &join(path, key)));
        let events = EventExpect {
            any: text(self, "event_contains"),
            first: text(self, "first_event_contains"),
            last: text(self, "last_event_contains"),
        };
        Some(Expect { status, body_contains, message_contains, json, grpc_status, events })
    }

    /// `save:`, on a step that reads its answer as events when `streamed`
    /// (only such a step may save from events: `last_event`, `event:$.id`).
    pub(super) fn save(&mut self, node: &Node, path: &str, streamed: bool) -> Vec<(String, Extractor)> {
        let Some(m) = node.as_mapping() else {
            self.at(
                node.span(),
                path,
                "expected a mapping of variable names to extractors",
                Some("save: { token: $.token }".into()),
            );
            return Vec::new();
        };
        let mut out = Vec::new();
        for (k, v) in m.iter() {
            let p = join(path, k.as_str());
            let name = k.as_str();
            if !is_identifier(name) || matches!(name, "env" | "seq" | "uuid" | "random") {
                self.at(
                    k.span(),
                    &p,
                    format!("`{name}` cannot be a variable name"),
                    Some("letters, digits and _, not env/seq/uuid/random".into()),
                );
                continue;
            }
            let Some(s) = self.scalar(v, &p, "an extractor") else { continue };
            match Extractor::parse(s.as_str()) {
                Ok(x) if x.event_pick().is_some() && !streamed => self.at(
                    s.span(),
                    &p,
                    format!("`{}` reads the events of a streamed answer, and this step has no `stream:`", s.as_str()),
                    Some("an HTTP step with `stream: true` reads its answer as events".into()),
                ),
                Ok(x) => out.push((name.to_string(), x)),
                Err(e) => self.at(
                    s.span(),
                    &p,
                    e.to_string(),
                    Some(
                        "`$.json.path`, `header:Name`, `regex:pattern(group)`, or from a stream's events \
                         `last_event`, `event:$.path`"
                            .into(),
                    ),
                ),
            }
        }
        out
    }

    /// Every `${name}` must be saved where its use can read it. Saved values belong to a flow's
    /// own arrival (closed-loop iteration): a flow's step reads what setup saved or what an
    /// earlier step of the same flow saved, never what another flow saved (that arrival's
    /// values are its own), and setup reads only its earlier steps. Elsewhere (`defaults`, a
    /// probe) a name saved anywhere will do. With `scripts:`, a name no step saves may be saved
    /// by a script, and a function may jump between steps: not checked then.
    pub(super) fn check_variables(&mut self, flows: &[Flow], scripted: bool) {
        let saves = std::mem::take(&mut self.salvaged_saves);
        if scripted {
            self.uses.clear();
            return;
        }
        let names: Vec<&str> = flows.iter().map(|f| f.name.as_str()).collect();
        let saved: Vec<&str> = saves.iter().map(|(n, _)| n.as_str()).collect();
        for (name, marker, path) in std::mem::take(&mut self.uses) {
            let at: Vec<(Place<'_>, &str)> =
                saves.iter().filter(|(n, _)| *n == name).map(|(_, p)| (Place::of(p, &names), p.as_str())).collect();
            let used = Place::of(&path, &names);
            if at.iter().any(|(p, _)| used.reads(p)) {
                continue;
            }
            let (message, hint) = match (used, at.first()) {
                (_, None) => (
                    format!("`${{{name}}}` is never saved"),
                    match did_you_mean(&name, &saved) {
                        Some(s) => format!("did you mean `${{{s}}}`?"),
                        None => "save it first, e.g. `save: { token: $.token }` in setup or an earlier step".into(),
                    },
                ),
                (Place::Setup(_), Some(_)) => (
                    match at.iter().find_map(|(p, _)| p.flow()) {
                        Some(f) => format!("setup runs before any flow: `${{{name}}}` is saved only by flow `{f}`"),
                        None => format!("`${{{name}}}` is saved only by this or a later setup step"),
                    },
                    "save it in an earlier setup step".into(),
                ),
                (Place::Flow(flow, i), Some(_)) => match at.iter().find(|(p, _)| p.flow() == Some(flow)) {
                    Some((Place::Flow(_, j), _)) if *j == i => (
                        format!("`${{{name}}}` is saved from this step's own answer, after its request is sent"),
                        "save it in an earlier step, or in setup".into(),
                    ),
                    Some((_, where_)) => (
                        format!("`${{{name}}}` is used before it is saved: {where_} saves it"),
                        "a flow's steps run in order: save it in an earlier step, or in setup".into(),
                    ),
                    None => (
                        format!(
                            "`${{{name}}}` is saved only by flow `{}`: each arrival of a flow has its own saved values",
                            at.iter().find_map(|(p, _)| p.flow()).unwrap_or_default()
                        ),
                        "save it in setup (one value for every flow) or in an earlier step of this flow".into(),
                    ),
                },
                // Outside setup and flows any save is read (above).
                (Place::Elsewhere, Some(_)) => continue,
            };
            self.at_marker(marker.as_ref(), &path, message, Some(hint));
        }
    }
}

/// Where a template or a save is, by its path: which part of a run reads or writes it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Place<'a> {
    /// Setup's step `i`.
    Setup(usize),
    /// Step `i` of the flow named so.
    Flow(&'a str, usize),
    /// Anywhere else (`defaults`, a probe), or a path not understood.
    Elsewhere,
}

impl<'a> Place<'a> {
    /// The place of `path` (`setup[2].save`, `flows.list.steps[0].headers.X`); a flow's name
    /// may hold dots, so the longest of `flows` that fits is the one.
    fn of(path: &str, flows: &[&'a str]) -> Place<'a> {
        let index = |rest: &str| rest.split(']').next().and_then(|n| n.parse::<usize>().ok());
        if let Some(i) = path.strip_prefix("setup[").and_then(index) {
            return Place::Setup(i);
        }
        let Some(rest) = path.strip_prefix("flows.") else { return Place::Elsewhere };
        flows
            .iter()
            .filter_map(|f| Some((*f, rest.strip_prefix(f)?.strip_prefix(".steps[").and_then(index)?)))
            .max_by_key(|(f, _)| f.len())
            .map_or(Place::Elsewhere, |(f, i)| Place::Flow(f, i))
    }

    /// Whether a use here can read a value saved at `saved`.
    fn reads(self, saved: &Place<'_>) -> bool {
        match (self, *saved) {
            (Place::Elsewhere, _) | (_, Place::Elsewhere) => true,
            (Place::Setup(i), Place::Setup(j)) => j < i,
            (Place::Setup(_), Place::Flow(..)) => false,
            (Place::Flow(..), Place::Setup(_)) => true,
            (Place::Flow(f, i), Place::Flow(g, j)) => f == g && j < i,
        }
    }

    fn flow(&self) -> Option<&'a str> {
        if let Place::Flow(f, _) = self { Some(f) } else { None }
    }
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A YAML value as JSON (plain scalars typed, quoted ones strings).
fn yaml_to_json(node: &Node) -> serde_json::Value {
    match node {
        Node::Scalar(s) if s.may_coerce() => {
            serde_json::from_str(s.as_str()).unwrap_or_else(|_| serde_json::Value::String(s.as_str().to_string()))
        }
        Node::Scalar(s) => serde_json::Value::String(s.as_str().to_string()),
        Node::Sequence(items) => items.iter().map(yaml_to_json).collect(),
        Node::Mapping(m) => m.iter().map(|(k, v)| (k.as_str().to_string(), yaml_to_json(v))).collect(),
    }
}
