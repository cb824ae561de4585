//! Telemetry parsers against real texts: Prometheus expositions (a node_exporter excerpt, a Puma
//! exporter excerpt, two scrapes of the perfops demo's /metrics), and `/proc`, cgroup and
//! sock_diag captures from a Linux 6.18 x86_64 host, among them a listen socket with backlog 7
//! whose accept queue was filled. And no input makes any of the parsers panic (issue #4: "own
//! parser for the text exposition format (fuzzed: never panics)").

use std::net::SocketAddr;
use std::time::Duration;

use perfops_core::telemetry::procfs::{
    Cgroup2Mount, CgroupCpuStat, TCP_LISTEN, parse_cgroup_cpu_stat, parse_cgroup2_mount, parse_cpu_list, parse_cpu_max,
    parse_net_tcp, parse_netstat, parse_pid_cgroup, parse_pid_stat, parse_pid_status, parse_stat,
};
use perfops_core::telemetry::prometheus::{Family, Kind, SeriesKey, gauges, parse, parse_lenient, rates};
use perfops_core::telemetry::sockdiag::{DiagError, IpFamily, listen_dump_request, parse_dump};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// Prometheus
// ---------------------------------------------------------------------------------------------

/// The value of the series whose key displays as `key`.
fn value(families: &[Family], key: &str) -> Option<f64> {
    families.iter().flat_map(|f| &f.samples).find(|s| SeriesKey::of(s).to_string() == key).map(|s| s.value)
}

fn family<'a>(families: &'a [Family], name: &str) -> &'a Family {
    families.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("no family {name}"))
}

fn lookup(pairs: &[(SeriesKey, f64)], key: &str) -> Option<f64> {
    pairs.iter().find(|(k, _)| k.to_string() == key).map(|&(_, v)| v)
}

