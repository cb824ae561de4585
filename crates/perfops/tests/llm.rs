//! End to end: `openai: chat` steps run by the real `perfops` binary against a real
//! OpenAI-compatible server on 127.0.0.1 (llama-cpp-python's, llama.cpp's engine, serving a
//! tiny random llama the testkit writes: `perfops_testkit::llm`), judged by the results
//! directory and by the server's own timings (llama.cpp's perf print per answer).
//!
//! Greedy decoding (`temperature: 0`) on that model never ends early (its head never picks the
//! end of sequence), so every answer has exactly `max_tokens` tokens. Each run is bounded: a
//! few answers a second for a few seconds, 16 tokens each (~0.1-0.3 s an answer on one core).

// A skipped test says why; the figures measured are printed for whoever runs it.
#![allow(clippy::print_stderr)]

mod common;

use common::{RUN_LIMIT, Run, Workdir, count, exclusive, num};
use perfops_testkit::llm::{Llama, LlamaOptions, unavailable};
use serde_json::Value;

impl Run {
    /// `perfops run` of `steps` against `url` at `rate`/s for `secs`.
    fn new(wd: &Workdir, url: &str, steps: &str, rate: u32, secs: u32, slo: &str) -> Run {
        let yaml = format!(
            "name: llm\ntarget: {url}\ndefaults: {{ timeout: 20s }}\nflows:\n  chat:\n    steps:\n{steps}load:\n  stages: [ {{ rate: {rate}, hold: {secs}s }} ]\nslo: {slo}\n"
        );
        let file = wd.scenario("llm.yaml", &yaml);
        Run::of(wd, wd.spawn("run", &file, &["--wait-in-flight"], |_| {}).wait(RUN_LIMIT * 2))
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

/// Streamed answers of 16 tokens: each answer's tokens counted exactly (15 gaps, one first
/// token, one time per output token), and perfops' figures against llama.cpp's own: the time per
/// output token is the server's ms per token plus what its HTTP server adds per chunk (never
/// less), the time to first token no less than the server's prompt evaluation. A non-streamed
/// step's tokens come from its `usage`.
#[test]
fn tokens_are_counted_and_timed_against_the_servers_own_timings() {
    if let Some(why) = unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let _cpu = exclusive();
    let server = Llama::start(&LlamaOptions::default());
    let wd = Workdir::new("llm-tokens");
    let steps = "      - { name: ask, openai: chat, model: tiny, messages: [ { role: user, content: \"hello ${seq}\" } ], max_tokens: 16, params: { temperature: 0 } }\n\
                 \x20     - { name: whole, openai: chat, model: tiny, messages: [ { role: user, content: \"bye ${seq}\" } ], max_tokens: 8, stream: false, params: { temperature: 0 } }\n";
    let run = Run::new(&wd, &server.url(), steps, 2, 3, "[ \"errors < 1%\" ]");
    let ask = run.step("ask");
    let ctx = format!("{ask:#}\n{}\nserver log tail:\n{}", run.context(), tail(&server.log_text()));
    let answered = count(&ask, "/completed");
    assert!(answered >= 5 && count(&ask, "/failed") == 0, "{ctx}");
    // llama-cpp-python sends no usage chunk: the content chunks are counted.
    assert_eq!(count(&ask, "/tokens_out"), 16 * answered, "{ctx}");
    assert_eq!(count(&ask, "/ttft_ms/count"), answered, "one first token per answer\n{ctx}");
    assert_eq!(count(&ask, "/itl_ms/count"), 15 * answered, "fifteen gaps per answer\n{ctx}");
    assert_eq!(count(&ask, "/tpot_ms/count"), answered, "{ctx}");
    assert_eq!(count(&ask, "/output_tps/count"), answered, "{ctx}");
    // The answer's events: a role chunk, 16 tokens, the finish chunk and [DONE].
    assert_eq!((num(&ask, "/events/min"), num(&ask, "/events/max")), (19.0, 19.0), "{ctx}");
    // The non-streamed step: one answer each, its tokens from `usage`.
    let whole = run.step("whole");
    let done = count(&whole, "/completed");
    assert!(done >= 5, "{whole:#}");
    assert_eq!(count(&whole, "/tokens_out"), 8 * done, "{whole:#}");
    assert!(count(&whole, "/tokens_in") >= done, "usage's prompt tokens\n{whole:#}");
    assert_eq!(count(&whole, "/ttft_ms/count"), 0, "no token is timed in a whole answer\n{whole:#}");

    // The server's own: the streamed answers' perf prints (16 tokens: 15 eval runs).
    let own: Vec<_> = server.timings().into_iter().filter(|t| t.eval_runs == 15).collect();
    assert!(own.len() as u64 >= answered, "{} perf prints of 15 runs for {answered} answers\n{ctx}", own.len());
    let server_tpot = median(own.iter().map(|t| t.per_token_ms()).collect());
    let server_prompt = median(own.iter().map(|t| t.prompt_ms).collect());
    let tpot = num(&ask, "/tpot_ms/p50");
    let itl = num(&ask, "/itl_ms/p50");
    let ttft_sent = num(&ask, "/ttft_sent_ms/p50");
    eprintln!(
        "timing agreement: perfops tpot p50 {tpot:.2} ms, itl p50 {itl:.2} ms vs llama.cpp eval {server_tpot:.2} ms \
         per token; perfops ttft (from the send) p50 {ttft_sent:.2} ms vs llama.cpp prompt eval {server_prompt:.2} ms"
    );
    assert!(
        tpot >= 0.8 * server_tpot && tpot <= 3.0 * server_tpot + 10.0,
        "tpot {tpot} ms against the server's {server_tpot} ms per token\n{ctx}"
    );
    assert!(
        ttft_sent >= 0.8 * server_prompt,
        "ttft {ttft_sent} ms before the prompt was evaluated ({server_prompt} ms)\n{ctx}"
    );
}

/// Over HTTP/2 (h2c; nginx in front of the server, passing each chunk on as it comes), an LLM
/// step's tokens are read and timed as over HTTP/1.1: 16 an answer, 15 gaps, one first token.
/// Before, an HTTP/2 answer was read whole: no token timed.
#[test]
fn tokens_are_timed_over_http2() {
    if let Some(why) = unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let _cpu = exclusive();
    let server = Llama::start(&LlamaOptions::default());
    let proxy = perfops_testkit::nginx_h2_streaming(server.addr(), false);
    let wd = Workdir::new("llm-h2c");
    let steps = "      - { name: ask, openai: chat, model: tiny, messages: [ { role: user, content: \"hello ${seq}\" } ], max_tokens: 16, params: { temperature: 0 } }\n";
    let run = Run::new(&wd, &format!("h2c://{}", proxy.addr()), steps, 2, 2, "[ \"errors < 1%\" ]");
    let ask = run.step("ask");
    let ctx = format!("{ask:#}\n{}\nserver log tail:\n{}", run.context(), tail(&server.log_text()));
    let answered = count(&ask, "/completed");
    assert!(answered >= 3 && count(&ask, "/failed") == 0, "{ctx}");
    assert_eq!(count(&ask, "/tokens_out"), 16 * answered, "{ctx}");
    assert_eq!(count(&ask, "/ttft_ms/count"), answered, "one first token per answer\n{ctx}");
    assert_eq!(count(&ask, "/itl_ms/count"), 15 * answered, "fifteen gaps per answer\n{ctx}");
    assert_eq!((num(&ask, "/events/min"), num(&ask, "/events/max")), (19.0, 19.0), "{ctx}");
    let log = std::fs::read_to_string(proxy.dir().join("access.log")).unwrap_or_default();
    assert!(log.lines().all(|l| l == "HTTP/2.0 200") && log.lines().count() as u64 >= answered, "{log}\n{ctx}");
}

/// `perfops limit` under a TTFT/ITL SLO finds the highest rate whose time to first token
/// holds (the goodput): the server answers one request at a time, so above its rate the
/// requests queue and their first token comes late. Bounded: at most 5 attempts of 3 s.
///
/// The bound is 100 ms: alone, a first token comes in 6-17 ms (p95), and a queue of three
/// answers passes 100 ms. With 300 ms a CI run's 32/s (just over the server's rate) queued to a
/// p95 of 267 ms: that stage failed on its rate alone, and no stage was judged on its TTFT.
#[test]
fn limit_finds_the_goodput_under_a_ttft_slo() {
    if let Some(why) = unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let _cpu = exclusive();
    let server = Llama::start(&LlamaOptions::default());
    let wd = Workdir::new("llm-limit");
    let yaml = format!(
        "name: llm-goodput\ntarget: {}\ndefaults: {{ timeout: 10s }}\nflows:\n  chat:\n    steps:\n      - {{ name: ask, openai: chat, model: tiny, messages: [ {{ role: user, content: \"hello ${{seq}}\" }} ], max_tokens: 16, params: {{ temperature: 0 }} }}\nload:\n  stages: [ {{ rate: 4, hold: 3s }} ]\nslo: [ \"ttft p95 < 100ms\", \"itl p99 < 60ms\", \"errors < 1%\" ]\n",
        server.url()
    );
    let file = wd.scenario("llm.yaml", &yaml);
    let args =
        ["--from", "4", "--hold", "3s", "--cooldown", "2s", "--attempts", "5", "--max", "64", "--wait-in-flight"];
    let out = wd.spawn("limit", &file, &args, |_| {}).wait(RUN_LIMIT * 4);
    let dir = wd.result_dir(&out);
    let text = std::fs::read_to_string(dir.join("summary.json")).expect("summary.json");
    let s: Value = serde_json::from_str(&text).expect("summary.json is JSON");
    let ctx = format!("{:#}\nstderr:\n{}", s["verdict"], out.stderr);
    let capacity = s.pointer("/verdict/capacity_rps").and_then(Value::as_f64).unwrap_or(0.0);
    eprintln!("goodput: {capacity}/s x 16 tokens = {} output tokens/s; {}", capacity * 16.0, s["verdict"]["headline"]);
    assert!(capacity >= 2.0, "the server holds a few answers a second\n{ctx}");
    // Some rate above it broke the time to first token: the requests queued.
    assert!(text.contains("ttft p95 < 100ms (measured"), "no stage was judged on its TTFT\n{ctx}");
}

/// `perfops sweep` of an LLM step gives each level's tokens per second beside its throughput:
/// every answer's 16 tokens over the level's seconds (llama-cpp-python gives no prompt tokens in
/// a stream: 0), in the summary, the terminal's table and the summary's schema. Bounded: two
/// levels of 2 s.
#[test]
fn sweep_gives_tokens_per_second_per_level() {
    if let Some(why) = unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let _cpu = exclusive();
    let server = Llama::start(&LlamaOptions::default());
    let wd = Workdir::new("llm-sweep");
    let yaml = format!(
        "name: llm-sweep\ntarget: {}\ndefaults: {{ timeout: 10s }}\nflows:\n  chat:\n    steps:\n      - {{ name: ask, openai: chat, model: tiny, messages: [ {{ role: user, content: \"hello ${{seq}}\" }} ], max_tokens: 16, params: {{ temperature: 0 }} }}\nload:\n  stages: [ {{ rate: 1, hold: 1s }} ]\n",
        server.url()
    );
    let file = wd.scenario("llm.yaml", &yaml);
    let out = wd
        .spawn("sweep", &file, &["--concurrency", "1,2", "--hold", "2s", "--wait-in-flight"], |_| {})
        .wait(RUN_LIMIT * 2);
    let dir = wd.result_dir(&out);
    let text = std::fs::read_to_string(dir.join("summary.json")).expect("summary.json");
    let s: Value = serde_json::from_str(&text).expect("summary.json is JSON");
    let ctx = format!("{:#}\nstdout:\n{}\nstderr:\n{}", s["sweep"], out.stdout, out.stderr);
    let levels = s.pointer("/sweep/levels").and_then(Value::as_array).expect("levels");
    assert_eq!(levels.len(), 2, "{ctx}");
    let stages = s["stages"].as_array().expect("stages");
    for (l, st) in levels.iter().zip(stages) {
        // Every answer of the level: 16 tokens, over the level's seconds.
        let answered = count(st, "/completed");
        assert!(answered > 0 && num(l, "/throughput") > 0.0, "{ctx}");
        assert_eq!(count(st, "/tokens_out"), 16 * answered, "{st:#}\n{ctx}");
        let want = (16 * answered) as f64 / num(st, "/duration_s");
        let tokens = num(l, "/tokens_out_per_s");
        assert!((tokens - want).abs() <= 1e-6 * want, "{tokens} tokens out/s, want {want}\n{ctx}");
        assert_eq!(num(l, "/tokens_in_per_s"), 0.0, "no usage in the stream\n{ctx}");
    }
    assert!(out.stdout.contains("tokens out/s"), "{ctx}");
    let schema: Value =
        serde_json::from_str(include_str!("../../../schema/summary.schema.json")).expect("the schema is JSON");
    let errors = perfops_testkit::schema::errors(&schema, &s);
    assert!(errors.is_empty(), "the summary does not match its schema:\n{}", errors.join("\n"));
}

/// The last lines of a log, for a failure's message.
fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}
