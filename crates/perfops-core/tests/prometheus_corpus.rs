//! Issue #12, point 3, for the Prometheus text parser (besides the
//! never-panics and one-sample round-trip properties of `telemetry.rs`):
//!
//! - the corpus `tests/corpus/prometheus/NAME--ok.txt` / `NAME--err_line_N.txt`,
//!   inputs worth keeping (CRLF, special floats, escapes, declared-only
//!   families; duplicate `# TYPE`, quoted names, bad `le`, timestamps past
//!   `i64`, NUL bytes, lines cut short), each parsed strictly to what its name
//!   says and leniently without a panic, its rates and gauges computed;
//! - generated whole expositions (families of every kind with `# HELP` and
//!   `# TYPE`, histogram buckets, summary quantiles, comments and blank lines
//!   between, LF or CRLF) parse to the families generated, whatever follows a
//!   cut: every prefix of the text parses leniently.

use perfops_core::telemetry::prometheus::{Kind, gauges, parse, parse_lenient, rates};
use proptest::prelude::*;

#[test]
fn corpus_parses_as_named() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/prometheus");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 10, "corpus in {}", dir.display());
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).into_owned();
        let want = name.rsplit("--").next().unwrap().trim_end_matches(".txt");
        let lenient = parse_lenient(&text);
        let _ = gauges(&lenient.families);
        let _ = rates(&lenient.families, 0.0, &lenient.families, 1.0);
        match (want, parse(&text)) {
            // Debug, not ==: NaN values are in the corpus.
            ("ok", Ok(families)) => assert_eq!(format!("{families:?}"), format!("{:?}", lenient.families), "{name}"),
            (w, Err(e)) if w.strip_prefix("err_line_").and_then(|n| n.parse().ok()) == Some(e.line) => {}
            (w, got) => panic!("{name}: want {w}, got {got:?}"),
        }
    }
}

/// A sample as generated: its name (suffix included), labels and value.
type GenSample = (String, Vec<(String, String)>, f64);

/// A family as generated: name, kind, help, and its samples (suffix,
/// labels, value) in the order written.
#[derive(Debug, Clone)]
struct Gen {
    name: String,
    kind: Kind,
    help: Option<String>,
    samples: Vec<GenSample>,
}

fn family(i: usize) -> impl Strategy<Value = Gen> {
    let kind = prop::sample::select(vec![Kind::Counter, Kind::Gauge, Kind::Histogram, Kind::Summary, Kind::Untyped]);
    // Blanks before the text are the separator's, as in `expfmt`: the text starts after them.
    let help = prop::option::of("[a-zA-Z.,\\\\\n][a-zA-Z .,\\\\\n]{0,30}");
    let values = prop::collection::vec(-1e12f64..1e12, 1..5);
    let label = "[a-z]{1,6}".prop_filter("not le/quantile", |l| l != "le" && l != "quantile");
    (kind, help, values, label, "[ -~é✓]{0,12}").prop_map(move |(kind, help, values, label, lv)| {
        let name = format!("m{i}_x");
        let mut samples = Vec::new();
        match kind {
            Kind::Histogram => {
                let mut count = 0.0;
                for (k, v) in values.iter().enumerate() {
                    count += v.abs().floor();
                    samples.push((format!("{name}_bucket"), vec![("le".into(), format!("{}", k + 1))], count));
                }
                samples.push((format!("{name}_bucket"), vec![("le".into(), "+Inf".into())], count));
                samples.push((format!("{name}_sum"), vec![], values.iter().sum()));
                samples.push((format!("{name}_count"), vec![], count));
            }
            Kind::Summary => {
                for (k, v) in values.iter().enumerate() {
                    let q = format!("0.{}", k + 1);
                    samples.push((name.clone(), vec![("quantile".into(), q)], *v));
                }
                samples.push((format!("{name}_sum"), vec![], values.iter().sum()));
                samples.push((format!("{name}_count"), vec![], values.len() as f64));
            }
            _ => {
                for (k, v) in values.iter().enumerate() {
                    samples.push((name.clone(), vec![(label.clone(), format!("{lv}{k}"))], *v));
                }
            }
        }
        Gen { name, kind, help, samples }
    })
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn render(families: &[Gen], crlf: bool, noise: &[bool]) -> String {
    let eol = if crlf { "\r\n" } else { "\n" };
    let mut o = String::new();
    for (i, f) in families.iter().enumerate() {
        if noise.get(i).copied().unwrap_or(false) {
            o.push_str(&format!("# a comment{eol}{eol}"));
        }
        if let Some(h) = &f.help {
            o.push_str(&format!("# HELP {} {}{eol}", f.name, h.replace('\\', "\\\\").replace('\n', "\\n")));
        }
        if f.kind != Kind::Untyped || i % 2 == 0 {
            o.push_str(&format!("# TYPE {} {}{eol}", f.name, f.kind.name()));
        }
        for (name, labels, v) in &f.samples {
            let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape_label(v))).collect();
            let labels = if labels.is_empty() { String::new() } else { format!("{{{}}}", labels.join(",")) };
            o.push_str(&format!("{name}{labels} {v:?}{eol}"));
        }
    }
    o
}

fn families() -> impl Strategy<Value = Vec<Gen>> {
    (1usize..5).prop_flat_map(|n| (0..n).map(family).collect::<Vec<_>>())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    /// A generated exposition parses strictly to the families generated;
    /// every prefix of it (a scrape cut short) parses leniently.
    #[test]
    fn generated_expositions_parse_to_what_was_generated(
        fams in families(),
        crlf in any::<bool>(),
        noise in prop::collection::vec(any::<bool>(), 0..5),
        cut in any::<prop::sample::Index>(),
    ) {
        let text = render(&fams, crlf, &noise);
        let parsed = parse(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(parsed.len(), fams.len(), "{}", text);
        for (p, g) in parsed.iter().zip(&fams) {
            prop_assert_eq!(&p.name, &g.name);
            prop_assert_eq!(p.kind, g.kind);
            prop_assert_eq!(&p.help, &g.help);
            let got: Vec<GenSample> =
                p.samples.iter().map(|s| (s.name.clone(), s.labels.clone(), s.value)).collect();
            prop_assert_eq!(&got, &g.samples);
        }
        let mut at = cut.index(text.len() + 1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        let cut_short = parse_lenient(&text[..at]);
        prop_assert!(cut_short.warnings.len() <= 1, "only the cut line may be bad: {:?}", cut_short.warnings);
    }
}
