//! Figures and text as people read them in the report, the comparison page,
//! the run listing, JUnit and the terminal: numbers without needless
//! decimals, milliseconds, times as `m:ss`, and escaping for HTML text and
//! XML attributes.
//!
//! It owns formatting only: what to show is decided by the callers (`html`,
//! `compare`, `runs`, `junit`, `run.rs`'s table, the live line, `quick`, and
//! the binary's `limit`, `sweep` and `--debug` lines), which all format
//! through here so one figure reads the same everywhere: a rate
//! ([`per_second`]: the headline once said "capacity 24/s" and the card
//! "23.8/s") and a latency ([`ms`], [`ms_compact`]: four copies once rounded
//! a 1234.5 ms p99 as `1234.50 ms`, `1.23 s`, `1.23s` and `1234ms`). Tables
//! with the unit in their header (`quick`'s ab-like percentiles, `sweep`'s
//! columns) print bare numbers in the form of the tools they mimic.

/// `s` safe as HTML text or attribute value.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `s` safe as an XML attribute value: newlines kept as `&#10;`, other
/// control characters (not allowed in XML 1.0) dropped.
pub(crate) fn xml_attr(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\n' => out.push_str("&#10;"),
            c if (c as u32) < 0x20 && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

/// A number for people: no more decimals than it needs.
pub(crate) fn number(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 0.01 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// Milliseconds, as `0.42 ms`, `812.3 ms`, `1.52 s`; `–` when not available:
/// the report, the comparison page and the lines of text. Rounded as
/// [`ms_compact`].
pub fn ms(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(v) => {
            let (n, unit) = ms_parts(v);
            format!("{n} {unit}")
        }
    }
}

/// Milliseconds as the terminal's tables and lines print them (the stage
/// table, the live line, `compare`, `limit`, `sweep`, `--debug`), without a
/// space: `0.42ms`, `21.4ms`, `1.52s`.
pub fn ms_compact(v: f64) -> String {
    let (n, unit) = ms_parts(v);
    format!("{n}{unit}")
}

/// The one rounding of a latency: two decimals below 10 ms, one below 1 s,
/// seconds with two decimals from there; chosen by the figure as printed, so
/// that 9.996 ms is `10.0 ms`, not `10.00 ms`. One place from 10 ms: a p95 of
/// 250.4 ms that failed `p95 < 250ms` read "250 ms".
fn ms_parts(v: f64) -> (String, &'static str) {
    let a = v.abs();
    if a < 9.995 {
        (format!("{v:.2}"), "ms")
    } else if a < 999.95 {
        (format!("{v:.1}"), "ms")
    } else {
        (format!("{:.2}", v / 1000.0), "s")
    }
}

/// A rate without its unit, as every output says it: to a tenth from 1/s
/// (`205.3`, `23.8`, `24`: what the stage tables and a stage's reasons
/// print), to a hundredth below (`0.6`, `0.25`), without trailing zeros.
pub fn rate_number(v: f64) -> String {
    let n = if v.abs() >= 1.0 { format!("{v:.1}") } else { format!("{v:.2}") };
    if n.contains('.') { n.trim_end_matches('0').trim_end_matches('.').to_string() } else { n }
}

/// A rate (arrivals or answers per second) as every output says it: the
/// headline, the stage tables, the report's cards, `runs`, `compare` and
/// `limit`: `205/s`, `23.8/s`, `24/s`, `0.6/s`.
pub fn per_second(v: f64) -> String {
    format!("{}/s", rate_number(v))
}

/// What is said of a run that broke with no capacity: "no stage held" only
/// when no stage held (`any_held` false); a stage that held after the break
/// (a recovery) is no capacity, but "no stage held" beside it is untrue (#32).
pub fn none_held(any_held: bool) -> &'static str {
    if any_held { "no stage held before the break" } else { "no stage held" }
}

/// Per second, as `205/s`; `–` when not available.
pub(crate) fn rate(v: Option<f64>) -> String {
    v.map_or("–".into(), per_second)
}