#[test]
fn node_exporter_excerpt() {
    let fams = parse(NODE_EXPORTER).unwrap();
    let kinds: Vec<(&str, Kind, usize)> = fams.iter().map(|f| (f.name.as_str(), f.kind, f.samples.len())).collect();
    assert_eq!(
        kinds,
        vec![
            ("go_gc_duration_seconds", Kind::Summary, 7), // 5 quantiles, _sum and _count in one family
            ("go_goroutines", Kind::Gauge, 1),
            ("node_cpu_seconds_total", Kind::Counter, 4),
            ("node_filesystem_avail_bytes", Kind::Gauge, 2),
            ("node_load1", Kind::Gauge, 1),
            ("node_netstat_TcpExt_ListenOverflows", Kind::Untyped, 1), // node_exporter types these untyped
            ("node_network_receive_bytes_total", Kind::Counter, 2),
            ("node_uname_info", Kind::Gauge, 1),
            ("process_start_time_seconds", Kind::Gauge, 1),
        ]
    );
    let cases: &[(&str, f64)] = &[
        (r#"go_gc_duration_seconds{quantile="0.5"}"#, 4.3e-05), // scientific notation, negative exponent
        ("go_gc_duration_seconds_count", 4623.0),               // summary count joins its family
        (r#"node_cpu_seconds_total{cpu="1",mode="user"}"#, 2667.99), // labels displayed sorted
        (r#"node_filesystem_avail_bytes{device="/dev/vda1",fstype="ext4",mountpoint="/"}"#, 4.2314457088e+10),
        ("process_start_time_seconds", 1.79532085e+09), // e+ exponent
        (
            r##"node_uname_info{domainname="(none)",machine="x86_64",nodename="vm",release="6.18.44-fc-v595",sysname="Linux",version="#1 SMP PREEMPT_DYNAMIC @0"}"##,
            1.0,
        ), // `#` and `@` inside a label value
    ];
    for (key, want) in cases {
        assert_eq!(value(&fams, key), Some(*want), "{key}");
    }
    assert_eq!(family(&fams, "node_load1").help.as_deref(), Some("1m load average."));
}

#[test]
fn puma_exporter_excerpt() {
    // A Ruby exporter: TYPE before HELP, floats printed as `3.0`, several Puma workers by `index`.
    let fams = parse(PUMA).unwrap();
    let g = gauges(&fams);
    let cases: &[(&str, Option<f64>)] = &[
        (r#"puma_backlog{index="1"}"#, Some(3.0)), // requests waiting in worker 1's queue
        (r#"puma_running{index="0"}"#, Some(5.0)), // threads spawned
        (r#"puma_pool_capacity{index="1"}"#, Some(0.0)), // no thread free: pool-bound
        ("puma_workers", Some(2.0)),               // no labels
        (r#"rails_requests_total{action="index",controller="orders",status="200"}"#, None), // counters are rates
    ];
    for (key, want) in cases {
        assert_eq!(lookup(&g, key), *want, "{key}");
    }
    assert_eq!(
        family(&fams, "puma_backlog").help.as_deref(),
        Some("Number of established but unaccepted connections in the backlog")
    );
    assert_eq!(family(&fams, "rails_request_duration_seconds").samples.len(), 6, "4 buckets, _sum, _count");
}

#[test]
fn demo_scrapes_become_rates_and_gauges() {
    // Two real scrapes of `perfops demo --model threads`, taken 2 s apart on the engine's clock.
    let prev = parse(DEMO_SCRAPE_1).unwrap();
    let next = parse(DEMO_SCRAPE_2).unwrap();
    let r = rates(&prev, 10.0, &next, 12.0);
    let cases: &[(&str, Option<f64>)] = &[
        (r#"demo_requests_total{code="200",path="/orders"}"#, Some((25.0 - 5.0) / 2.0)),
        (r#"demo_requests_total{code="401",path="/orders"}"#, Some(0.0)), // unchanged counter: rate 0
        // Born between the scrapes (the demo renders a series from its first request): from 0.
        (r#"demo_requests_total{code="200",path="/metrics"}"#, Some(0.5)),
        (r#"demo_requests_total{code="404",path="other"}"#, Some(0.5)),
        ("demo_connections_accepted_total", Some((31.0 - 9.0) / 2.0)),
        (r#"demo_request_duration_seconds_count{path="/orders"}"#, Some(10.0)), // histogram _count
        (r#"demo_request_duration_seconds_sum{path="/orders"}"#, Some((0.563853 - 0.11855) / 2.0)),
        ("process_cpu_seconds_total", Some((0.123521 - 0.082094) / 2.0)), // CPU cores used
        (r#"demo_request_duration_seconds_bucket{le="0.025",path="/orders"}"#, None), // buckets left out
        ("demo_workers_busy", None),                                      // a gauge has no rate
    ];
    for (key, want) in cases {
        match (lookup(&r, key), want) {
            (Some(got), Some(want)) => assert!((got - want).abs() < 1e-9, "{key}: {got} != {want}"),
            (got, want) => assert_eq!(got, *want, "{key}"),
        }
    }
    let g = gauges(&next);
    let cases: &[(&str, f64)] = &[
        (r#"demo_info{model="threads"}"#, 1.0),
        ("demo_workers_busy", 1.0),
        ("demo_workers_max", 10.0),
        ("demo_queue_depth", 0.0),
        ("demo_connections_open", 1.0),
    ];
    for (key, want) in cases {
        assert_eq!(lookup(&g, key), Some(*want), "{key}");
    }
    assert_eq!(g.len(), 5, "only the gauges: {g:?}");
    let hist = family(&next, "demo_request_duration_seconds");
    assert_eq!((hist.kind, hist.samples.len()), (Kind::Histogram, 4 * 16), "4 routes x (14 buckets, _sum, _count)");
}

#[test]
fn rate_edge_cases() {
    let at = |text: &str| parse(text).unwrap();
    // prev, next, prev_at_s, next_at_s, the rates.
    type Case<'a> = (&'a str, &'a str, f64, f64, &'a [(&'a str, f64)]);
    let cases: &[Case] = &[
        // A restart: the counter went down, so it counted from 0 again.
        ("# TYPE c counter\nc 100\n", "# TYPE c counter\nc 4\n", 0.0, 2.0, &[("c", 2.0)]),
        // A family the previous scrape did not have: no rate until the next scrape.
        ("# TYPE a counter\na 1\n", "# TYPE a counter\na 3\n# TYPE b counter\nb 10\n", 0.0, 1.0, &[("a", 2.0)]),
        // Time did not advance (or went back): nothing.
        ("# TYPE c counter\nc 1\n", "# TYPE c counter\nc 2\n", 5.0, 5.0, &[]),
        ("# TYPE c counter\nc 1\n", "# TYPE c counter\nc 2\n", 5.0, 4.0, &[]),
        // A NaN on either side is neither a count nor a reset: no rate. +Inf - +Inf is NaN: none.
        ("# TYPE c counter\nc NaN\n", "# TYPE c counter\nc 2\n", 0.0, 1.0, &[]),
        ("# TYPE c counter\nc 2\n", "# TYPE c counter\nc NaN\n", 0.0, 1.0, &[]),
        ("# TYPE c counter\nc +Inf\n", "# TYPE c counter\nc +Inf\n", 0.0, 1.0, &[]),
        // Summary: _sum and _count are counters, quantiles are not.
        (
            "# TYPE s summary\ns{quantile=\"0.99\"} 0.2\ns_sum 10\ns_count 100\n",
            "# TYPE s summary\ns{quantile=\"0.99\"} 0.3\ns_sum 16\ns_count 130\n",
            0.0,
            3.0,
            &[("s_sum", 2.0), ("s_count", 10.0)],
        ),
        // Untyped and gauges never have rates, even named like counters.
        ("x_total 1\n# TYPE g gauge\ng 1\n", "x_total 5\n# TYPE g gauge\ng 9\n", 0.0, 1.0, &[]),
    ];
    for (prev, next, t0, t1, want) in cases {
        let got: Vec<(String, f64)> =
            rates(&at(prev), *t0, &at(next), *t1).into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        let want: Vec<(String, f64)> = want.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        assert_eq!(got, want, "{prev:?} -> {next:?}");
    }
}

#[test]
fn sample_lines() {
    type Want<'a> = (&'a str, &'a [(&'a str, &'a str)], f64, Option<i64>);
    let cases: &[(&str, Want)] = &[
        ("a 1", ("a", &[], 1.0, None)),                                                 // minimal
        ("a{} 1", ("a", &[], 1.0, None)),                                               // empty label set
        ("a{b=\"c\",} 1", ("a", &[("b", "c")], 1.0, None)),                             // trailing comma
        ("a { b = \"c\" , d=\"e\" } 1", ("a", &[("b", "c"), ("d", "e")], 1.0, None)),   // blanks everywhere
        ("a{b=\"c\"}1", ("a", &[("b", "c")], 1.0, None)),                               // no blank before the value
        ("a:b_c:9 -2.5", ("a:b_c:9", &[], -2.5, None)),                                 // colons and digits in names
        ("_a 1.5e-3", ("_a", &[], 0.0015, None)),                                       // scientific
        ("a 1E6", ("a", &[], 1e6, None)),                                               // capital E
        ("a .5", ("a", &[], 0.5, None)),                                                // no leading digit
        ("a +Inf", ("a", &[], f64::INFINITY, None)),                                    // +Inf
        ("a -Inf", ("a", &[], f64::NEG_INFINITY, None)),                                // -Inf
        ("a Inf", ("a", &[], f64::INFINITY, None)),                                     // unsigned, as Go accepts
        ("a 1 1395066363000", ("a", &[], 1.0, Some(1_395_066_363_000))),                // timestamp
        ("a +Inf -3982045", ("a", &[], f64::INFINITY, Some(-3_982_045))),               // before the epoch
        ("a\t1\t2", ("a", &[], 1.0, Some(2))),                                          // tabs
        ("   a 1", ("a", &[], 1.0, None)),                                              // leading blanks
        ("a 1 \t", ("a", &[], 1.0, None)),                                              // trailing blanks
        ("a 7\r", ("a", &[], 7.0, None)),                                               // CRLF line ending
        (r#"a{p="C:\\DIR\\F.TXT"} 1"#, ("a", &[("p", r"C:\DIR\F.TXT")], 1.0, None)),    // escaped backslash
        (r#"a{e="say \"hi\"\nbye"} 1"#, ("a", &[("e", "say \"hi\"\nbye")], 1.0, None)), // quote, newline
        ("a{v=\"é ✓ 日本\"} 1", ("a", &[("v", "é ✓ 日本")], 1.0, None)),                // UTF-8 values
        ("a{v=\"}{,=# \"} 1", ("a", &[("v", "}{,=# ")], 1.0, None)),                    // syntax inside a value
        ("a{le=\"+Inf\",quantile=\"x\"} 3", ("a", &[("le", "+Inf"), ("quantile", "x")], 3.0, None)), // untyped: free
    ];
    for (line, (name, labels, value, ts)) in cases {
        let fams = parse(line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        let s = &fams[0].samples[0];
        let want: Vec<(String, String)> = labels.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        assert_eq!((s.name.as_str(), &s.labels, s.timestamp_ms), (*name, &want, *ts), "{line:?}");
        assert_eq!(s.value.to_bits(), value.to_bits(), "{line:?}");
    }
    let nan = parse("a NaN").unwrap();
    assert!(nan[0].samples[0].value.is_nan(), "NaN");
}

#[test]
fn comments_help_and_type() {
    let text = "# just a comment\n#\n#TYPE\n# HELP\n# TYPE x\n# HELP a Line one\\nwith \\\\ and \\\"q\\\" and C:\\dir\n\
                # TYPE a GAUGE\n\n   # indented comment\na 1\n";
    let fams = parse(text).unwrap();
    assert_eq!(fams.len(), 1, "comments and incomplete HELP/TYPE lines declare nothing: {fams:?}");
    assert_eq!(fams[0].help.as_deref(), Some("Line one\nwith \\ and \"q\" and C:\\dir"), "unknown escape kept");
    assert_eq!(fams[0].kind, Kind::Gauge, "type names in any case");
    // Declared but never observed (a histogram before its first request): kept, without samples.
    let fams = parse("# HELP h Latency.\n# TYPE h histogram\n").unwrap();
    assert_eq!((fams[0].kind, fams[0].samples.len()), (Kind::Histogram, 0));
}

#[test]
fn grouping_into_families() {
    // text, then each family's name, kind and number of samples.
    type Case<'a> = (&'a str, &'a [(&'a str, Kind, usize)]);
    let cases: &[Case] = &[
        // Histogram: _bucket, _sum and _count join the TYPE'd family.
        (
            "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n",
            &[("h", Kind::Histogram, 4)],
        ),
        // Summary: _sum and _count join; a _bucket does not (its own untyped family).
        (
            "# TYPE s summary\ns{quantile=\"0.5\"} 1\ns_sum 3\ns_count 2\ns_bucket 1\n",
            &[("s", Kind::Summary, 3), ("s_bucket", Kind::Untyped, 1)],
        ),
        // A counter does not take _count: only histograms and summaries have suffixes.
        ("# TYPE c counter\nc 1\nc_count 1\n", &[("c", Kind::Counter, 1), ("c_count", Kind::Untyped, 1)]),
        // A family declared as counter with the _total in its name keeps it.
        ("# TYPE r_total counter\nr_total 5\n", &[("r_total", Kind::Counter, 1)]),
        // Samples of one family split by another: merged, as expfmt does.
        ("a 1\nb 2\na{x=\"y\"} 3\n", &[("a", Kind::Untyped, 2), ("b", Kind::Untyped, 1)]),
        // No TYPE line: untyped, one family per name.
        ("m_sum 1\nm_count 2\n", &[("m_sum", Kind::Untyped, 1), ("m_count", Kind::Untyped, 1)]),
    ];
    for (text, want) in cases {
        let fams = parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        let got: Vec<(&str, Kind, usize)> = fams.iter().map(|f| (f.name.as_str(), f.kind, f.samples.len())).collect();
        assert_eq!(&got, want, "{text:?}");
    }
}

#[test]
fn errors_name_their_line() {
    let cases: &[(&str, usize, &str)] = &[
        ("a{b=\"c\" 1", 1, "expected `,` or `}`"),                        // missing `}`
        ("a{b=c} 1", 1, "expected `\"`"),                                 // unquoted value
        ("a{b=\"c\\x\"} 1", 1, "invalid escape `\\x`"),                   // only \\ \" \n
        ("ok 1\na{b=\"c} 1", 2, "not closed"),                            // quote never closed
        ("a{b=\"1\",c=\"2\",b=\"3\"} 1", 1, "duplicate label `b`"),       // one name twice
        ("a{__name__=\"x\"} 1", 1, "reserved"),                           // as expfmt
        ("a{1b=\"x\"} 1", 1, "invalid label name"),                       // label names start with a letter
        ("a{b \"x\"} 1", 1, "expected `=`"),                              // no `=`
        ("a{b=\"x\"", 1, "expected `,` or `}`"),                          // line ends in the label set
        ("a{", 1, "not closed with `}`"),                                 // line ends after `{`
        ("\n\na", 3, "has no value"),                                     // blank lines count
        ("a one", 1, "expected a float"),                                 // not a number
        ("a 0x1F", 1, "expected a float"),                                // hex floats are refused, as in expfmt
        ("a 1_000", 1, "expected a float"),                               // so are underscores
        ("a 1 1.5", 1, "integer timestamp"),                              // timestamps are integer ms
        ("a 1 2 3", 1, "after the timestamp"),                            // one value, one timestamp
        ("{a=\"b\"} 1", 1, "needs a metric name"),                        // quoted UTF-8 names: not in 0.0.4
        ("9a 1", 1, "invalid metric name"),                               // names do not start with a digit
        ("# TYPE a countr", 1, "unknown metric type \"countr\""),         // typo
        ("# TYPE a counter\n# TYPE a gauge", 2, "second TYPE"),           // one TYPE per family
        ("a 1\n# TYPE a counter", 2, "after its samples"),                // TYPE first
        ("# HELP a x\n# HELP a y", 2, "second HELP"),                     // one HELP per family
        ("# HELP a{b} x", 1, "invalid metric name in a HELP line"),       // labels in a HELP line
        ("# TYPE h histogram\nh_bucket{le=\"fast\"} 1", 2, "`le` label"), // bounds are floats
        ("# TYPE s summary\ns{quantile=\"p99\"} 1", 2, "`quantile` label"), // so are quantiles
        ("# TYPE h histogram\nh_count 1\n# TYPE h_count gauge", 3, "second TYPE line for metric `h`"), // suffix resolves
    ];
    for (text, line, needle) in cases {
        let e = parse(text).expect_err(text);
        assert_eq!(e.line, *line, "{text:?}: {e}");
        assert!(e.message.contains(needle), "{text:?}: {e:?} should contain {needle:?}");
        assert!(e.to_string().starts_with(&format!("line {line}: ")), "{e}");
    }
}

#[test]
fn lenient_skips_bad_lines_and_keeps_the_rest() {
    let text = "# TYPE up gauge\nup 1\nDEBUG: scraped in 3ms\n# TYPE req counter\nreq{a=\"b\" 5\nreq{a=\"c\"} 6\n\
                # TYPE req gauge\n";
    let parsed = parse_lenient(text);
    let lines: Vec<usize> = parsed.warnings.iter().map(|w| w.line).collect();
    assert_eq!(lines, vec![3, 5, 7], "{:?}", parsed.warnings);
    assert_eq!(value(&parsed.families, "up"), Some(1.0));
    assert_eq!(value(&parsed.families, r#"req{a="c"}"#), Some(6.0));
    assert_eq!(family(&parsed.families, "req").kind, Kind::Counter, "the refused second TYPE changed nothing");
    assert!(parsed.families.iter().all(|f| f.name != "DEBUG"), "a refused line adds no family");
    assert_eq!(parse(text).unwrap_err(), parsed.warnings[0], "strict parse fails on the first");
}

#[test]
fn series_keys_display_sorted_and_escaped() {
    let cases: &[(&str, &str)] = &[
        ("a 1", "a"),                                                                 // no braces without labels
        ("a{} 1", "a"),                                                               // nor with an empty set
        ("a{z=\"1\",b=\"2\"} 1", "a{b=\"2\",z=\"1\"}"),                               // sorted by label name
        (r#"a{p="C:\\x",q="\"",n="l1\nl2"} 1"#, r#"a{n="l1\nl2",p="C:\\x",q="\""}"#), // escaped back
    ];
    for (line, want) in cases {
        let fams = parse(line).unwrap();
        assert_eq!(SeriesKey::of(&fams[0].samples[0]).to_string(), *want, "{line:?}");
    }
}

/// Render one sample the way a Prometheus client library does.
fn render(name: &str, labels: &[(String, String)], value: f64, ts: Option<i64>) -> String {
    let mut out = name.to_string();
    if !labels.is_empty() {
        let inner: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")))
            .collect();
        out.push_str(&format!("{{{}}}", inner.join(",")));
    }
    let v = match value {
        v if v.is_nan() => "NaN".to_string(),
        f64::INFINITY => "+Inf".to_string(),
        f64::NEG_INFINITY => "-Inf".to_string(),
        v => format!("{v:?}"),
    };
    out.push_str(&format!(" {v}"));
    if let Some(ts) = ts {
        out.push_str(&format!(" {ts}"));
    }
    out
}

/// A valid exposition, edited at random: what a truncated read, a buggy exporter or a proxy that
/// rewrites bodies produces.
fn mutated() -> impl Strategy<Value = String> {
    let seed: Vec<char> = [NODE_EXPORTER, PUMA, DEMO_SCRAPE_1].concat().chars().collect();
    let edit = (any::<prop::sample::Index>(), 0u8..5, 1usize..12, prop::sample::select(GRAMMAR_CHARS.to_vec()));
    prop::collection::vec(edit, 1..10).prop_map(move |edits| {
        let mut text = seed.clone();
        for (at, op, n, c) in edits {
            if text.is_empty() {
                break;
            }
            let i = at.index(text.len());
            let j = (i + n).min(text.len());
            match op {
                0 => drop(text.drain(i..j)),                                // delete a run
                1 => text.insert(i, c),                                     // insert a syntax character
                2 => text.splice(i..i, text[i..j].to_vec()).for_each(drop), // duplicate a run
                3 => text.truncate(i),                                      // cut short
                _ => text[i] = c,                                           // overwrite one
            }
        }
        text.into_iter().collect()
    })
}

const GRAMMAR_CHARS: &[char] =
    &['{', '}', '"', '\\', '=', ',', '#', ' ', '\t', '\n', '\r', 'n', 'e', '+', '-', '.', '0', '9', '_', ':', 'é', '✓'];

proptest! {
    #[test]
    fn prometheus_never_panics_on_any_string(text in any::<String>()) {
        let lenient = parse_lenient(&text);
        prop_assert_eq!(parse(&text).is_err(), !lenient.warnings.is_empty());
    }

    #[test]
    fn prometheus_never_panics_on_grammar_soup(text in "[a-z_:{}=\",# \\\\\\n\\t\\rNaIf0-9.eE+\\-é]{0,300}") {
        let parsed = parse_lenient(&text);
        let _ = gauges(&parsed.families);
        let _ = rates(&parsed.families, 0.0, &parsed.families, 1.0);
    }

    #[test]
    fn prometheus_never_panics_on_mutated_scrapes(text in mutated()) {
        let parsed = parse_lenient(&text);
        let before = parse_lenient(DEMO_SCRAPE_1).families;
        let _ = rates(&before, 0.0, &parsed.families, 2.0);
        let _ = gauges(&parsed.families);
        for w in &parsed.warnings {
            prop_assert!(w.line >= 1 && w.line <= text.split('\n').count());
        }
    }

    #[test]
    fn rendered_samples_parse_back(
        name in "[a-zA-Z_:][a-zA-Z0-9_:]{0,12}",
        labels in prop::collection::btree_map("[a-zA-Z_][a-zA-Z0-9_]{0,8}", any::<String>(), 0..4),
        value in any::<f64>(),
        ts in any::<Option<i64>>(),
    ) {
        let labels: Vec<(String, String)> = labels.into_iter().filter(|(k, _)| k != "__name__").collect();
        let line = render(&name, &labels, value, ts);
        let fams = parse(&line).map_err(|e| TestCaseError::fail(format!("{line:?}: {e}")))?;
        let s = &fams[0].samples[0];
        prop_assert_eq!(&s.name, &name);
        prop_assert_eq!(&s.labels, &labels);
        prop_assert_eq!(s.timestamp_ms, ts);
        prop_assert!(s.value.to_bits() == value.to_bits() || (s.value.is_nan() && value.is_nan()), "{} -> {}", value, s.value);
        prop_assert_eq!(SeriesKey::of(s), SeriesKey::new(name.clone(), labels.clone()));
    }
}

// ---------------------------------------------------------------------------------------------
// /proc and cgroup files
// ---------------------------------------------------------------------------------------------

#[test]
fn pid_stat() {
    type Want<'a> = (u32, &'a str, char, u64, u64, u64, u64, u64, u64);
    let cases: &[(&str, Want)] = &[
        // pid, comm, state, minflt, utime, stime, threads, vsize, rss (pages)
        (BASH_STAT, (27669, "bash", 'S', 8436, 2, 7, 1, 5_246_976, 993)), // an interactive shell
        (PYTHON_STAT, (3781, "python3", 'R', 2863, 4, 1, 4, 243_515_392, 3369)), // 3 threads + main, reading itself
        // A name with spaces and parentheses: split at the last `)`.
        (ODD_STAT, (3827, "x) (y z", 'S', 131, 0, 0, 1, 2_990_080, 426)),
        (KTHREADD_STAT, (2, "kthreadd", 'S', 0, 0, 0, 1, 0, 0)), // kernel thread: no memory
    ];
    for (text, (pid, comm, state, minflt, utime, stime, threads, vsize, rss)) in cases {
        let s = parse_pid_stat(text).unwrap();
        assert_eq!(
            (s.pid, s.comm.as_str(), s.state, s.minflt, s.utime_ticks, s.stime_ticks, s.num_threads),
            (*pid, *comm, *state, *minflt, *utime, *stime, *threads),
            "{comm}"
        );
        assert_eq!((s.vsize_bytes, s.rss_pages, s.cpu_ticks()), (*vsize, *rss, utime + stime), "{comm}");
    }
    assert_eq!(parse_pid_stat(PYTHON_STAT).unwrap().majflt, 1);
    assert_eq!(parse_pid_stat(BASH_STAT).unwrap().starttime_ticks, 626_601);
    // #11: the parent, by which a pre-forking server's workers are found under its master.
    let parents: Vec<u32> =
        [BASH_STAT, PYTHON_STAT, ODD_STAT, KTHREADD_STAT].iter().map(|t| parse_pid_stat(t).unwrap().ppid).collect();
    assert_eq!(parents, [27668, 3774, 3825, 0]);
    let bad: &[(&str, &str)] = &[
        ("", "no `(`"),                                                    // empty
        ("12 (x S 1 2", "no `)`"),                                         // cut inside the name
        ("12 (x) S 1 2 3", "expected at least 22"),                        // cut after it
        ("x (sh) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0", "pid"),   // not a pid
        ("1 (sh) S 1 1 1 0 -1 0 0 0 0 0 x 0 0 0 20 0 1 0 5 0 0", "utime"), // not a number
    ];
    for (text, needle) in bad {
        let e = parse_pid_stat(text).unwrap_err();
        assert!(e.to_string().contains(needle), "{text:?}: {e}");
    }
}

#[test]
fn pid_status() {
    type Want<'a> = (&'a str, Option<u64>, Option<u64>, Option<u64>, Option<u64>);
    let cases: &[(&str, Want)] = &[
        // name, VmRSS bytes, Threads, voluntary, nonvoluntary
        (BASH_STATUS, ("bash", Some(4176 * 1024), Some(1), Some(199), Some(19))), // the whole file
        (PYTHON_STATUS, ("python3", Some(13564 * 1024), Some(4), Some(18), Some(6))), // excerpt
        (ODD_STATUS, ("x) (y z", Some(1808 * 1024), Some(1), Some(1), Some(0))),  // the odd name, unparenthesized
        (KTHREADD_STATUS, ("kthreadd", None, Some(1), Some(92), Some(0))),        // kernel thread: no VmRSS
    ];
    for (text, (name, rss, threads, vol, nonvol)) in cases {
        let s = parse_pid_status(text).unwrap();
        assert_eq!(
            (s.name.as_deref(), s.vm_rss_bytes, s.threads, s.voluntary_ctxt_switches, s.nonvoluntary_ctxt_switches),
            (Some(*name), *rss, *threads, *vol, *nonvol),
            "{name}"
        );
    }
    assert_eq!(parse_pid_status(BASH_STATUS).unwrap().vm_hwm_bytes, Some(4176 * 1024));
    assert_eq!(parse_pid_status(BASH_STATUS).unwrap().cpus_allowed, Some(2), "Cpus_allowed_list: 0-1");
    assert_eq!(parse_pid_status(PYTHON_STATUS).unwrap().cpus_allowed, None, "excerpt without the line");
    let e = parse_pid_status("Threads:\tmany\n").unwrap_err();
    assert!(e.to_string().contains("Threads"), "{e}");
}

#[test]
fn cpu_lists() {
    let cases: &[(&str, u32)] = &[
        ("0-1", 2),           // this host
        ("0", 1),             // one CPU
        ("0-3,8,10-11\n", 7), // ranges and singles, as a cpuset prints them
        ("", 0),              // an empty cpuset
        (" 2 , 4-5 ", 3),     // blanks tolerated
    ];
    for (text, want) in cases {
        assert_eq!(parse_cpu_list(text).unwrap(), *want, "{text:?}");
    }
    for bad in ["x", "3-1", "0-", "1,,a"] {
        assert!(parse_cpu_list(bad).is_err(), "{bad:?}");
    }
    assert!(parse_pid_status("Cpus_allowed_list:\t0-x\n").is_err());
}

#[test]
fn cgroup2_mount() {
    // This host (hybrid): v1 controllers, and v2 at /sys/fs/cgroup/unified.
    let hybrid = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
                  32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
                  41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
    let m = parse_cgroup2_mount(hybrid).unwrap();
    assert_eq!(m, Cgroup2Mount { root: "/".into(), mount_point: "/sys/fs/cgroup/unified".into() });
    assert_eq!(m.dir_of("/").as_deref(), Some("/sys/fs/cgroup/unified"), "the root group");
    assert_eq!(m.dir_of("/a/b").as_deref(), Some("/sys/fs/cgroup/unified/a/b"));
    // Pure v2, with optional fields (shared:N) before the `-`.
    let v2 = "30 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";
    assert_eq!(
        parse_cgroup2_mount(v2).unwrap().dir_of("/system.slice/x.service").as_deref(),
        Some("/sys/fs/cgroup/system.slice/x.service")
    );
    // A bind-mounted sub-tree, and a mount point with a space (escaped as \040).
    let sub = "50 40 0:26 /kubepods/pod1 /mnt/cg\\040x rw - cgroup2 cgroup2 rw\n";
    let m = parse_cgroup2_mount(sub).unwrap();
    assert_eq!(m.mount_point, "/mnt/cg x");
    assert_eq!(m.dir_of("/kubepods/pod1/c1").as_deref(), Some("/mnt/cg x/c1"));
    assert_eq!(m.dir_of("/kubepods/pod12"), None, "a name prefix is not a path prefix");
    assert_eq!(m.dir_of("/other"), None, "outside the mounted sub-tree");
    assert_eq!(parse_cgroup2_mount("32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"), None, "pure v1");
}

#[test]
fn system_stat() {
    let s = parse_stat(PROC_STAT).unwrap();
    assert_eq!(s.cpus, 2, "cpu0 and cpu1");
    assert_eq!((s.cpu.user, s.cpu.system, s.cpu.idle, s.cpu.steal), (516_584, 120_037, 684_408, 2599));
    // guest and guest_nice are already inside user and nice: not added again.
    assert_eq!(s.cpu.total(), 1_362_674);
    assert_eq!(s.cpu.busy(), 1_362_674 - 684_408 - 4556);
    // An old kernel without steal and later columns still reads.
    let old = parse_stat("cpu  10 0 5 100 1 0 2\ncpu0 10 0 5 100 1 0 2\n").unwrap();
    assert_eq!((old.cpu.total(), old.cpu.steal, old.cpus), (118, 0, 1));
    for bad in ["", "intr 1 2\n", "cpu 1 2 3\n", "cpu 1 x 3 4\n"] {
        assert!(parse_stat(bad).is_err(), "{bad:?}");
    }
}

/// A listen socket as (address, accept-queue length, tx_queue).
type Listener = (SocketAddr, Option<u32>, u32);

/// The listen sockets on `port`.
fn listeners(text: &str, port: u16) -> Vec<Listener> {
    let socks = parse_net_tcp(text).unwrap();
    socks.iter().filter(|s| s.listens_on(port)).map(|s| (s.local, s.accept_queue_len(), s.tx_queue)).collect()
}

#[test]
fn net_tcp_listen_queues() {
    // Captured with python3: listen(7) on 127.0.0.1:59309 with nothing queued; listen(7) on
    // 127.0.0.1:54913, then 3 connects and no accept(); then 12 more non-blocking connects.
    // `ss -ltn` showed "LISTEN 3 7 127.0.0.1:54913" and then "LISTEN 8 7", i.e. Send-Q 7 there,
    // while this file's tx_queue stayed 0: the backlog is not in /proc/net/tcp.
    let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
    type Case<'a> = (&'a str, u16, &'a [Listener]);
    let cases: &[Case] = &[
        (NET_TCP_3_QUEUED, 59309, &[(addr("127.0.0.1:59309"), Some(0), 0)]), // idle: backlog 7, tx_queue 0
        (NET_TCP_3_QUEUED, 54913, &[(addr("127.0.0.1:54913"), Some(3), 0)]), // 3 waiting for accept()
        // 15 connects: the queue holds backlog + 1 = 8 (the kernel's test is `>`); the SYNs of
        // the other 7 are dropped (they stay in SYN_SENT) and ListenOverflows counts them.
        (NET_TCP_FULL, 54913, &[(addr("127.0.0.1:54913"), Some(8), 0)]),
        (NET_TCP_FULL, 2024, &[(addr("0.0.0.0:2024"), Some(0), 0)]), // a wildcard listener
        (NET_TCP6, 58311, &[(addr("[::1]:58311"), Some(1), 0)]),     // IPv6: four host-order words
        (NET_TCP_FULL, 1, &[]),                                      // nothing listens there
    ];
    for (text, port, want) in cases {
        assert_eq!(listeners(text, *port), want.to_vec(), "port {port}");
    }
    // The server side of connections on the same port are not listeners; their rx_queue is bytes.
    let socks = parse_net_tcp(NET_TCP_FULL).unwrap();
    let children = socks.iter().filter(|s| s.local.port() == 54913 && s.state != TCP_LISTEN).count();
    assert_eq!(children, 8, "the 8 queued connections have their own lines");
    assert!(socks.iter().filter(|s| s.state != TCP_LISTEN).all(|s| s.accept_queue_len().is_none()));
    let syn_sent = socks.iter().filter(|s| s.state == 0x02).count();
    assert_eq!(syn_sent, 7, "15 connects - 8 queued = 7 clients whose handshake was dropped");
    assert_eq!(socks.iter().find(|s| s.listens_on(54913)).unwrap().inode, 332_298);
    for bad in [
        "   0: 0100007F:D681 00000000:0000 0A",
        "   0: 0100007F:ZZZZ 00000000:0000 0A 0:0 0 0 0 0 1",
        "   0: 01007F:0050 00000000:0000 0A 0:0 0 0 0 0 1",
    ] {
        assert!(parse_net_tcp(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn netstat_listen_counters() {
    // Before and after the 12 extra connects of `net_tcp_listen_queues`.
    let before = parse_netstat(NETSTAT_BEFORE).unwrap();
    let after = parse_netstat(NETSTAT_AFTER).unwrap();
    let cases: &[(&str, &str, u64, u64)] = &[
        ("TcpExt", "ListenOverflows", 33_933, 33_947), // 7 SYN_SENT clients x (SYN + 1 retransmit)
        ("TcpExt", "ListenDrops", 33_933, 33_947),     // and nothing else was dropped
        ("TcpExt", "SyncookiesSent", 326, 326),        // the first column
        ("IpExt", "InOctets", 62_037_195_550, 62_037_197_766), // another section
        ("MPTcpExt", "MPCapableSYNRX", 0, 0),          // a third
    ];
    for (section, name, b, a) in cases {
        assert_eq!((before.counter(section, name), after.counter(section, name)), (Some(*b), Some(*a)), "{name}");
    }
    assert_eq!((after.listen_overflows(), after.listen_drops()), (Some(33_947), Some(33_947)));
    assert_eq!(after.counter("TcpExt", "NoSuchCounter"), None);
    // /proc/net/snmp has the same layout and one negative setting, which is skipped.
    let snmp = parse_netstat("Tcp: RtoAlgorithm MaxConn ActiveOpens\nTcp: 1 -1 42\n").unwrap();
    assert_eq!((snmp.counter("Tcp", "ActiveOpens"), snmp.counter("Tcp", "MaxConn")), (Some(42), None));
    let bad: &[(&str, &str)] = &[
        ("TcpExt: A B\n", "no value line"),                   // names only
        ("TcpExt: A B\nTcpExt: 1\n", "2 names but 1 values"), // counts differ
        ("TcpExt: A B\nIpExt: 1 2\n", "not TcpExt values"),   // pairs out of step
        ("TcpExt: A\nTcpExt: x\n", "not a number"),           // garbage value
    ];
    for (text, needle) in bad {
        let e = parse_netstat(text).unwrap_err();
        assert!(e.to_string().contains(needle), "{text:?}: {e}");
    }
}

#[test]
fn cgroups() {
    assert_eq!(parse_pid_cgroup(PID_CGROUP_HYBRID).as_deref(), Some("/"), "hybrid v1 + v2 host");
    assert_eq!(parse_pid_cgroup("0::/system.slice/orders.service\n").as_deref(), Some("/system.slice/orders.service"));
    assert_eq!(parse_pid_cgroup("4:memory:/x\n1:cpu:/\n"), None, "pure v1");
    let us = Duration::from_micros;
    let cases: &[(&str, CgroupCpuStat)] = &[
        // v2 root of this host: the cpu controller is bound to v1, so no throttling fields.
        (
            CPU_STAT_V2_UNIFIED,
            CgroupCpuStat {
                usage: Some(us(6_688_573_709)),
                user: Some(us(5_149_072_977)),
                system: Some(us(1_539_500_731)),
                ..Default::default()
            },
        ),
        // v1 cpu controller of this host: throttling only, time in ns.
        (
            CPU_STAT_V1,
            CgroupCpuStat {
                nr_periods: Some(0),
                nr_throttled: Some(0),
                throttled: Some(Duration::ZERO),
                ..Default::default()
            },
        ),
        // v2 with the cpu controller and a quota (the layout of Documentation/admin-guide/cgroup-v2.rst;
        // not captured: this host has no such group).
        (
            "usage_usec 4200000\nuser_usec 3900000\nsystem_usec 300000\nnr_periods 120\nnr_throttled 37\nthrottled_usec 1850000\nnr_bursts 0\nburst_usec 0\n",
            CgroupCpuStat {
                usage: Some(us(4_200_000)),
                user: Some(us(3_900_000)),
                system: Some(us(300_000)),
                nr_periods: Some(120),
                nr_throttled: Some(37),
                throttled: Some(us(1_850_000)),
            },
        ),
    ];
    for (text, want) in cases {
        assert_eq!(parse_cgroup_cpu_stat(text).unwrap(), *want, "{text:?}");
    }
    assert!(parse_cgroup_cpu_stat("nr_throttled lots\n").is_err());
    let cores: &[(&str, Option<f64>)] = &[
        ("max 100000\n", None),         // no limit
        ("150000 100000\n", Some(1.5)), // 1.5 cores
        ("50000 100000", Some(0.5)),    // half a core
    ];
    for (text, want) in cores {
        assert_eq!(parse_cpu_max(text).unwrap().cores(), *want, "{text:?}");
    }
    for bad in ["", "max", "1 2 3", "x 100000"] {
        assert!(parse_cpu_max(bad).is_err(), "{bad:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// sock_diag
// ---------------------------------------------------------------------------------------------

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn sock_diag_request_matches_what_the_kernel_accepted() {
    // The bytes python3 sent to get the replies below.
    assert_eq!(listen_dump_request(IpFamily::V4, 1), unhex(DIAG_REQUEST_V4));
    assert_eq!(listen_dump_request(IpFamily::V6, 1), unhex(DIAG_REQUEST_V6));
}

#[test]
fn sock_diag_reports_the_backlog() {
    // Same host, same experiment: listen(7) on 127.0.0.1:56787 with 3 connections queued, and
    // listen(5) on [::1]:41499 with 1. `ss -ltn` agreed (Recv-Q 3, Send-Q 7).
    let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
    let v4 = parse_dump(&unhex(DIAG_REPLY_V4)).unwrap();
    let got: Vec<(SocketAddr, u32, u32, u32)> =
        v4.listeners.iter().map(|l| (l.local, l.accept_queue_len, l.accept_queue_max, l.inode)).collect();
    assert_eq!(
        got,
        vec![
            (addr("127.0.0.1:56787"), 3, 7, 334_931), // the test listener: length and backlog
            (addr("127.0.0.1:18095"), 0, 4096, 37_805), // listen(SOMAXCONN): capped at net.core.somaxconn
            (addr("0.0.0.0:2024"), 0, 128, 108),      // same inode as in /proc/net/tcp
        ]
    );
    assert!(!v4.done, "the end comes in its own datagram");
    let end = parse_dump(&unhex(DIAG_DONE)).unwrap();
    assert!(end.done && end.listeners.is_empty());
    let v6 = parse_dump(&unhex(DIAG_REPLY_V6)).unwrap();
    assert_eq!(v6.listeners.len(), 1);
    assert_eq!(
        (v6.listeners[0].local, v6.listeners[0].accept_queue_len, v6.listeners[0].accept_queue_max),
        (addr("[::1]:41499"), 1, 5)
    );
    // Both in one buffer: the sockets, then done.
    let both = parse_dump(&[unhex(DIAG_REPLY_V6), unhex(DIAG_DONE)].concat()).unwrap();
    assert!(both.done && both.listeners.len() == 1);
}

#[test]
fn sock_diag_errors() {
    let nlmsg = |kind: u16, payload: &[u8]| {
        let mut b = ((16 + payload.len()) as u32).to_ne_bytes().to_vec();
        b.extend_from_slice(&kind.to_ne_bytes());
        b.extend_from_slice(&[0; 10]);
        b.extend_from_slice(payload);
        b
    };
    let reply = unhex(DIAG_REPLY_V4);
    let cases: &[(Vec<u8>, Result<usize, DiagError>)] = &[
        (nlmsg(2, &(-13i32).to_ne_bytes()), Err(DiagError::Kernel(-13))), // EACCES
        (nlmsg(2, &0i32.to_ne_bytes()), Ok(0)),                           // an ACK
        (nlmsg(3, &(-16i32).to_ne_bytes()), Err(DiagError::Kernel(-16))), // dump interrupted
        (nlmsg(1, &[]), Ok(0)),                                           // NOOP
        (reply[..100].to_vec(), Err(DiagError::Truncated(0))),            // cut inside the first message
        (reply[..130].to_vec(), Err(DiagError::Truncated(124))),          // cut inside the second
        (nlmsg(20, &[0; 10]), Err(DiagError::Truncated(0))),              // a socket record too short
        (Vec::new(), Ok(0)),                                              // nothing
    ];
    for (bytes, want) in cases {
        assert_eq!(parse_dump(bytes).map(|d| d.listeners.len()), *want, "{bytes:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// No input makes the kernel-file parsers panic either.
// ---------------------------------------------------------------------------------------------

proptest! {
    #[test]
    fn proc_parsers_never_panic(text in any::<String>()) {
        let _ = parse_pid_stat(&text);
        let _ = parse_pid_status(&text);
        let _ = parse_pid_cgroup(&text);
        let _ = parse_stat(&text);
        let _ = parse_net_tcp(&text);
        let _ = parse_netstat(&text);
        let _ = parse_cgroup_cpu_stat(&text);
        let _ = parse_cpu_max(&text);
        let _ = parse_cpu_list(&text);
        if let Some(m) = parse_cgroup2_mount(&text) {
            let _ = m.dir_of(&text);
        }
    }

    #[test]
    fn proc_parsers_never_panic_on_edited_captures(
        which in 0usize..6,
        at in any::<prop::sample::Index>(),
        cut in 0usize..40,
        insert in "[ ():\n0-9a-fA-F()-]{0,6}",
    ) {
        let text = [ODD_STAT, BASH_STATUS, PROC_STAT, NET_TCP_FULL, NETSTAT_AFTER, CPU_STAT_V2_UNIFIED][which];
        let mut chars: Vec<char> = text.chars().collect();
        let i = at.index(chars.len());
        let j = (i + cut).min(chars.len());
        chars.splice(i..j, insert.chars());
        let text: String = chars.into_iter().collect();
        let _ = parse_pid_stat(&text);
        let _ = parse_pid_status(&text);
        let _ = parse_stat(&text);
        let _ = parse_net_tcp(&text);
        let _ = parse_netstat(&text);
        let _ = parse_cgroup_cpu_stat(&text);
    }

    #[test]
    fn sock_diag_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = parse_dump(&bytes);
    }

    #[test]
    fn sock_diag_never_panics_on_flipped_replies(flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6)) {
        let mut bytes = unhex(DIAG_REPLY_V4);
        for (at, b) in flips {
            let i = at.index(bytes.len());
            bytes[i] = b;
        }
        let _ = parse_dump(&bytes);
    }
}

// ---------------------------------------------------------------------------------------------
// Fixtures. Prometheus: excerpts in the shape real exporters print. Everything else: captured
// verbatim on the host these tests were written on (Linux 6.18.44 x86_64, 2 CPUs, cgroup v1 with
// a v2 hierarchy beside it), trailing spaces included.
// ---------------------------------------------------------------------------------------------

/// node_exporter 1.x, an excerpt (Go runtime summary, counters, gauges, an untyped netstat value).
const NODE_EXPORTER: &str = r##"# HELP go_gc_duration_seconds A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0"} 2.3589e-05
go_gc_duration_seconds{quantile="0.25"} 3.6105e-05
go_gc_duration_seconds{quantile="0.5"} 4.3e-05
go_gc_duration_seconds{quantile="0.75"} 5.9461e-05
go_gc_duration_seconds{quantile="1"} 0.001036227
go_gc_duration_seconds_sum 0.262409613
go_gc_duration_seconds_count 4623
# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 9
# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.
# TYPE node_cpu_seconds_total counter
node_cpu_seconds_total{cpu="0",mode="idle"} 3579.4
node_cpu_seconds_total{cpu="0",mode="user"} 2497.85
node_cpu_seconds_total{cpu="1",mode="idle"} 3264.68
node_cpu_seconds_total{cpu="1",mode="user"} 2667.99
# HELP node_filesystem_avail_bytes Filesystem space available to non-root users in bytes.
# TYPE node_filesystem_avail_bytes gauge
node_filesystem_avail_bytes{device="/dev/vda1",fstype="ext4",mountpoint="/"} 4.2314457088e+10
node_filesystem_avail_bytes{device="tmpfs",fstype="tmpfs",mountpoint="/run"} 2.01023488e+08
# HELP node_load1 1m load average.
# TYPE node_load1 gauge
node_load1 0.42
# HELP node_netstat_TcpExt_ListenOverflows Statistic TcpExtListenOverflows.
# TYPE node_netstat_TcpExt_ListenOverflows untyped
node_netstat_TcpExt_ListenOverflows 33947
# HELP node_network_receive_bytes_total Network device statistic receive_bytes.
# TYPE node_network_receive_bytes_total counter
node_network_receive_bytes_total{device="eth0"} 6.2045444607e+10
node_network_receive_bytes_total{device="lo"} 1.23456789e+08
# HELP node_uname_info Labeled system information as provided by the uname system call.
# TYPE node_uname_info gauge
node_uname_info{domainname="(none)",machine="x86_64",nodename="vm",release="6.18.44-fc-v595",sysname="Linux",version="#1 SMP PREEMPT_DYNAMIC @0"} 1
# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.79532085e+09
"##;

/// A Puma/Rails exporter in the yabeda style: TYPE before HELP, floats as `3.0`, one series per
/// Puma worker (`index`).
const PUMA: &str = r#"# TYPE puma_backlog gauge
# HELP puma_backlog Number of established but unaccepted connections in the backlog
puma_backlog{index="0"} 0.0
puma_backlog{index="1"} 3.0
# TYPE puma_running gauge
# HELP puma_running Number of running worker threads
puma_running{index="0"} 5.0
puma_running{index="1"} 5.0
# TYPE puma_pool_capacity gauge
# HELP puma_pool_capacity Number of allocatable worker threads
puma_pool_capacity{index="0"} 2.0
puma_pool_capacity{index="1"} 0.0
# TYPE puma_max_threads gauge
# HELP puma_max_threads Maximum number of worker threads
puma_max_threads{index="0"} 5.0
puma_max_threads{index="1"} 5.0
# TYPE puma_workers gauge
# HELP puma_workers Number of configured workers
puma_workers 2.0
# TYPE puma_booted_workers gauge
# HELP puma_booted_workers Number of booted workers
puma_booted_workers 2.0
# TYPE rails_requests_total counter
# HELP rails_requests_total A counter of the total number of HTTP requests rails processed.
rails_requests_total{controller="orders",action="index",status="200"} 1523.0
rails_requests_total{controller="orders",action="index",status="500"} 2.0
# TYPE rails_request_duration_seconds histogram
# HELP rails_request_duration_seconds A histogram of the response latency.
rails_request_duration_seconds_bucket{controller="orders",action="index",le="0.05"} 1210.0
rails_request_duration_seconds_bucket{controller="orders",action="index",le="0.25"} 1490.0
rails_request_duration_seconds_bucket{controller="orders",action="index",le="1"} 1523.0
rails_request_duration_seconds_bucket{controller="orders",action="index",le="+Inf"} 1525.0
rails_request_duration_seconds_sum{controller="orders",action="index"} 91.73
rails_request_duration_seconds_count{controller="orders",action="index"} 1525.0
"#;

/// `perfops demo --model threads`: /metrics after 1 login and 6 order requests (one without a token).
const DEMO_SCRAPE_1: &str = r#"# HELP demo_info The demo server's scheduling model.
# TYPE demo_info gauge
demo_info{model="threads"} 1
# HELP demo_requests_total Requests answered, by route and status code.
# TYPE demo_requests_total counter
demo_requests_total{path="/auth",code="200"} 2
demo_requests_total{path="/orders",code="200"} 5
demo_requests_total{path="/orders",code="401"} 1
# HELP demo_workers_busy Handler threads busy with a request.
# TYPE demo_workers_busy gauge
demo_workers_busy 1
# HELP demo_workers_max Handler threads in the pool (workers x threads).
# TYPE demo_workers_max gauge
demo_workers_max 10
# HELP demo_queue_depth Requests accepted but waiting for a handler thread.
# TYPE demo_queue_depth gauge
demo_queue_depth 0
# HELP demo_connections_open Open client connections.
# TYPE demo_connections_open gauge
demo_connections_open 1
# HELP demo_connections_accepted_total Connections accepted since start.
# TYPE demo_connections_accepted_total counter
demo_connections_accepted_total 9
# HELP demo_request_duration_seconds Time from request parsed to response written (queueing excluded).
# TYPE demo_request_duration_seconds histogram
demo_request_duration_seconds_bucket{path="/auth",le="0.001"} 0
demo_request_duration_seconds_bucket{path="/auth",le="0.0025"} 1
demo_request_duration_seconds_bucket{path="/auth",le="0.005"} 1
demo_request_duration_seconds_bucket{path="/auth",le="0.01"} 2
demo_request_duration_seconds_bucket{path="/auth",le="0.025"} 2
demo_request_duration_seconds_bucket{path="/auth",le="0.05"} 2
demo_request_duration_seconds_bucket{path="/auth",le="0.1"} 2
demo_request_duration_seconds_bucket{path="/auth",le="0.25"} 2
demo_request_duration_seconds_bucket{path="/auth",le="0.5"} 2
demo_request_duration_seconds_bucket{path="/auth",le="1"} 2
demo_request_duration_seconds_bucket{path="/auth",le="2.5"} 2
demo_request_duration_seconds_bucket{path="/auth",le="5"} 2
demo_request_duration_seconds_bucket{path="/auth",le="10"} 2
demo_request_duration_seconds_bucket{path="/auth",le="+Inf"} 2
demo_request_duration_seconds_sum{path="/auth"} 0.009432
demo_request_duration_seconds_count{path="/auth"} 2
demo_request_duration_seconds_bucket{path="/orders",le="0.001"} 0
demo_request_duration_seconds_bucket{path="/orders",le="0.0025"} 1
demo_request_duration_seconds_bucket{path="/orders",le="0.005"} 1
demo_request_duration_seconds_bucket{path="/orders",le="0.01"} 1
demo_request_duration_seconds_bucket{path="/orders",le="0.025"} 5
demo_request_duration_seconds_bucket{path="/orders",le="0.05"} 6
demo_request_duration_seconds_bucket{path="/orders",le="0.1"} 6
demo_request_duration_seconds_bucket{path="/orders",le="0.25"} 6
demo_request_duration_seconds_bucket{path="/orders",le="0.5"} 6
demo_request_duration_seconds_bucket{path="/orders",le="1"} 6
demo_request_duration_seconds_bucket{path="/orders",le="2.5"} 6
demo_request_duration_seconds_bucket{path="/orders",le="5"} 6
demo_request_duration_seconds_bucket{path="/orders",le="10"} 6
demo_request_duration_seconds_bucket{path="/orders",le="+Inf"} 6
demo_request_duration_seconds_sum{path="/orders"} 0.11855
demo_request_duration_seconds_count{path="/orders"} 6
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 0.082094
"#;

/// The same server 1.7 s later: 20 more orders, one 404, and the first scrape counted.
const DEMO_SCRAPE_2: &str = r#"# HELP demo_info The demo server's scheduling model.
# TYPE demo_info gauge
demo_info{model="threads"} 1
# HELP demo_requests_total Requests answered, by route and status code.
# TYPE demo_requests_total counter
demo_requests_total{path="/auth",code="200"} 2
demo_requests_total{path="/orders",code="200"} 25
demo_requests_total{path="/orders",code="401"} 1
demo_requests_total{path="/metrics",code="200"} 1
demo_requests_total{path="other",code="404"} 1
# HELP demo_workers_busy Handler threads busy with a request.
# TYPE demo_workers_busy gauge
demo_workers_busy 1
# HELP demo_workers_max Handler threads in the pool (workers x threads).
# TYPE demo_workers_max gauge
demo_workers_max 10
# HELP demo_queue_depth Requests accepted but waiting for a handler thread.
# TYPE demo_queue_depth gauge
demo_queue_depth 0
# HELP demo_connections_open Open client connections.
# TYPE demo_connections_open gauge
demo_connections_open 1
# HELP demo_connections_accepted_total Connections accepted since start.
# TYPE demo_connections_accepted_total counter
demo_connections_accepted_total 31
# HELP demo_request_duration_seconds Time from request parsed to response written (queueing excluded).
# TYPE demo_request_duration_seconds histogram
demo_request_duration_seconds_bucket{path="/auth",le="0.001"} 0
demo_request_duration_seconds_bucket{path="/auth",le="0.0025"} 1
demo_request_duration_seconds_bucket{path="/auth",le="0.005"} 1
demo_request_duration_seconds_bucket{path="/auth",le="0.01"} 2
demo_request_duration_seconds_bucket{path="/auth",le="0.025"} 2
demo_request_duration_seconds_bucket{path="/auth",le="0.05"} 2
demo_request_duration_seconds_bucket{path="/auth",le="0.1"} 2
demo_request_duration_seconds_bucket{path="/auth",le="0.25"} 2
demo_request_duration_seconds_bucket{path="/auth",le="0.5"} 2
demo_request_duration_seconds_bucket{path="/auth",le="1"} 2
demo_request_duration_seconds_bucket{path="/auth",le="2.5"} 2
demo_request_duration_seconds_bucket{path="/auth",le="5"} 2
demo_request_duration_seconds_bucket{path="/auth",le="10"} 2
demo_request_duration_seconds_bucket{path="/auth",le="+Inf"} 2
demo_request_duration_seconds_sum{path="/auth"} 0.009432
demo_request_duration_seconds_count{path="/auth"} 2
demo_request_duration_seconds_bucket{path="/orders",le="0.001"} 0
demo_request_duration_seconds_bucket{path="/orders",le="0.0025"} 1
demo_request_duration_seconds_bucket{path="/orders",le="0.005"} 1
demo_request_duration_seconds_bucket{path="/orders",le="0.01"} 1
demo_request_duration_seconds_bucket{path="/orders",le="0.025"} 23
demo_request_duration_seconds_bucket{path="/orders",le="0.05"} 26
demo_request_duration_seconds_bucket{path="/orders",le="0.1"} 26
demo_request_duration_seconds_bucket{path="/orders",le="0.25"} 26
demo_request_duration_seconds_bucket{path="/orders",le="0.5"} 26
demo_request_duration_seconds_bucket{path="/orders",le="1"} 26
demo_request_duration_seconds_bucket{path="/orders",le="2.5"} 26
demo_request_duration_seconds_bucket{path="/orders",le="5"} 26
demo_request_duration_seconds_bucket{path="/orders",le="10"} 26
demo_request_duration_seconds_bucket{path="/orders",le="+Inf"} 26
demo_request_duration_seconds_sum{path="/orders"} 0.563853
demo_request_duration_seconds_count{path="/orders"} 26
demo_request_duration_seconds_bucket{path="/metrics",le="0.001"} 1
demo_request_duration_seconds_bucket{path="/metrics",le="0.0025"} 1
demo_request_duration_seconds_bucket{path="/metrics",le="0.005"} 1
demo_request_duration_seconds_bucket{path="/metrics",le="0.01"} 1
demo_request_duration_seconds_bucket{path="/metrics",le="0.025"} 1
demo_request_duration_seconds_bucket{path="/metrics",le="0.05"} 1
demo_request_duration_seconds_bucket{path="/metrics",le="0.1"} 1
demo_request_duration_seconds_bucket{path="/metrics",le="0.25"} 1
demo_request_duration_seconds_bucket{path="/metrics",le="0.5"} 1
demo_request_duration_seconds_bucket{path="/metrics",le="1"} 1
demo_request_duration_seconds_bucket{path="/metrics",le="2.5"} 1
demo_request_duration_seconds_bucket{path="/metrics",le="5"} 1
demo_request_duration_seconds_bucket{path="/metrics",le="10"} 1
demo_request_duration_seconds_bucket{path="/metrics",le="+Inf"} 1
demo_request_duration_seconds_sum{path="/metrics"} 0.00012
demo_request_duration_seconds_count{path="/metrics"} 1
demo_request_duration_seconds_bucket{path="other",le="0.001"} 1
demo_request_duration_seconds_bucket{path="other",le="0.0025"} 1
demo_request_duration_seconds_bucket{path="other",le="0.005"} 1
demo_request_duration_seconds_bucket{path="other",le="0.01"} 1
demo_request_duration_seconds_bucket{path="other",le="0.025"} 1
demo_request_duration_seconds_bucket{path="other",le="0.05"} 1
demo_request_duration_seconds_bucket{path="other",le="0.1"} 1
demo_request_duration_seconds_bucket{path="other",le="0.25"} 1
demo_request_duration_seconds_bucket{path="other",le="0.5"} 1
demo_request_duration_seconds_bucket{path="other",le="1"} 1
demo_request_duration_seconds_bucket{path="other",le="2.5"} 1
demo_request_duration_seconds_bucket{path="other",le="5"} 1
demo_request_duration_seconds_bucket{path="other",le="10"} 1
demo_request_duration_seconds_bucket{path="other",le="+Inf"} 1
demo_request_duration_seconds_sum{path="other"} 0.000037
demo_request_duration_seconds_count{path="other"} 1
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 0.123521
"#;

/// /proc/<pid>/stat of the shell these tests were captured from.
const BASH_STAT: &str = r#"27669 (bash) S 27668 27669 27669 0 -1 4194560 8436 820049 0 772 2 7 2703 400 20 0 1 0 626601 5246976 993 18446744073709551615 94725682225152 94725683014557 140731762943984 0 0 0 65536 4 1132560123 1 0 0 17 1 0 0 0 0 0 94725683247856 94725683296100 94726650155008 140731762944862 140731762944877 140731762944877 140731762946026 0
"#;

/// /proc/self/stat of python3 with 3 extra threads waiting on an event.
const PYTHON_STAT: &str = r#"3781 (python3) R 3774 3774 27669 0 -1 4194304 2863 6542 1 0 4 1 4 2 20 0 4 0 687284 243515392 3369 18446744073709551615 94478503309312 94478503309653 140731076655120 0 0 0 0 16781312 2 0 0 0 17 1 0 0 0 0 0 94478503321008 94478503321624 94479464648704 140731076663514 140731076663557 140731076663557 140731076665295 0
"#;

/// /proc/<pid>/stat of `sleep` copied to a file named `x) (y z`.
const ODD_STAT: &str = r#"3827 (x) (y z) S 3825 3774 27669 0 -1 4194304 131 0 0 0 0 0 0 0 20 0 1 0 687298 2990080 426 18446744073709551615 94811330146304 94811330164233 140730723325664 0 0 0 0 6 0 1 0 0 17 0 0 0 0 0 0 94811330178320 94811330179584 94811700756480 140730723326665 140730723326678 140730723326678 140730723327982 0
"#;

/// /proc/2/stat (a kernel thread).
const KTHREADD_STAT: &str = r#"2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 25 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
"#;

/// /proc/<pid>/status of the same shell, whole.
const BASH_STATUS: &str = r#"Name:	bash
Umask:	0022
State:	S (sleeping)
Tgid:	27669
Ngid:	0
Pid:	27669
PPid:	27668
TracerPid:	0
Uid:	0	0	0	0
Gid:	0	0	0	0
FDSize:	256
Groups:	 
NStgid:	27669
NSpid:	27669
NSpgid:	27669
NSsid:	27669
Kthread:	0
VmPeak:	    5136 kB
VmSize:	    5124 kB
VmLck:	       0 kB
VmPin:	       0 kB
VmHWM:	    4176 kB
VmRSS:	    4176 kB
RssAnon:	    1040 kB
RssFile:	    3136 kB
RssShmem:	       0 kB
VmData:	    1068 kB
VmStk:	     132 kB
VmExe:	     772 kB
VmLib:	    1596 kB
VmPTE:	      48 kB
VmSwap:	       0 kB
HugetlbPages:	       0 kB
CoreDumping:	0
THP_enabled:	1
untag_mask:	0xffffffffffffffff
Threads:	1
SigQ:	0/96365
SigPnd:	0000000000000000
ShdPnd:	0000000000000000
SigBlk:	0000000000010000
SigIgn:	0000000000000004
SigCgt:	0000000043817efb
CapInh:	0000000000000000
CapPrm:	000001fffeffffff
CapEff:	000001fffeffffff
CapBnd:	000001fffeffffff
CapAmb:	0000000000000000
NoNewPrivs:	0
Seccomp:	0
Seccomp_filters:	0
Speculation_Store_Bypass:	vulnerable
SpeculationIndirectBranch:	always enabled
Cpus_allowed:	3
Cpus_allowed_list:	0-1
Mems_allowed:	00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000001
Mems_allowed_list:	0
voluntary_ctxt_switches:	199
nonvoluntary_ctxt_switches:	19
"#;

/// /proc/self/status of the same python3, the lines the parser reads.
const PYTHON_STATUS: &str = r#"Name:	python3
VmHWM:	   13564 kB
VmRSS:	   13564 kB
Threads:	4
voluntary_ctxt_switches:	18
nonvoluntary_ctxt_switches:	6
"#;

/// /proc/<pid>/status of `x) (y z`, the lines the parser reads.
const ODD_STATUS: &str = r#"Name:	x) (y z
VmHWM:	    1808 kB
VmRSS:	    1808 kB
Threads:	1
voluntary_ctxt_switches:	1
nonvoluntary_ctxt_switches:	0
"#;

/// /proc/2/status, an excerpt: a kernel thread has no Vm* lines.
const KTHREADD_STATUS: &str = r#"Name:	kthreadd
Umask:	0022
State:	S (sleeping)
Tgid:	2
Pid:	2
PPid:	0
Kthread:	1
Threads:	1
voluntary_ctxt_switches:	92
nonvoluntary_ctxt_switches:	0
"#;

/// /proc/stat.
const PROC_STAT: &str = r#"cpu  516584 0 120037 684408 4556 0 34490 2599 0 0
cpu0 249785 0 56305 357940 996 0 16111 1545 0 0
cpu1 266799 0 63731 326468 3560 0 18379 1053 0 0
intr 12111776 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 1 15 0 0 0 0 1374 674 0 124 1 294307 0 11110 9279 0 3752 10799 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
ctxt 21056231
btime 1795320850
processes 133617
procs_running 1
procs_blocked 0
softirq 111340720 0 363187 5 109425564 294297 0 1988 554246 1 701432
"#;

/// /proc/net/tcp with listen(7) sockets on 59309 (idle) and 54913 (3 connections not accepted).
const NET_TCP_3_QUEUED: &str = r#"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode                                                     
   0: 0100007F:D681 00000000:0000 0A 00000000:00000003 00:00000000 00000000     0        0 332298 4 000000006795ec84 100 0 0 10 0                    
   1: 0100007F:46AF 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 37805 1 00000000e8e08912 100 0 0 10 0                     
   2: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 108 1 000000001728cf7f 100 0 0 10 0                       
   3: 0100007F:E7AD 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 332866 1 0000000026fdf552 100 0 0 10 0                    
   4: 0100007F:D681 0100007F:9C7C 01 00000000:00000000 00:00000000 00000000     0        0 0 1 000000003ca06490 20 0 0 10 -1                         
   5: 0100007F:D681 0100007F:9C84 01 00000000:00000000 00:00000000 00000000     0        0 0 1 000000002be3f6b7 20 0 0 10 -1                         
   6: 0100007F:D681 0100007F:9C6C 01 00000000:00000000 00:00000000 00000000     0        0 0 1 00000000ee63f5c6 20 0 0 10 -1                         
   7: 0100007F:9C6C 0100007F:D681 01 00000000:00000000 00:00000000 00000000     0        0 332301 2 00000000deba7ecb 20 0 0 10 -1                    
   8: 0100007F:9C7C 0100007F:D681 01 00000000:00000000 00:00000000 00000000     0        0 332302 2 00000000728f54ce 20 0 0 10 -1                    
   9: 0100007F:9C84 0100007F:D681 01 00000000:00000000 00:00000000 00000000     0        0 332303 2 00000000407e77ea 20 0 0 10 -1                    
"#;

/// /proc/net/tcp after 12 more connects to 54913: its accept queue full.
const NET_TCP_FULL: &str = r#"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode                                                     
   0: 0100007F:D681 00000000:0000 0A 00000000:00000008 00:00000000 00000000     0        0 332298 9 000000006795ec84 100 0 0 10 0                    
   1: 0100007F:46AF 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 37805 1 00000000e8e08912 100 0 0 10 0                     
   2: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 108 1 000000001728cf7f 100 0 0 10 0                       
   3: 0100007F:E7AD 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 332866 1 0000000026fdf552 100 0 0 10 0                    
   4: 0100007F:D681 0100007F:9C7C 01 00000000:00000000 00:00000000 00000000     0        0 0 1 000000003ca06490 20 0 0 10 -1                         
   5: 0100007F:D681 0100007F:9CA2 01 00000000:00000000 00:00000000 00000000     0        0 0 1 000000006a6c0aa3 20 0 0 10 -1                         
   6: 0100007F:D681 0100007F:9C92 01 00000000:00000000 00:00000000 00000000     0        0 0 1 00000000c1292c66 20 0 0 10 -1                         
   7: 0100007F:D681 0100007F:9C84 01 00000000:00000000 00:00000000 00000000     0        0 0 1 000000002be3f6b7 20 0 0 10 -1                         
   8: 0100007F:D681 0100007F:9CB0 01 00000000:00000000 00:00000000 00000000     0        0 0 1 000000006888de72 20 0 0 10 -1                         
   9: 0100007F:D681 0100007F:9CC2 01 00000000:00000000 00:00000000 00000000     0        0 0 1 00000000b6163896 20 0 0 10 -1                         
  10: 0100007F:D681 0100007F:9C6C 01 00000000:00000000 00:00000000 00000000     0        0 0 1 00000000ee63f5c6 20 0 0 10 -1                         
  11: 0100007F:9C6C 0100007F:D681 01 00000000:00000000 00:00000000 00000000     0        0 332301 1 00000000deba7ecb 20 0 0 10 -1                    
  12: 0100007F:9C7C 0100007F:D681 01 00000000:00000000 00:00000000 00000000     0        0 332302 1 00000000728f54ce 20 0 0 10 -1                    
  13: 0100007F:9C84 0100007F:D681 01 00000000:00000000 00:00000000 00000000     0        0 332303 1 00000000407e77ea 20 0 0 10 -1                    
  14: 0100007F:9C92 0100007F:D681 01 00000000:00000000 00:00000000 00000000     0        0 333208 1 00000000a24bed33 20 0 0 10 -1                    
  15: 0100007F:9CA2 0100007F:D681 01 00000000:00000000 00:00000000 00000000     0        0 333209 1 0000000036b03f5e 20 0 0 10 -1                    
  16: 0100007F:9CB0 0100007F:D681 01 00000000:00000000 00:00000000 00000000     0        0 333210 1 000000001bdd28e8 20 0 0 10 -1                    
  17: 0100007F:9CC0 0100007F:D681 01 00000000:00000000 00:00000000 00000000     0        0 333211 1 00000000cbf83a91 20 0 0 10 -1                    
  18: 0100007F:9CC2 0100007F:D681 01 00000000:00000000 00:00000000 00000000     0        0 333212 1 00000000e5ac133f 20 0 0 10 -1                    
  19: 0100007F:9CD0 0100007F:D681 02 00000001:00000000 01:00000033 00000001     0        0 333213 2 00000000fc67b69a 100 0 0 1 -1                    
  20: 0100007F:9CD2 0100007F:D681 02 00000001:00000000 01:00000033 00000001     0        0 333214 2 0000000076494673 100 0 0 1 -1                    
  21: 0100007F:9CD6 0100007F:D681 02 00000001:00000000 01:00000033 00000001     0        0 333215 2 000000001c67494c 100 0 0 1 -1                    
  22: 0100007F:9CE0 0100007F:D681 02 00000001:00000000 01:00000033 00000001     0        0 333216 2 0000000021b12460 100 0 0 1 -1                    
  23: 0100007F:9CE2 0100007F:D681 02 00000001:00000000 01:00000033 00000001     0        0 333217 2 00000000a86e08c5 100 0 0 1 -1                    
  24: 0100007F:9CE8 0100007F:D681 02 00000001:00000000 01:00000033 00000001     0        0 333218 2 000000007c2b4033 100 0 0 1 -1                    
  25: 0100007F:9CF6 0100007F:D681 02 00000001:00000000 01:00000033 00000001     0        0 333219 2 00000000e7ebaf01 100 0 0 1 -1                    
  26: 0100007F:D681 0100007F:9CC0 01 00000000:00000000 00:00000000 00000000     0        0 0 1 0000000063c34f7f 20 0 0 10 -1                         
"#;

/// /proc/net/tcp6 with listen(5) on [::1]:58311 and one connection not accepted.
const NET_TCP6: &str = r#"  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:E3C7 00000000000000000000000000000000:0000 0A 00000000:00000001 00:00000000 00000000     0        0 333258 2 00000000b7191bff 100 0 0 10 0
   1: 00000000000000000000000001000000:A55C 00000000000000000000000001000000:E3C7 01 00000000:00000000 00:00000000 00000000     0        0 333259 2 0000000008124fd8 20 0 0 10 -1
   2: 00000000000000000000000001000000:E3C7 00000000000000000000000001000000:A55C 01 00000000:00000000 00:00000000 00000000     0        0 0 1 00000000c22fc517 20 0 0 10 -1
"#;

/// /proc/net/netstat before the 12 connects.
const NETSTAT_BEFORE: &str = r#"TcpExt: SyncookiesSent SyncookiesRecv SyncookiesFailed EmbryonicRsts PruneCalled RcvPruned OfoPruned OutOfWindowIcmps LockDroppedIcmps ArpFilter TW TWRecycled TWKilled PAWSActive PAWSEstab BeyondWindow TSEcrRejected PAWSOldAck PAWSTimewait DelayedACKs DelayedACKLocked DelayedACKLost ListenOverflows ListenDrops TCPHPHits TCPPureAcks TCPHPAcks TCPRenoRecovery TCPSackRecovery TCPSACKReneging TCPSACKReorder TCPRenoReorder TCPTSReorder TCPFullUndo TCPPartialUndo TCPDSACKUndo TCPLossUndo TCPLostRetransmit TCPRenoFailures TCPSackFailures TCPLossFailures TCPFastRetrans TCPSlowStartRetrans TCPTimeouts TCPLossProbes TCPLossProbeRecovery TCPRenoRecoveryFail TCPSackRecoveryFail TCPRcvCollapsed TCPBacklogCoalesce TCPDSACKOldSent TCPDSACKOfoSent TCPDSACKRecv TCPDSACKOfoRecv TCPAbortOnData TCPAbortOnClose TCPAbortOnMemory TCPAbortOnTimeout TCPAbortOnLinger TCPAbortFailed TCPMemoryPressures TCPMemoryPressuresChrono TCPSACKDiscard TCPDSACKIgnoredOld TCPDSACKIgnoredNoUndo TCPSpuriousRTOs TCPMD5NotFound TCPMD5Unexpected TCPMD5Failure TCPSackShifted TCPSackMerged TCPSackShiftFallback TCPBacklogDrop PFMemallocDrop TCPMinTTLDrop TCPDeferAcceptDrop IPReversePathFilter TCPTimeWaitOverflow TCPReqQFullDoCookies TCPReqQFullDrop TCPRetransFail TCPRcvCoalesce TCPOFOQueue TCPOFODrop TCPOFOMerge TCPChallengeACK TCPSYNChallenge TCPFastOpenActive TCPFastOpenActiveFail TCPFastOpenPassive TCPFastOpenPassiveFail TCPFastOpenListenOverflow TCPFastOpenCookieReqd TCPFastOpenBlackhole TCPSpuriousRtxHostQueues BusyPollRxPackets TCPAutoCorking TCPFromZeroWindowAdv TCPToZeroWindowAdv TCPWantZeroWindowAdv TCPSynRetrans TCPOrigDataSent TCPHystartTrainDetect TCPHystartTrainCwnd TCPHystartDelayDetect TCPHystartDelayCwnd TCPACKSkippedSynRecv TCPACKSkippedPAWS TCPACKSkippedSeq TCPACKSkippedFinWait2 TCPACKSkippedTimeWait TCPACKSkippedChallenge TCPWinProbe TCPKeepAlive TCPMTUPFail TCPMTUPSuccess TCPDelivered TCPDeliveredCE TCPAckCompressed TCPZeroWindowDrop TCPRcvQDrop TCPWqueueTooBig TCPFastOpenPassiveAltKey TcpTimeoutRehash TcpDuplicateDataRehash TCPDSACKRecvSegs TCPDSACKIgnoredDubious TCPMigrateReqSuccess TCPMigrateReqFailure TCPPLBRehash TCPAORequired TCPAOBad TCPAOKeyNotFound TCPAOGood TCPAODroppedIcmps
TcpExt: 326 1046 0 0 0 0 0 0 0 0 34358 833 0 0 0 0 0 0 36 59638 14 103 33933 33933 78519080 149551 78688071 0 0 0 0 0 0 0 0 0 0 2677 0 0 0 0 0 23504 475 175 0 0 0 1501 103 0 93 0 438 11222 0 0 0 0 0 0 0 0 93 0 0 0 0 0 0 0 0 0 0 0 0 0 326 0 0 11520 0 0 0 31 31 0 0 0 0 0 0 0 2 0 1987 113 113 26 22885 107269696 0 0 0 0 0 0 0 0 0 0 0 2 0 0 107312442 0 0 0 0 0 0 23473 0 93 0 0 0 0 0 0 0 0 0
IpExt: InNoRoutes InTruncatedPkts InMcastPkts OutMcastPkts InBcastPkts OutBcastPkts InOctets OutOctets InMcastOctets OutMcastOctets InBcastOctets OutBcastOctets InCsumErrors InNoECTPkts InECT1Pkts InECT0Pkts InCEPkts ReasmOverlaps
IpExt: 0 0 0 0 0 0 62037195550 61777276496 0 0 0 0 0 107743262 0 0 0 0
MPTcpExt: MPCapableSYNRX MPCapableSYNTX MPCapableSYNACKRX MPCapableACKRX MPCapableFallbackACK MPCapableFallbackSYNACK MPCapableSYNTXDrop MPCapableSYNTXDisabled MPCapableEndpAttempt MPFallbackTokenInit MPTCPRetrans MPJoinNoTokenFound MPJoinSynRx MPJoinSynBackupRx MPJoinSynAckRx MPJoinSynAckBackupRx MPJoinSynAckHMacFailure MPJoinAckRx MPJoinAckHMacFailure MPJoinRejected MPJoinSynTx MPJoinSynTxCreatSkErr MPJoinSynTxBindErr MPJoinSynTxConnectErr DSSNotMatching DSSCorruptionFallback DSSCorruptionReset InfiniteMapTx InfiniteMapRx DSSNoMatchTCP DataCsumErr OFOQueueTail OFOQueue OFOMerge NoDSSInWindow DuplicateData AddAddr AddAddrTx AddAddrTxDrop EchoAdd EchoAddTx EchoAddTxDrop PortAdd AddAddrDrop MPJoinPortSynRx MPJoinPortSynAckRx MPJoinPortAckRx MismatchPortSynRx MismatchPortAckRx RmAddr RmAddrDrop RmAddrTx RmAddrTxDrop RmSubflow MPPrioTx MPPrioRx MPFailTx MPFailRx MPFastcloseTx MPFastcloseRx MPRstTx MPRstRx SubflowStale SubflowRecover SndWndShared RcvWndShared RcvWndConflictUpdate RcvWndConflict MPCurrEstab Blackhole MPCapableDataFallback MD5SigFallback DssFallback SimultConnectFallback FallbackFailed WinProbe
MPTcpExt: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
"#;

/// /proc/net/netstat after them.
const NETSTAT_AFTER: &str = r#"TcpExt: SyncookiesSent SyncookiesRecv SyncookiesFailed EmbryonicRsts PruneCalled RcvPruned OfoPruned OutOfWindowIcmps LockDroppedIcmps ArpFilter TW TWRecycled TWKilled PAWSActive PAWSEstab BeyondWindow TSEcrRejected PAWSOldAck PAWSTimewait DelayedACKs DelayedACKLocked DelayedACKLost ListenOverflows ListenDrops TCPHPHits TCPPureAcks TCPHPAcks TCPRenoRecovery TCPSackRecovery TCPSACKReneging TCPSACKReorder TCPRenoReorder TCPTSReorder TCPFullUndo TCPPartialUndo TCPDSACKUndo TCPLossUndo TCPLostRetransmit TCPRenoFailures TCPSackFailures TCPLossFailures TCPFastRetrans TCPSlowStartRetrans TCPTimeouts TCPLossProbes TCPLossProbeRecovery TCPRenoRecoveryFail TCPSackRecoveryFail TCPRcvCollapsed TCPBacklogCoalesce TCPDSACKOldSent TCPDSACKOfoSent TCPDSACKRecv TCPDSACKOfoRecv TCPAbortOnData TCPAbortOnClose TCPAbortOnMemory TCPAbortOnTimeout TCPAbortOnLinger TCPAbortFailed TCPMemoryPressures TCPMemoryPressuresChrono TCPSACKDiscard TCPDSACKIgnoredOld TCPDSACKIgnoredNoUndo TCPSpuriousRTOs TCPMD5NotFound TCPMD5Unexpected TCPMD5Failure TCPSackShifted TCPSackMerged TCPSackShiftFallback TCPBacklogDrop PFMemallocDrop TCPMinTTLDrop TCPDeferAcceptDrop IPReversePathFilter TCPTimeWaitOverflow TCPReqQFullDoCookies TCPReqQFullDrop TCPRetransFail TCPRcvCoalesce TCPOFOQueue TCPOFODrop TCPOFOMerge TCPChallengeACK TCPSYNChallenge TCPFastOpenActive TCPFastOpenActiveFail TCPFastOpenPassive TCPFastOpenPassiveFail TCPFastOpenListenOverflow TCPFastOpenCookieReqd TCPFastOpenBlackhole TCPSpuriousRtxHostQueues BusyPollRxPackets TCPAutoCorking TCPFromZeroWindowAdv TCPToZeroWindowAdv TCPWantZeroWindowAdv TCPSynRetrans TCPOrigDataSent TCPHystartTrainDetect TCPHystartTrainCwnd TCPHystartDelayDetect TCPHystartDelayCwnd TCPACKSkippedSynRecv TCPACKSkippedPAWS TCPACKSkippedSeq TCPACKSkippedFinWait2 TCPACKSkippedTimeWait TCPACKSkippedChallenge TCPWinProbe TCPKeepAlive TCPMTUPFail TCPMTUPSuccess TCPDelivered TCPDeliveredCE TCPAckCompressed TCPZeroWindowDrop TCPRcvQDrop TCPWqueueTooBig TCPFastOpenPassiveAltKey TcpTimeoutRehash TcpDuplicateDataRehash TCPDSACKRecvSegs TCPDSACKIgnoredDubious TCPMigrateReqSuccess TCPMigrateReqFailure TCPPLBRehash TCPAORequired TCPAOBad TCPAOKeyNotFound TCPAOGood TCPAODroppedIcmps
TcpExt: 326 1046 0 0 0 0 0 0 0 0 34358 833 0 0 0 0 0 0 36 59638 14 103 33947 33947 78519080 149559 78688071 0 0 0 0 0 0 0 0 0 0 2677 0 0 0 0 0 23511 475 175 0 0 0 1501 103 0 93 0 438 11222 0 0 0 0 0 0 0 0 93 0 0 0 0 0 0 0 0 0 0 0 0 0 326 0 0 11520 0 0 0 31 31 0 0 0 0 0 0 0 2 0 1987 113 113 26 22892 107269696 0 0 0 0 0 0 0 0 0 0 0 2 0 0 107312450 0 0 0 0 0 0 23480 0 93 0 0 0 0 0 0 0 0 0
IpExt: InNoRoutes InTruncatedPkts InMcastPkts OutMcastPkts InBcastPkts OutBcastPkts InOctets OutOctets InMcastOctets OutMcastOctets InBcastOctets OutBcastOctets InCsumErrors InNoECTPkts InECT1Pkts InECT0Pkts InCEPkts ReasmOverlaps
IpExt: 0 0 0 0 0 0 62037197766 61777278712 0 0 0 0 0 107743300 0 0 0 0
MPTcpExt: MPCapableSYNRX MPCapableSYNTX MPCapableSYNACKRX MPCapableACKRX MPCapableFallbackACK MPCapableFallbackSYNACK MPCapableSYNTXDrop MPCapableSYNTXDisabled MPCapableEndpAttempt MPFallbackTokenInit MPTCPRetrans MPJoinNoTokenFound MPJoinSynRx MPJoinSynBackupRx MPJoinSynAckRx MPJoinSynAckBackupRx MPJoinSynAckHMacFailure MPJoinAckRx MPJoinAckHMacFailure MPJoinRejected MPJoinSynTx MPJoinSynTxCreatSkErr MPJoinSynTxBindErr MPJoinSynTxConnectErr DSSNotMatching DSSCorruptionFallback DSSCorruptionReset InfiniteMapTx InfiniteMapRx DSSNoMatchTCP DataCsumErr OFOQueueTail OFOQueue OFOMerge NoDSSInWindow DuplicateData AddAddr AddAddrTx AddAddrTxDrop EchoAdd EchoAddTx EchoAddTxDrop PortAdd AddAddrDrop MPJoinPortSynRx MPJoinPortSynAckRx MPJoinPortAckRx MismatchPortSynRx MismatchPortAckRx RmAddr RmAddrDrop RmAddrTx RmAddrTxDrop RmSubflow MPPrioTx MPPrioRx MPFailTx MPFailRx MPFastcloseTx MPFastcloseRx MPRstTx MPRstRx SubflowStale SubflowRecover SndWndShared RcvWndShared RcvWndConflictUpdate RcvWndConflict MPCurrEstab Blackhole MPCapableDataFallback MD5SigFallback DssFallback SimultConnectFallback FallbackFailed WinProbe
MPTcpExt: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
"#;

/// /proc/self/cgroup on this cgroup v1 host with a v2 hierarchy beside it.
const PID_CGROUP_HYBRID: &str = r#"9:name=systemd:/
8:pids:/
7:blkio:/
6:freezer:/
5:devices:/
4:memory:/process_api/5e6b5737b6bf5a909d7635cd53837b7c
3:cpuset:/
2:cpuacct:/
1:cpu:/
0::/
"#;

/// cpu.stat of the v2 root (/sys/fs/cgroup/unified).
const CPU_STAT_V2_UNIFIED: &str = r#"usage_usec 6688573709
user_usec 5149072977
system_usec 1539500731
nice_usec 0
"#;

/// cpu.stat of the v1 cpu controller's root (/sys/fs/cgroup/cpu).
const CPU_STAT_V1: &str = r#"nr_periods 0
nr_throttled 0
throttled_time 0
nr_bursts 0
burst_time 0
"#;

/// The sock_diag request python3 sent for AF_INET listeners (seq 1).
const DIAG_REQUEST_V4: &str = concat!(
    "480000001400010301000000000000000206000000040000000000000000000000000000000000000000000000000000",
    "000000000000000000000000000000000000000000000000",
);

/// The same for AF_INET6.
const DIAG_REQUEST_V6: &str = concat!(
    "480000001400010301000000000000000a06000000040000000000000000000000000000000000000000000000000000",
    "000000000000000000000000000000000000000000000000",
);

/// The kernel's first datagram for AF_INET: three inet_diag_msg records with attributes.
const DIAG_REPLY_V4: &str = concat!(
    "7c0000001400020001000000de7c0000020a0000ddd300007f0000010000000000000000000000000000000000000000",
    "000000000000000000000000050000000000000000000000030000000700000000000000531c05000500080000000000",
    "08000f00000000000c001500010000000000000006001600520000007c0000001400020001000000de7c0000020a0000",
    "46af00007f00000100000000000000000000000000000000000000000000000000000000000000000200000000000000",
    "00000000000000000010000000000000ad930000050008000000000008000f00000000000c0015000100000000000000",
    "06001600520000007c0000001400020001000000de7c0000020a000007e8000000000000000000000000000000000000",
    "00000000000000000000000000000000000000000100000000000000000000000000000080000000000000006c000000",
    "050008000000000008000f00000000000c00150001000000000000000600160052000000",
);

/// The kernel's first datagram for AF_INET6: one record.
const DIAG_REPLY_V6: &str = concat!(
    "840000001400020001000000de7c00000a0a0000a21b0000000000000000000000000000000000010000000000000000",
    "000000000000000000000000060000000000000000000000010000000500000000000000571c05000500080000000000",
    "05000b000100000008000f00000000000c00150001000000000000000600160012000000",
);

/// The kernel's last datagram of each dump: NLMSG_DONE.
const DIAG_DONE: &str = "140000000300020001000000de7c000000000000";
