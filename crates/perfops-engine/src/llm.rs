//! An LLM step's answer (`openai: chat`) read as tokens: the consumer of a streamed answer's
//! events (`stream.rs`'s contract) that an LLM step uses instead of the plain [`Timeline`], and
//! what it makes of an OpenAI-compatible server's `chat.completion.chunk`s.
//!
//! ```text
//!   due      send          chunk (role)   chunk "He"   chunk "llo"  ...  chunk (usage)  [DONE]  end
//!    |--------|-------------------|------------|-----------|---------------|----------|-------|
//!    |<------------ ttft -------------------->|           |
//!             |<------ ttft_sent ------------>|<-- itl -->|<-- itl ...
//!                                             |<----------- tpot x (tokens - 1) ------------->|
//! ```
//!
//! - A token is a chunk whose `choices[].delta.content` (chat) or `choices[].text` is a non-empty
//!   string: the role-only first chunk, an empty delta, the usage chunk and `[DONE]` are events
//!   (the stream's histograms count them) but no tokens. A server that packs several tokens in
//!   one chunk gives one instant for them; the count then comes from `usage`.
//! - Each token is dated by its event's instant: the kernel's receive time of the read that
//!   completed it (`stream.rs`). Tokens that came in one read share it: an inter-token gap of 0,
//!   as a capture of the wire would show for one segment.
//! - The counts: `usage.prompt_tokens` and `usage.completion_tokens` of the chunk that carries
//!   them (asked for with `stream_options: { include_usage: true }`), else the content chunks
//!   counted and no prompt tokens.
//! - Time per output token is (end - first token) / (completion tokens - 1), the end being the
//!   answer's last byte (vLLM's `benchmark_serving` takes the request's end likewise); output
//!   tokens per second are completion tokens over the send to that end.
//!
//! Nothing from the server is trusted: an event that is no JSON, or whose fields have other
//! types, is no token and no usage; the gaps are bounded as the timeline's.

use serde::Deserialize;
use tokio::time::Instant;

use crate::stream::{Event, Events, Gaps, Timeline};

/// The server's count of an answer's tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub(crate) struct Usage {
    /// Tokens of the prompt (the messages, after the chat template).
    #[serde(default)]
    pub(crate) prompt_tokens: u64,
    /// Tokens generated.
    #[serde(default)]
    pub(crate) completion_tokens: u64,
}

/// What one event says: whether it carries a token, and the usage if it carries that.
#[derive(Debug, Default, Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Default, Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Option<Delta>,
    /// The completions API's (and a non-streamed answer's message is not read here).
    #[serde(default)]
    text: Option<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<serde_json::Value>,
}

/// `(a token came, the usage if given)` for one event's data.
pub(crate) fn read_chunk(data: &[u8]) -> (bool, Option<Usage>) {
    if data == b"[DONE]" {
        return (false, None);
    }
    let Ok(chunk) = serde_json::from_slice::<Chunk>(data) else { return (false, None) };
    let text = |v: &Option<serde_json::Value>| v.as_ref().and_then(|v| v.as_str()).is_some_and(|s| !s.is_empty());
    let token = chunk.choices.iter().any(|c| c.delta.as_ref().is_some_and(|d| text(&d.content)) || text(&c.text));
    (token, chunk.usage)
}

/// The consumer of an LLM step's streamed answer: the timeline every stream keeps, and the
/// tokens' instants.
#[derive(Debug)]
pub(crate) struct Tokens {
    /// The plain stream's measure, fed every event as any stream's.
    pub(crate) timeline: Timeline,
    /// The first token's instant.
    pub(crate) first: Option<Instant>,
    /// The latest token's instant.
    pub(crate) last: Option<Instant>,
    /// Chunks that carried a token.
    pub(crate) deltas: u64,
    /// Each gap between a token and the next.
    pub(crate) gaps: Gaps,
    /// The server's count, if it gave one.
    pub(crate) usage: Option<Usage>,
}