/// A ratio in percent, as `3.20%`, `<0.01%`; `–` when not available.
pub(crate) fn percent(ratio: Option<f64>) -> String {
    match ratio {
        None => "–".into(),
        Some(0.0) => "0%".into(),
        Some(r) if r < 0.0001 => "<0.01%".into(),
        Some(r) => format!("{}%", number(r * 100.0)),
    }
}

/// A count; `–` when not available.
pub(crate) fn count(v: Option<u64>) -> String {
    v.map_or("–".into(), |n| n.to_string())
}

/// `m:ss` (or `h:mm:ss`) from the run's start.
pub(crate) fn clock(t: f64) -> String {
    let s = t.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// An RFC 3339 UTC time as people read it: `2026-11-22 04:30:00 UTC`.
pub(crate) fn utc(rfc3339: &str) -> String {
    rfc3339.replace('T', " ").replace('Z', " UTC")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        let cases = [
            // HTML: markup becomes text.
            (escape("<script>alert(1)</script>"), "&lt;script&gt;alert(1)&lt;/script&gt;"),
            (escape("a & b"), "a &amp; b"),
            // Both quotes, for attributes either way quoted.
            (escape(r#"x="1" y='2'"#), "x=&quot;1&quot; y=&#39;2&#39;"),
            (escape("plain é"), "plain é"),
            // XML attributes: a newline survives as a character reference.
            (xml_attr("p95 < 500ms & \"x\""), "p95 &lt; 500ms &amp; &quot;x&quot;"),
            (xml_attr("a\nb"), "a&#10;b"),
            // A control character XML 1.0 does not allow is dropped.
            (xml_attr("a\u{1}b"), "ab"),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }

    /// How a latency rounds, in every output: one rule, two spellings.
    #[test]
    fn milliseconds_round_one_way() {
        // (milliseconds, as text, as the terminal's tables print it)
        let cases = [
            // Below 10 ms: two decimals.
            (0.421, "0.42 ms", "0.42ms"),
            (0.0, "0.00 ms", "0.00ms"),
            // Half-way rounds to even in binary: 0.125 is exact, and goes down.
            (0.125, "0.12 ms", "0.12ms"),
            // Just under 10 ms, rounding up to 10: one decimal, as 10 ms itself.
            (9.996, "10.0 ms", "10.0ms"),
            // From 10 ms to 1 s: one decimal; not "250 ms" beside a failed `p95 < 250ms`.
            (250.4, "250.4 ms", "250.4ms"),
            (812.34, "812.3 ms", "812.3ms"),
            // Just under 1 s, rounding up to it: seconds.
            (999.96, "1.00 s", "1.00s"),
            // From 1 s: seconds, two decimals.
            (1523.0, "1.52 s", "1.52s"),
            (1234.5, "1.23 s", "1.23s"),
            (60_000.0, "60.00 s", "60.00s"),
            // A difference (compare's deltas) rounds as its size does.
            (-12.34, "-12.3 ms", "-12.3ms"),
        ];
        for (v, text, compact) in cases {
            assert_eq!((ms(Some(v)), ms_compact(v)), (text.to_string(), compact.to_string()), "{v}");
        }
        assert_eq!(ms(None), "–");
    }

    #[test]
    fn figures_for_people() {
        let cases = [
            (rate(Some(205.345)), "205.3/s"),
            (rate(Some(12.34)), "12.3/s"),
            // #32: one form for a rate everywhere, no needless zeros.
            (per_second(23.77), "23.8/s"),
            (per_second(24.0), "24/s"),
            (per_second(0.6), "0.6/s"),
            (per_second(0.25), "0.25/s"),
            (per_second(9.96), "10/s"),
            (per_second(194.5), "194.5/s"),
            (rate_number(0.0), "0"),
            (percent(Some(0.032)), "3.20%"),
            (percent(Some(0.0)), "0%"),
            (percent(Some(0.000_01)), "<0.01%"),
            (count(Some(12)), "12"),
            (count(None), "–"),
            (clock(63.4), "1:03"),
            (clock(3725.0), "1:02:05"),
            (utc("2026-11-22T04:30:00Z"), "2026-11-22 04:30:00 UTC"),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }
}
