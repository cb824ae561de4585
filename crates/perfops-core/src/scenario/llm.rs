//! Decoding an LLM step, `openai: chat`: a request to an OpenAI-compatible server's
//! `/v1/chat/completions` (vLLM, llama.cpp's server, TGI, Ollama, OpenAI itself), built from
//! the step's `model`, `messages` (templated, from feeders and saved values as any body),
//! `max_tokens`, `stream` and `params`, whose answer the engine reads as tokens (time to first
//! token, inter-token latency, time per output token, tokens in and out: see the engine's
//! `llm` module).
//!
//! ```yaml
//! - name: ask
//!   openai: chat
//!   model: tiny
//!   messages: [ { role: user, content: "hello ${seq}" } ]
//!   max_tokens: 32
//!   stream: true                    # the default; or { stall: 2s }; false: one answer, no tokens timed
//!   params: { temperature: 0 }      # other body fields, sent as they are
//!   path: /v1/chat/completions      # the default
//! ```
//!
//! It becomes a POST with a JSON body, so everything a request step has (headers, `expect`,
//! `save`, `pause`, the body's templates keeping their values' types) is the same here; it owns
//! the body's fields and their checks, not the request (that is `flow.rs`). A streamed request
//! asks for `stream_options: { include_usage: true }`: the server's own count of the prompt and
//! completion tokens comes in the last event, where servers that give it do.

use marked_yaml::Node;
use marked_yaml::types::MarkedMappingNode;

use super::decode::{Dec, join, kind};
use super::script::StepScript;
use super::template::Template;
use super::{Body, JsonPart, Llm, LlmApi, Step, StreamRead};

/// The fields of a step that only an LLM step has.
pub(super) const LLM_ONLY: &[&str] = &["model", "messages", "max_tokens", "params", "path"];
/// The APIs an `openai:` step speaks, with their default path.
const APIS: &[(&str, LlmApi, &str)] = &[("chat", LlmApi::Chat, "/v1/chat/completions")];
/// The roles a chat message may have (OpenAI's, and `developer`, its newer `system`).
const ROLES: &[&str] = &["system", "developer", "user", "assistant", "tool"];
/// Body fields the step writes itself: in `params` they would be sent twice.
const OWN: &[&str] = &["model", "messages", "max_tokens", "stream", "stream_options"];