impl Tokens {
    /// Nothing read yet; every event also goes to `timeline` (a stream's measure and checks).
    pub(crate) fn over(timeline: Timeline) -> Tokens {
        Tokens { timeline, first: None, last: None, deltas: 0, gaps: Gaps::default(), usage: None }
    }

    /// Completion tokens: the server's count, else the token chunks.
    pub(crate) fn completion(&self) -> u64 {
        self.usage.map_or(self.deltas, |u| u.completion_tokens)
    }

    /// Prompt tokens: the server's count, else 0 (not known).
    pub(crate) fn prompt(&self) -> u64 {
        self.usage.map_or(0, |u| u.prompt_tokens)
    }
}

impl Events for Tokens {
    fn event(&mut self, e: &Event<'_>) {
        self.timeline.event(e);
        let (token, usage) = read_chunk(e.data);
        if usage.is_some() {
            self.usage = usage;
        }
        if !token {
            return;
        }
        if let Some(last) = self.last {
            self.gaps.push(e.at.saturating_duration_since(last));
        }
        self.first.get_or_insert(e.at);
        self.last = Some(e.at);
        self.deltas += 1;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Prompt and completion tokens.
    type Counts = Option<(u64, u64)>;

    #[test]
    fn chunks_as_servers_send_them() {
        // (data, a token, usage)
        let cases: [(&str, bool, Counts); 9] = [
            // llama-cpp-python's and vLLM's first chunk: the role, no content.
            (
                r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}"#,
                false,
                None,
            ),
            // A token.
            (r#"{"id":"c","choices":[{"index":0,"delta":{"content":" he"},"finish_reason":null}]}"#, true, None),
            // An empty content (vLLM sends one with the role): no token.
            (r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#, false, None),
            // The last chunk with a finish reason and no delta.
            (r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#, false, None),
            // The usage chunk of `include_usage`: no choices.
            (
                r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":32,"total_tokens":44}}"#,
                false,
                Some((12, 32)),
            ),
            // The completions API's text.
            (r#"{"choices":[{"text":"lo","index":0}]}"#, true, None),
            // The end, and what is no chunk at all.
            ("[DONE]", false, None),
            ("not json", false, None),
            // Fields of other types: no token, no usage.
            (r#"{"choices":[{"delta":{"content":7}}],"usage":"many"}"#, false, None),
        ];
        for (data, token, usage) in cases {
            let (t, u) = read_chunk(data.as_bytes());
            assert_eq!((t, u.map(|u| (u.prompt_tokens, u.completion_tokens))), (token, usage), "{data}");
        }
    }

    #[test]
    fn tokens_are_dated_by_their_events() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let ev = |data: &'static str, at| Event { name: b"message", data: data.as_bytes(), id: b"", at };
        let mut t = Tokens::over(Timeline::new(false));
        // (event, at ms): the role at 5, tokens at 40, 60, 60 (one read), 90, then usage and [DONE].
        let role = r#"{"choices":[{"delta":{"role":"assistant"}}]}"#;
        let tok = r#"{"choices":[{"delta":{"content":"x"}}]}"#;
        let usage = r#"{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4}}"#;
        for (data, at) in [(role, 5), (tok, 40), (tok, 60), (tok, 60), (tok, 90), (usage, 95), ("[DONE]", 95)] {
            t.event(&ev(data, ms(at)));
        }
        assert_eq!((t.first, t.last), (Some(ms(40)), Some(ms(90))), "the role chunk is no token");
        assert_eq!(
            t.gaps.counts().collect::<Vec<_>>(),
            [(20_000, 1), (0, 1), (30_000, 1)],
            "one read's tokens share its instant"
        );
        assert_eq!((t.deltas, t.completion(), t.prompt()), (4, 4, 9));
        assert_eq!(t.timeline.events, 7, "every event is the stream's");
        // Without usage: the chunks counted, the prompt unknown.
        let mut t = Tokens::over(Timeline::new(false));
        t.event(&ev(tok, ms(1)));
        t.event(&ev(tok, ms(2)));
        assert_eq!((t.completion(), t.prompt()), (2, 0));
    }
}
