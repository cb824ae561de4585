//! Issue #15: the PromQL answer parser, like the text-format one (`prometheus_corpus.rs`):
//!
//! - the corpus `tests/corpus/promql/NAME--ok_N.json` (N series) / `NAME--err.json`, answers worth
//!   keeping (special values, a scalar, a matrix, a native histogram beside a warning; Prometheus'
//!   own errors, a proxy's HTML page, a body cut short), each parsed to what its name says;
//! - generated answers (vectors of series with any labels and values, Go's spellings of the
//!   special floats) parse back to what was generated, and no prefix or byte-flip of one panics.

use perfops_core::telemetry::promql::{PromqlError, parse_answer};
use proptest::prelude::*;

#[test]
fn corpus_parses_as_named() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/promql");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 10, "corpus in {}", dir.display());
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let body = std::fs::read(&f).unwrap();
        let want = name.rsplit("--").next().unwrap().trim_end_matches(".json");
        match (want, parse_answer(&body)) {
            ("err", Err(_)) => {}
            (w, Ok(a)) if w.strip_prefix("ok_").and_then(|n| n.parse().ok()) == Some(a.series.len()) => {}
            (w, got) => panic!("{name}: want {w}, got {got:?}"),
        }
    }
}

/// Go's `strconv.FormatFloat(v, 'f', -1, 64)` as Prometheus writes values, special ones included.
fn go_float(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        8 => -1e15f64..1e15,
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
    ]
}

type GenSeries = (Vec<(String, String)>, f64);

fn answer() -> impl Strategy<Value = Vec<GenSeries>> {
    let labels = prop::collection::btree_map("[a-z_]{1,8}", "[ -~é✓\n\"\\\\]{0,10}", 0..4)
        .prop_map(|m| m.into_iter().filter(|(k, _)| k != "__name__").collect::<Vec<_>>());
    prop::collection::vec((labels, value()), 0..6)
}

fn render(series: &[GenSeries], t: f64) -> String {
    let items: Vec<serde_json::Value> = series
        .iter()
        .map(|(labels, v)| {
            let mut metric: serde_json::Map<String, serde_json::Value> =
                labels.iter().map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone()))).collect();
            metric.insert("__name__".into(), "m".into());
            serde_json::json!({ "metric": metric, "value": [t, go_float(*v)] })
        })
        .collect();
    serde_json::json!({ "status": "success", "data": { "resultType": "vector", "result": items } }).to_string()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// A generated vector parses to the series generated, in order, `__name__` dropped.
    #[test]
    fn generated_answers_parse_to_what_was_generated(series in answer(), t in 0.0f64..2e9) {
        let body = render(&series, t);
        let got = parse_answer(body.as_bytes()).map_err(|e| TestCaseError::fail(format!("{e}\n{body}")))?;
        prop_assert_eq!(got.series.len(), series.len());
        for (g, (labels, v)) in got.series.iter().zip(&series) {
            prop_assert_eq!(&g.labels, labels);
            // serde_json reads floats to within an ulp (no `float_roundtrip`); Prometheus' are in ms.
            prop_assert!((g.t - t).abs() <= t * 1e-15, "{} vs {}", g.t, t);
            prop_assert!(g.value == *v || (g.value.is_nan() && v.is_nan()), "{} vs {}", g.value, v);
        }
    }

    /// Whatever is done to an answer (cut anywhere, a byte changed), the parser answers and does
    /// not panic; a cut answer is never taken for a whole one.
    #[test]
    fn damaged_answers_never_panic(series in answer(), cut in any::<prop::sample::Index>(),
                                   flip in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let body = render(&series, 1.0).into_bytes();
        let at = cut.index(body.len());
        prop_assert!(matches!(parse_answer(&body[..at]), Err(PromqlError::NotJson(_))), "a prefix of {} bytes", at);
        let mut changed = body.clone();
        let i = flip.index(changed.len());
        changed[i] = byte;
        let _ = parse_answer(&changed);
    }

    /// Arbitrary bytes: an error or an answer, never a panic.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = parse_answer(&bytes);
    }
}
