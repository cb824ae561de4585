//! gRPC end to end (#14): the real binary against a gRPC server of another
//! implementation (Debian's python3-grpcio, gRPC's C core), the `.proto`
//! compiled at run time; and against grpc-go with server reflection, no
//! `.proto` at all. Each run is a few hundred calls on loopback.

// A skipped test (no Go to build the reflection server) says why on stderr.
#![allow(clippy::print_stderr)]

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{RUN_LIMIT, Workdir, quick, shared};
use perfops_testkit::grpc::{ECHO_PROTO, grpcio_echo, grpcio_echo_tls};
use perfops_testkit::grpc_go::{GoGrpc, Reflect, go_grpc_reflection};

/// The test service's `.proto`, written into `dir`.
fn proto(dir: &Workdir) -> PathBuf {
    let path = dir.path.join("echo.proto");
    std::fs::write(&path, ECHO_PROTO).expect("write echo.proto");
    path
}

/// A unary method that answers `UNAVAILABLE` to every 10th call: 10% of the
/// calls fail, counted by their gRPC status, the rest succeed; in the open
/// model against a 10 ms method the latency is at least the method's.
#[test]
fn unavailable_for_one_call_in_ten_is_counted_by_status() {
    let _cpu = shared();
    let server = grpcio_echo(10, Duration::from_millis(10));
    let dir = Workdir::new("grpc-unavailable");
    let proto = proto(&dir).display().to_string();
    let url = format!("grpc://127.0.0.1:{}/bench.Echo/Say", server.port(0));
    // (model flags, calls)
    let cases: [(&[&str], u64); 2] = [
        (&["-c", "4", "-n", "300"], 300),   // closed: 4 users
        (&["-r", "100", "-n", "200"], 200), // open: 100/s
    ];
    for (model, calls) in cases {
        let mut args =
            vec!["--proto", proto.as_str(), "-b", r#"{"text": "hi"}"#, "--max-errors", "15", "--workers", "1"];
        args.extend_from_slice(model);
        args.push(&url);
        let run = quick(&args);
        run.assert_exit(0);
        assert_eq!(run.u64("/completed"), calls, "{model:?}: every call answered\n{}", run.dump());
        assert_eq!(run.failures("grpc_unavailable"), calls / 10, "{model:?}: one in ten\n{}", run.dump());
        assert_eq!(run.u64("/failed"), calls / 10, "{model:?}: nothing else failed\n{}", run.dump());
        assert_eq!(run.u64("/succeeded"), calls - calls / 10, "{model:?}");
        assert!(run.f64("/latency_ok_ms/p50") >= 10.0, "{model:?}: a 10 ms method\n{}", run.dump());
        assert!(run.stdout.contains("(grpc_unavailable: "), "{model:?}: {}", run.stdout);
    }
}

/// A server-streaming method is read to its end (three messages); a call
/// the server refuses for want of metadata is `grpc_unauthenticated`, and
/// succeeds with it (`-H` carries metadata).
#[test]
fn server_streams_and_metadata() {
    let _cpu = shared();
    let server = grpcio_echo(0, Duration::ZERO);
    let dir = Workdir::new("grpc-stream");
    let proto = proto(&dir).display().to_string();
    let base = format!("grpc://127.0.0.1:{}/bench.Echo", server.port(0));
    // (method, extra flags, failure kind expected on every call, or none)
    let cases: [(&str, &[&str], Option<&str>); 3] = [
        ("Count", &[], None),                                    // a stream of 3, to its end
        ("Private", &[], Some("grpc_unauthenticated")),          // no token
        ("Private", &["-H", "authorization: Bearer t0k"], None), // metadata from -H
    ];
    for (method, extra, failing) in cases {
        let url = format!("{base}/{method}");
        let mut args =
            vec!["--proto", proto.as_str(), "-b", r#"{"text": "x"}"#, "-c", "2", "-n", "60", "--max-errors", "100"];
        args.extend_from_slice(extra);
        args.push(&url);
        let run = quick(&args);
        run.assert_exit(0);
        assert_eq!(run.u64("/completed"), 60, "{method} {extra:?}\n{}", run.dump());
        match failing {
            Some(kind) => assert_eq!(run.failures(kind), 60, "{method} {extra:?}\n{}", run.dump()),
            None => assert_eq!(run.u64("/failed"), 0, "{method} {extra:?}\n{}", run.dump()),
        }
    }
}

/// gRPC over TLS (`grpcs://`): ALPN h2 with grpcio's TLS, the certificate
/// accepted with `-k`, refused without it (a `tls` failure).
#[test]
fn grpcs_speaks_h2_over_tls() {
    let _cpu = shared();
    let dir = Workdir::new("grpcs");
    let server = grpcio_echo_tls(0, Duration::ZERO, &dir.path);
    let proto = proto(&dir).display().to_string();
    let url = format!("grpcs://127.0.0.1:{}/bench.Echo/Say", server.port(0));
    let run = quick(&["-k", "--proto", &proto, "-b", r#"{"text": "tls"}"#, "-c", "2", "-n", "100", &url]);
    run.assert_exit(0);
    assert_eq!((run.u64("/completed"), run.u64("/failed")), (100, 0), "{}", run.dump());
    let protocol = run.json()["protocol"].as_str().unwrap_or_default().to_string();
    assert!(protocol.starts_with("grpc over h2 (TLS)"), "the summary names gRPC and its h2: {protocol}");
    let refused = quick(&["--proto", &proto, "-n", "3", "--max-errors", "100", &url]);
    assert_eq!(refused.failures("tls"), 3, "an unknown certificate\n{}", refused.dump());
}

/// What cannot be called is a usage error before any load: a method the
/// `.proto` lacks, a message that does not fit its type, no `.proto` and no
/// server to ask for its descriptors.
#[test]
fn bad_methods_and_messages_are_usage_errors() {
    let _cpu = shared();
    let dir = Workdir::new("grpc-usage");
    let proto = proto(&dir).display().to_string();
    // (URL path, flags, stderr contains)
    let cases: [(&str, Vec<&str>, &str); 4] = [
        ("bench.Echo/Shout", vec!["--proto", &proto], "has no method `Shout`"),
        // A file that is not there is said so (not "is not in any include path").
        ("bench.Echo/Say", vec!["--proto", "/nonexistent/echo.proto"], "echo.proto: cannot read it: No such file"),
        ("bench.Echo/Say", vec!["--proto", &proto, "-b", r#"{"text": 5}"#], "does not fit bench.Msg"),
        // No --proto: the server's reflection is asked, and nobody listens there.
        ("bench.Echo/Say", vec![], "by reflection: Connection refused"),
    ];
    for (path, flags, want) in cases {
        let url = format!("grpc://127.0.0.1:9/{path}");
        let mut args = flags.clone();
        args.extend(["-n", "1"]);
        args.push(&url);
        let run = quick(&args);
        run.assert_exit(2);
        assert!(run.stderr.contains(want), "{path} {flags:?}: {}", run.stderr);
    }
}

/// `check` compiles a scenario's `.proto` files as `run` does: the example
/// passes; a method its `.proto` lacks is an input error (exit 2) that names it.
#[test]
fn check_compiles_the_proto_files() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/grpc.yaml");
    let out = common::spawn_perfops(&["check", example], |_| {}).wait(RUN_LIMIT);
    out.assert_exit(0);
    let dir = Workdir::new("grpc-check");
    proto(&dir);
    let scenario = dir.scenario(
        "bad.yaml",
        "target: grpc://127.0.0.1:1\nflows: { a: { steps: [ { grpc: bench.Echo/Shout, proto: echo.proto } ] } }\nload: { stages: [ { rate: 1, hold: 1s } ] }\n",
    );
    let out = common::spawn_perfops(&["check", &scenario.display().to_string()], |_| {}).wait(RUN_LIMIT);
    out.assert_exit(2);
    assert!(out.stderr.contains("has no method `Shout`"), "{}", out.stderr);
}

/// A scenario of gRPC steps: setup saves from an answer's message, a flow
/// sends it as metadata, checks `grpc_status` and a field of the answer
/// that says the deadline the server saw (`grpc-timeout` from
/// `defaults.timeout`).
#[test]
fn a_scenario_of_grpc_steps_saves_sends_metadata_and_checks() {
    let _cpu = shared();
    let server = grpcio_echo(0, Duration::ZERO);
    let dir = Workdir::new("grpc-scenario");
    proto(&dir);
    let scenario = dir.scenario(
        "grpc.yaml",
        &format!(
            r#"name: grpc
target: grpc://127.0.0.1:{}
defaults: {{ timeout: 5s }}
setup:
  - {{ name: token, grpc: bench.Echo/Say, proto: echo.proto, message: {{ text: "Bearer t0k" }}, save: {{ token: $.text }} }}
flows:
  main:
    steps:
      - name: private
        grpc: bench.Echo/Private
        proto: echo.proto
        message: {{ text: "call ${{seq}}" }}
        metadata: {{ authorization: "${{token}}" }}
        expect: {{ grpc_status: OK }}
      - name: deadline
        grpc: bench.Echo/Deadline
        proto: [ echo.proto ]
        message: {{ text: d }}
        expect: {{ grpc_status: [OK], json: {{ "$.n": "4" }} }}
load:
  stages: [ {{ rate: 50, hold: 2s }} ]
slo: [ "errors < 1%" ]
"#,
            server.port(0)
        ),
    );
    let out = dir.spawn("run", &scenario, &[], |_| {}).wait(RUN_LIMIT);
    out.assert_exit(0);
    let summary = dir.summary(&out);
    let text = summary.to_string();
    assert!(!text.contains("grpc_unauthenticated") && !text.contains("check_failed"), "{summary:#}");
    let series = std::fs::read_to_string(dir.result_dir(&out).join("series.jsonl")).expect("series.jsonl");
    let completed: u64 = series
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["completed"].as_u64())
        .sum();
    assert_eq!(completed, 200, "100 arrivals of two calls each\n{series}");
}

/// #14, point 4: a `run` of a gRPC step against a server that sheds every
/// 5th call with `UNAVAILABLE`: `summary.json` names the protocol the step
/// spoke and the failure kind by its status, and so do the report and the
/// end-of-run text.
#[test]
fn a_run_names_grpc_and_its_unavailable_calls() {
    let _cpu = shared();
    let server = grpcio_echo(5, Duration::ZERO);
    let dir = Workdir::new("grpc-named");
    proto(&dir);
    let scenario = dir.scenario(
        "named.yaml",
        &format!(
            r#"name: grpc-named
target: grpc://127.0.0.1:{}
flows:
  main:
    steps:
      - {{ name: say, grpc: bench.Echo/Say, proto: echo.proto, message: {{ text: "hi ${{seq}}" }} }}
load:
  stages: [ {{ rate: 50, hold: 2s }} ]
slo: [ "errors < 50%" ]
"#,
            server.port(0)
        ),
    );
    let out = dir.spawn("run", &scenario, &[], |_| {}).wait(RUN_LIMIT);
    out.assert_exit(0);
    let summary = dir.summary(&out);
    assert_eq!(
        summary["protocols"],
        serde_json::json!([{"protocol": "grpc over h2c", "steps": ["say"]}]),
        "{summary:#}"
    );
    let unavailable = summary["total"]["failures"]["grpc_unavailable"].as_u64().unwrap_or(0);
    assert_eq!(unavailable, 20, "one call in five of 100: {summary:#}");
    assert_eq!(summary["steps"][0]["failures"]["grpc_unavailable"].as_u64(), Some(20), "{summary:#}");
    assert!(out.stdout.contains("protocol: grpc over h2c"), "{}", out.stdout);
    assert!(out.stdout.contains("grpc_unavailable 20"), "the stage table's top failures: {}", out.stdout);
    let report = std::fs::read_to_string(dir.result_dir(&out).join("report.html")).expect("report.html");
    assert!(report.contains("grpc over h2c"), "the report's header names the protocol");
    assert!(report.contains("grpc_unavailable 20"), "the report's steps table names the kind");
}

/// grpc-go's reflection server, or a skip when this machine has no Go
/// (`scripts/test` requires it, so CI runs these).
fn reflecting(reflect: Reflect, unavailable_every: u32) -> Option<GoGrpc> {
    let server = go_grpc_reflection(reflect, unavailable_every);
    if server.is_none() {
        eprintln!("skipped: no `go` on the PATH to build the gRPC reflection server (scripts/test requires Go)");
    }
    server
}

/// #14, point 2: without `--proto`, `quick` asks the server's reflection
/// (grpc-go's, v1 and v1alpha; or v1alpha alone, the fallback) for the
/// service's descriptors, a file and the file it imports, and then runs as
/// with a `.proto`: every call answered, the server's UNAVAILABLE counted
/// by status, a server stream read to its end.
#[test]
fn quick_without_proto_asks_the_servers_reflection() {
    let _cpu = shared();
    for reflect in [Reflect::Both, Reflect::V1Alpha] {
        let Some(server) = reflecting(reflect, 5) else { return };
        let url = format!("grpc://127.0.0.1:{}/bench.Echo/Say", server.port());
        let run = quick(&["-b", r#"{"text": "hi", "n": 7}"#, "-c", "2", "-n", "100", "--max-errors", "30", &url]);
        run.assert_exit(0);
        assert_eq!(run.u64("/completed"), 100, "{reflect:?}: {}", run.dump());
        assert_eq!(run.failures("grpc_unavailable"), 20, "{reflect:?}: one in five\n{}", run.dump());
        assert_eq!(run.u64("/failed"), 20, "{reflect:?}: nothing else failed\n{}", run.dump());
        let stream = format!("grpc://127.0.0.1:{}/bench.Echo/Count", server.port());
        let run = quick(&["-b", r#"{"text": "s"}"#, "-c", "1", "-n", "10", &stream]);
        run.assert_exit(0);
        assert_eq!((run.u64("/completed"), run.u64("/failed")), (10, 0), "{reflect:?}: {}", run.dump());
    }
}

/// A scenario's `grpc:` step without `proto:` runs from reflection, checks
/// a field of the answer (decoded with the reflected descriptors) and saves
/// it; `check` accepts such a step without contacting any server.
#[test]
fn a_scenario_step_without_proto_runs_from_reflection() {
    let _cpu = shared();
    let Some(server) = reflecting(Reflect::Both, 0) else { return };
    let dir = Workdir::new("grpc-reflect-scenario");
    let scenario = dir.scenario(
        "reflect.yaml",
        &format!(
            r#"name: reflect
target: grpc://127.0.0.1:{}
setup:
  - {{ name: first, grpc: bench.Echo/Say, message: {{ text: "saved" }}, save: {{ word: $.text }} }}
flows:
  main:
    steps:
      - name: say
        grpc: bench.Echo/Say
        message: {{ text: "${{word}} ${{seq}}", n: 3 }}
        expect: {{ grpc_status: OK, json: {{ "$.n": "3" }} }}
load:
  stages: [ {{ rate: 40, hold: 1s }} ]
slo: [ "errors < 1%" ]
"#,
            server.port()
        ),
    );
    let check = common::spawn_perfops(&["check", &scenario.display().to_string()], |_| {}).wait(RUN_LIMIT);
    check.assert_exit(0);
    let out = dir.spawn("run", &scenario, &[], |_| {}).wait(RUN_LIMIT);
    out.assert_exit(0);
    let summary = dir.summary(&out);
    assert_eq!(summary["total"]["failed"], 0, "{summary:#}");
    assert_eq!(summary["total"]["completed"], 40, "{summary:#}");
    assert_eq!(summary["protocols"][0]["protocol"], "grpc over h2c", "{summary:#}");
}

/// What reflection cannot give is one line on stderr, exit 2, before any
/// load, with the way out: a server without reflection (grpc-go's without
/// it, and python3-grpcio's, which has none), a service it does not know,
/// a method the service lacks, a server that is not there.
#[test]
fn reflection_failures_are_one_line_usage_errors() {
    let _cpu = shared();
    let Some(with) = reflecting(Reflect::Both, 0) else { return };
    let Some(without) = reflecting(Reflect::None, 0) else { return };
    let grpcio = grpcio_echo(0, Duration::ZERO);
    let at = |port: u16, path: &str| format!("grpc://127.0.0.1:{port}/{path}");
    // (URL, what stderr says)
    let cases = [
        (at(without.port(), "bench.Echo/Say"), "does not serve gRPC reflection (grpc.reflection.v1 nor v1alpha)"),
        (at(grpcio.port(0), "bench.Echo/Say"), "does not serve gRPC reflection"),
        (at(with.port(), "bench.Nope/Say"), "does not know service `bench.Nope` by reflection (NOT_FOUND"),
        (at(with.port(), "bench.Echo/Shout"), "service `bench.Echo` has no method `Shout` (it has: Say, Count)"),
        (at(9, "bench.Echo/Say"), "cannot ask the server at 127.0.0.1:9 for `bench.Echo` by reflection"),
    ];
    for (url, want) in cases {
        let run = quick(&["-n", "1", &url]);
        run.assert_exit(2);
        let lines: Vec<&str> = run.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{url}: one line\n{}", run.stderr);
        assert!(lines[0].contains(want), "{url}: {}", run.stderr);
        if url.contains(":9/") {
            // Nothing listens: a .proto file would not help.
            assert!(lines[0].ends_with("is the server running there?"), "{url}: {}", run.stderr);
        } else if !want.contains("no method") {
            assert!(lines[0].ends_with("add `proto: FILE` to the step (quick: --proto FILE)"), "{url}: {}", run.stderr);
        }
    }
}

/// #14, client and bidirectional streaming: a step's `message:` list is
/// the call's stream of messages, sent in order before its side ends; the
/// answer is read to its end. `Collect` answers how many messages it read
/// (3: every one arrived, none merged or lost); `Chat` echoes each, and
/// its first answer is the first message. One call is one request.
#[test]
fn client_and_bidirectional_streams_send_the_message_list() {
    let _cpu = shared();
    let server = grpcio_echo(0, Duration::ZERO);
    let dir = Workdir::new("grpc-streams");
    proto(&dir);
    let scenario = dir.scenario(
        "streams.yaml",
        &format!(
            r#"name: streams
target: grpc://127.0.0.1:{}
flows:
  main:
    steps:
      - name: collect
        grpc: bench.Echo/Collect
        proto: echo.proto
        message: [ {{ text: "a ${{seq}}" }}, {{ text: b }}, {{ text: c }} ]
        expect: {{ grpc_status: OK, json: {{ "$.n": "3" }} }}
      - name: chat
        grpc: bench.Echo/Chat
        proto: echo.proto
        message: [ {{ text: first }}, {{ text: "second ${{seq}}" }} ]
        expect: {{ grpc_status: OK, json: {{ "$.text": first }} }}
load:
  stages: [ {{ rate: 30, hold: 1s }} ]
slo: [ "errors < 1%" ]
"#,
            server.port(0)
        ),
    );
    let out = dir.spawn("run", &scenario, &[], |_| {}).wait(RUN_LIMIT);
    out.assert_exit(0);
    let summary = dir.summary(&out);
    for (i, step) in ["collect", "chat"].iter().enumerate() {
        let s = &summary["steps"][i];
        assert_eq!(s["name"], *step, "{summary:#}");
        assert_eq!((s["completed"].as_u64(), s["failed"].as_u64()), (Some(30), Some(0)), "{step}: {summary:#}");
    }
    // `quick` sends a list the same way.
    let proto = dir.path.join("echo.proto").display().to_string();
    let url = format!("grpc://127.0.0.1:{}/bench.Echo/Collect", server.port(0));
    let run = quick(&["--proto", &proto, "-b", r#"[{"text": "x"}, {"text": "y"}]"#, "-c", "2", "-n", "20", &url]);
    run.assert_exit(0);
    assert_eq!((run.u64("/completed"), run.u64("/failed")), (20, 0), "{}", run.dump());
}