impl Dec<'_> {
    /// An `openai: chat` step.
    pub(super) fn llm_step(
        &mut self,
        m: &MarkedMappingNode,
        api: &Node,
        path: &str,
        feeders: &[&str],
        hooks: &StepScript,
    ) -> Option<Step> {
        for key in ["request", "json", "body", "form", "websocket", "grpc"] {
            if let Some(k) = m.keys().find(|k| k.as_str() == key) {
                self.at(
                    k.span(),
                    &join(path, key),
                    format!("`{key}` is not part of an `openai:` step"),
                    Some("its body is built from model, messages, max_tokens and params".into()),
                );
            }
        }
        let ap = join(path, "openai");
        let api_text = self.scalar(api, &ap, "an API such as `chat`").map(|s| s.as_str().trim().to_string());
        let api = api_text.as_deref().and_then(|a| match APIS.iter().find(|(n, ..)| *n == a) {
            Some(&(_, api, default_path)) => Some((api, default_path)),
            None => {
                let names: Vec<&str> = APIS.iter().map(|(n, ..)| *n).collect();
                self.at(api.span(), &ap, format!("unknown API `{a}`"), Some(format!("one of {}", names.join(", "))));
                None
            }
        });
        let model = self.required(m, "model", path, "model: the model's name, as the server serves it").and_then(|n| {
            let mp = join(path, "model");
            if n.as_scalar().is_none() {
                self.at(n.span(), &mp, format!("expected the model's name, found {}", kind(n)), None);
                return None;
            }
            let mut parts = Vec::new();
            self.json(n, &mp, feeders, &mut parts);
            Some(parts)
        });
        let messages =
            self.required(m, "messages", path, "messages: [ { role: user, content: \"hello\" } ]").and_then(|n| {
                let mp = join(path, "messages");
                self.messages(n, &mp)?;
                let mut parts = Vec::new();
                self.json(n, &mp, feeders, &mut parts);
                Some(parts)
            });
        let max_tokens = m.get_node("max_tokens").and_then(|n| {
            let tp = join(path, "max_tokens");
            match self.number::<u32>(n, &tp, "a whole number of tokens") {
                Some(0) => {
                    self.at(n.span(), &tp, "`max_tokens: 0` asks for no token", Some("e.g. `max_tokens: 64`".into()));
                    None
                }
                other => other,
            }
        });
        // Streamed unless `stream: false`; `{ stall: 2s }` is the stream reader's setting.
        let read = match m.get_node("stream") {
            None => Some(StreamRead::default()),
            Some(n) => self.stream(n, &join(path, "stream")),
        };
        let stream = read.is_some();
        let params = m.get_node("params").and_then(|n| {
            let pp = join(path, "params");
            let Some(pm) = n.as_mapping() else {
                self.at(
                    n.span(),
                    &pp,
                    format!("expected a mapping of body fields, found {}", kind(n)),
                    Some("params: { temperature: 0, seed: 1 }".into()),
                );
                return None;
            };
            let mut parts = Vec::new();
            for (k, v) in pm.iter() {
                if OWN.contains(&k.as_str()) {
                    self.at(
                        k.span(),
                        &join(&pp, k.as_str()),
                        format!("`{}` is the step's own field", k.as_str()),
                        Some(format!("write it beside `openai:`, not in `params` ({})", OWN.join(", "))),
                    );
                    continue;
                }
                push_literal(&mut parts, &format!(",{}:", serde_json::to_string(k.as_str()).unwrap_or_default()));
                self.json(v, &join(&pp, k.as_str()), feeders, &mut parts);
            }
            Some(parts)
        });
        let request_path = match m.get_node("path") {
            Some(n) => {
                let pp = join(path, "path");
                let s = self.scalar(n, &pp, "a path such as /v1/chat/completions")?;
                if !s.as_str().starts_with('/') {
                    self.at(s.span(), &pp, format!("`{}`: the path must start with `/`", s.as_str()), None);
                    return None;
                }
                if self.refuse_in_head(s, 0, &pp, "a request's path") {
                    return None;
                }
                self.template(n, &pp, feeders)
            }
            None => api.map(|(_, p)| Template::literal(p)),
        };
        let headers = {
            let mut h = vec![("content-type".to_string(), Template::literal("application/json"))];
            if stream {
                h.push(("accept".to_string(), Template::literal("text/event-stream")));
            }
            if let Some(n) = m.get_node("headers") {
                h.extend(self.headers(n, &join(path, "headers"), feeders));
            }
            h
        };
        let expect = m.get_node("expect").and_then(|e| self.expect(e, &join(path, "expect")));
        let save = m.get_node("save").map(|s| self.save(s, &join(path, "save"), stream)).unwrap_or_default();
        let pause = m.get_node("pause").and_then(|p| self.duration(p, &join(path, "pause"))).unwrap_or_default();
        let name = m
            .get_node("name")
            .and_then(|n| self.string(n, &join(path, "name")))
            .unwrap_or_else(|| format!("openai {}", api_text.as_deref().unwrap_or("chat")));
        // A chat completion is an HTTP request: its hooks are a request step's.
        let script = self.hooks(m, path, hooks);
        let (api, _) = api?;
        let body = body(model?, messages?, max_tokens, stream, params.unwrap_or_default());
        Some(Step {
            name,
            method: "POST".into(),
            path: request_path?,
            headers,
            body: Body::Json(body),
            expect,
            save,
            pause,
            grpc: None,
            websocket: None,
            script,
            stream: read,
            llm: Some(Llm { api, stream, max_tokens }),
        })
    }

    /// Checks a `messages:` list: a non-empty sequence of mappings, each with a known `role`
    /// and a `content`. `None` (reported) when it is not a list at all.
    fn messages(&mut self, node: &Node, path: &str) -> Option<()> {
        let Some(items) = node.as_sequence() else {
            self.at(
                node.span(),
                path,
                format!("expected a list of messages, found {}", kind(node)),
                Some("messages: [ { role: user, content: \"hello ${seq}\" } ]".into()),
            );
            return None;
        };
        if items.is_empty() {
            self.at(node.span(), path, "no messages: the model would have nothing to answer", None);
        }
        for (i, item) in items.iter().enumerate() {
            let ip = format!("{path}[{i}]");
            let Some(msg) = item.as_mapping() else {
                self.at(
                    item.span(),
                    &ip,
                    format!("expected a message `{{ role, content }}`, found {}", kind(item)),
                    None,
                );
                continue;
            };
            match msg.get_node("role").and_then(Node::as_scalar) {
                Some(r) if ROLES.contains(&r.as_str()) => {}
                Some(r) => self.at(
                    r.span(),
                    &join(&ip, "role"),
                    format!("unknown role `{}`", r.as_str()),
                    Some(format!("one of {}", ROLES.join(", "))),
                ),
                None => self.at(item.span(), &ip, "a message needs a `role`", Some("role: user".into())),
            }
            if msg.get_node("content").is_none() {
                self.at(item.span(), &ip, "a message needs a `content`", Some("content: \"hello ${seq}\"".into()));
            }
        }
        Some(())
    }
}

/// Appends literal JSON text to `parts`.
fn push_literal(parts: &mut Vec<JsonPart>, s: &str) {
    match parts.last_mut() {
        Some(JsonPart::Literal(l)) => l.push_str(s),
        _ => parts.push(JsonPart::Literal(s.to_string())),
    }
}

/// The request body: `{"model":..,"messages":..,"max_tokens":..,"stream":..,
/// "stream_options":{"include_usage":true}, params...}`.
fn body(
    model: Vec<JsonPart>,
    messages: Vec<JsonPart>,
    max_tokens: Option<u32>,
    stream: bool,
    params: Vec<JsonPart>,
) -> Vec<JsonPart> {
    let mut out = Vec::new();
    let add = |parts: Vec<JsonPart>, out: &mut Vec<JsonPart>| {
        for p in parts {
            match p {
                JsonPart::Literal(l) => push_literal(out, &l),
                other => out.push(other),
            }
        }
    };
    push_literal(&mut out, "{\"model\":");
    add(model, &mut out);
    push_literal(&mut out, ",\"messages\":");
    add(messages, &mut out);
    if let Some(n) = max_tokens {
        push_literal(&mut out, &format!(",\"max_tokens\":{n}"));
    }
    if stream {
        push_literal(&mut out, ",\"stream\":true,\"stream_options\":{\"include_usage\":true}");
    } else {
        push_literal(&mut out, ",\"stream\":false");
    }
    add(params, &mut out);
    push_literal(&mut out, "}");
    out
}
