//! The Prometheus text exposition format (version 0.0.4): a parser, and what a load test makes of
//! two scrapes (counters turned into per-second rates, gauges kept as they are).
//!
//! It owns the grammar (`# HELP`, `# TYPE`, samples with labels, escapes, special float values,
//! timestamps), the grouping of samples into families (a histogram's `_bucket`, `_sum` and
//! `_count` and a summary's `_sum` and `_count` join the family their `# TYPE` line names), and
//! the arithmetic of [`rates`] and [`gauges`]. It does not fetch anything, does not keep history
//! (the caller holds the previous scrape) and does not speak OpenMetrics or the protobuf format.
//! The UTF-8 quoted names of newer Prometheus versions (`{"my.metric"}`) are refused: a target
//! only sends them when the scraper asks for them, and perfops asks for 0.0.4.
//!
//! Where the format leaves room, the parser follows the Go client's `expfmt` text parser, so a
//! target that Prometheus scrapes is read the same way here: one `# TYPE` per family and before its
//! samples, one `# HELP`, no duplicate label names, `le` and `quantile` values that are floats.
//! It is a little more forgiving in three places real targets need: a trailing `\r` is dropped,
//! trailing blanks after the value are allowed, and an unknown escape in `# HELP` text is kept as
//! written. [`parse_lenient`] goes further and skips bad lines, returning them as warnings.

use std::collections::{HashMap, HashSet};
use std::fmt;

/// The type a `# TYPE` line gives a metric family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Only goes up, except when the process restarts.
    Counter,
    /// Goes up and down.
    Gauge,
    /// Cumulative `_bucket{le=..}` counts, with `_sum` and `_count`.
    Histogram,
    /// `{quantile=..}` values computed by the target, with `_sum` and `_count`.
    Summary,
    /// No `# TYPE` line, or `# TYPE name untyped`.
    Untyped,
}

impl Kind {
    /// The name used in `# TYPE` lines.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
            Kind::Summary => "summary",
            Kind::Untyped => "untyped",
        }
    }

    /// The kind a `# TYPE` line names, in any case (as `expfmt` accepts).
    pub fn from_name(name: &str) -> Option<Kind> {
        [Kind::Counter, Kind::Gauge, Kind::Histogram, Kind::Summary, Kind::Untyped]
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One line of a scrape: a value for one series.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The name as written, with its suffix (`http_request_duration_seconds_bucket`).
    pub name: String,
    /// Labels in the order written, values unescaped; `le` and `quantile` included.
    pub labels: Vec<(String, String)>,
    /// The value; may be NaN or infinite.
    pub value: f64,
    /// The optional timestamp, in milliseconds since the Unix epoch.
    pub timestamp_ms: Option<i64>,
}

/// A metric family: a name, its type and help, and its samples in the order written.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// The family name: the `# TYPE` name, or the sample name when there is no `# TYPE` line.
    pub name: String,
    /// The declared type; [`Kind::Untyped`] when none was declared.
    pub kind: Kind,
    /// The `# HELP` text, unescaped.
    pub help: Option<String>,
    /// The samples. Empty when the family was only declared (a histogram nothing was observed in).
    pub samples: Vec<Sample>,
}

/// A line that is not valid exposition text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

/// What [`parse_lenient`] makes of a scrape: the families of the good lines, and the bad lines.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Parsed {
    /// Families in order of first appearance.
    pub families: Vec<Family>,
    /// One per line that was skipped, in line order.
    pub warnings: Vec<ParseError>,
}

/// Parse a scrape, failing on the first bad line.
pub fn parse(text: &str) -> Result<Vec<Family>, ParseError> {
    let parsed = parse_lenient(text);
    match parsed.warnings.into_iter().next() {
        Some(first) => Err(first),
        None => Ok(parsed.families),
    }
}

/// Parse a scrape, skipping bad lines and returning them as warnings.
///
/// A skipped line changes nothing: a bad `# TYPE` line leaves its family untyped, a bad sample is
/// not added. Real targets emit odd lines (a hand-written exporter, a stray debug print), and one
/// of them should not cost the whole scrape.
pub fn parse_lenient(text: &str) -> Parsed {
    let mut b = Builder::default();
    let mut warnings = Vec::new();
    for (i, raw) in text.split('\n').enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if let Err(message) = lex_line(line).and_then(|l| b.apply(l)) {
            warnings.push(ParseError { line: i + 1, message });
        }
    }
    Parsed { families: b.families, warnings }
}

/// One series: a sample name and its labels, sorted by label name.
///
/// Displays as PromQL writes a selector, `name{a="b",c="d"}` (or just `name`), with label values
/// escaped as in the exposition format.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeriesKey {
    /// The sample name, suffix included.
    pub name: String,
    /// Labels sorted by name.
    pub labels: Vec<(String, String)>,
}

impl SeriesKey {
    /// The key of `name` with `labels` in any order.
    pub fn new(name: impl Into<String>, labels: impl IntoIterator<Item = (String, String)>) -> SeriesKey {
        let mut labels: Vec<(String, String)> = labels.into_iter().collect();
        labels.sort();
        SeriesKey { name: name.into(), labels }
    }

    /// The key of a sample.
    pub fn of(sample: &Sample) -> SeriesKey {
        SeriesKey::new(sample.name.clone(), sample.labels.iter().cloned())
    }
}

impl fmt::Display for SeriesKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if self.labels.is_empty() {
            return Ok(());
        }
        f.write_str("{")?;
        for (i, (name, value)) in self.labels.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{name}=\"")?;
            for c in value.chars() {
                match c {
                    '\\' => f.write_str("\\\\")?,
                    '"' => f.write_str("\\\"")?,
                    '\n' => f.write_str("\\n")?,
                    c => write!(f, "{c}")?,
                }
            }
            f.write_str("\"")?;
        }
        f.write_str("}")
    }
}

/// Per-second rates of the counters between two scrapes taken at `prev_at_s` and `next_at_s`
/// (seconds on any one clock).
///
/// Counted: every sample of a counter family, and the `_sum` and `_count` of histograms and
/// summaries. Buckets are left out: they multiply the series by the number of bounds, and the
/// `_count` and `_sum` rates already give throughput and mean.
///
/// ```text
///   prev ──────── dt = next_at_s - prev_at_s ──────── next
///   rate = (next - prev) / dt           when next >= prev
///   rate =  next         / dt           when next <  prev (the target restarted: it counted from 0)
/// ```
///
/// A series missing from `prev` is counted from 0 when its family was in `prev` (the target
/// creates series on first use, as the demo does for a new status code: those events happened in
/// this interval); otherwise it has no rate yet. A NaN on either side, a non-finite rate and a `dt`
/// that is not positive give nothing. The result is in the order of `next`.
pub fn rates(prev: &[Family], prev_at_s: f64, next: &[Family], next_at_s: f64) -> Vec<(SeriesKey, f64)> {
    let dt = next_at_s - prev_at_s;
    if !(dt > 0.0 && dt.is_finite()) {
        return Vec::new();
    }
    let before: HashMap<SeriesKey, f64> = counter_samples(prev).map(|s| (SeriesKey::of(s), s.value)).collect();
    let families_before: HashSet<&str> = prev.iter().map(|f| f.name.as_str()).collect();
    let mut out = Vec::new();
    for family in next {
        for sample in family.samples.iter().filter(|s| is_counter_like(family, s)) {
            let key = SeriesKey::of(sample);
            let start = match before.get(&key) {
                Some(&v) => v,
                None if families_before.contains(family.name.as_str()) => 0.0,
                None => continue,
            };
            if start.is_nan() || sample.value.is_nan() {
                // Not a reset, not a count: nothing can be said about this interval.
                continue;
            }
            let delta = if sample.value >= start { sample.value - start } else { sample.value };
            let rate = delta / dt;
            if rate.is_finite() {
                out.push((key, rate));
            }
        }
    }
    out
}

/// The values of gauges and untyped samples, and of summary quantiles (the target's own
/// percentiles: they go up and down like a gauge), in the order written.
pub fn gauges(families: &[Family]) -> Vec<(SeriesKey, f64)> {
    let mut out = Vec::new();
    for family in families {
        for sample in &family.samples {
            let keep = match family.kind {
                Kind::Gauge | Kind::Untyped => true,
                Kind::Summary => sample.name == family.name,
                Kind::Counter | Kind::Histogram => false,
            };
            if keep {
                out.push((SeriesKey::of(sample), sample.value));
            }
        }
    }
    out
}

fn counter_samples(families: &[Family]) -> impl Iterator<Item = &Sample> {
    families.iter().flat_map(|f| f.samples.iter().filter(move |s| is_counter_like(f, s)))
}

fn is_counter_like(family: &Family, sample: &Sample) -> bool {
    match family.kind {
        Kind::Counter => true,
        Kind::Histogram | Kind::Summary => {
            matches!(sample.name.strip_prefix(family.name.as_str()), Some("_sum" | "_count"))
        }
        Kind::Gauge | Kind::Untyped => false,
    }
}

/// One line, lexed but not yet placed in a family.
enum Line {
    /// Blank, a comment, or a `# HELP`/`# TYPE` with nothing after the name (`expfmt` ignores it).
    Nothing,
    Help {
        name: String,
        text: String,
    },
    Type {
        name: String,
        kind: Kind,
    },
    Sample(Sample),
}

/// Families being built, and what the format's ordering rules need to know about them.
#[derive(Default)]
struct Builder {
    families: Vec<Family>,
    by_name: HashMap<String, usize>,
    /// Families that had a `# TYPE` line.
    typed: HashSet<usize>,
}

impl Builder {
    /// Place a lexed line. Checks everything before changing anything, so a refused line leaves
    /// no trace.
    fn apply(&mut self, line: Line) -> Result<(), String> {
        match line {
            Line::Nothing => Ok(()),
            Line::Help { name, text } => {
                let i = self.family_for(&name);
                let family = &mut self.families[i];
                if family.help.is_some() {
                    return Err(format!("second HELP line for metric `{}`", family.name));
                }
                family.help = Some(text);
                Ok(())
            }
            Line::Type { name, kind } => {
                let i = self.family_for(&name);
                let family = &mut self.families[i];
                if self.typed.contains(&i) {
                    return Err(format!("second TYPE line for metric `{}`", family.name));
                }
                if !family.samples.is_empty() {
                    return Err(format!("TYPE line for metric `{}` after its samples", family.name));
                }
                family.kind = kind;
                self.typed.insert(i);
                Ok(())
            }
            Line::Sample(sample) => {
                let i = self.family_for(&sample.name);
                let family = &mut self.families[i];
                let special = match family.kind {
                    Kind::Histogram if sample.name.ends_with("_bucket") => Some("le"),
                    Kind::Summary if sample.name == family.name => Some("quantile"),
                    _ => None,
                };
                if let Some(label) = special
                    && let Some((_, v)) = sample.labels.iter().find(|(n, _)| n == label)
                    && parse_float(v).is_none()
                {
                    return Err(format!("expected a float as the value of the `{label}` label, got {v:?}"));
                }
                family.samples.push(sample);
                Ok(())
            }
        }
    }

    /// The family a name belongs to, created (untyped) if there is none. As in `expfmt`: the exact
    /// name first, then the family that `_sum`/`_count` (summary) or `_bucket`/`_sum`/`_count`
    /// (histogram) extend.
    fn family_for(&mut self, name: &str) -> usize {
        if let Some(&i) = self.by_name.get(name) {
            return i;
        }
        for (suffix, kinds) in [
            ("_count", &[Kind::Summary, Kind::Histogram][..]),
            ("_sum", &[Kind::Summary, Kind::Histogram][..]),
            ("_bucket", &[Kind::Histogram][..]),
        ] {
            if let Some(base) = name.strip_suffix(suffix)
                && !base.is_empty()
                && let Some(&i) = self.by_name.get(base)
                && kinds.contains(&self.families[i].kind)
            {
                return i;
            }
        }
        let i = self.families.len();
        self.families.push(Family { name: name.to_string(), kind: Kind::Untyped, help: None, samples: Vec::new() });
        self.by_name.insert(name.to_string(), i);
        i
    }
}

/// A position in one line. Every slice it hands out ends at an ASCII byte or at the end of the
/// line, so slicing never splits a UTF-8 character.
struct Cursor<'a> {
    s: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.pos).copied()
    }

    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn rest(&self) -> &'a str {
        &self.s[self.pos..]
    }

    fn at_end(&self) -> bool {
        self.pos >= self.s.len()
    }

    /// Bytes up to the next blank or the end.
    fn token(&mut self) -> &'a str {
        let start = self.pos;
        while !matches!(self.peek(), None | Some(b' ' | b'\t')) {
            self.pos += 1;
        }
        &self.s[start..self.pos]
    }

    /// A metric name (`[a-zA-Z_:][a-zA-Z0-9_:]*`), or "" when none starts here.
    fn metric_name(&mut self) -> &'a str {
        self.name(|b| b.is_ascii_alphabetic() || b == b'_' || b == b':')
    }

    /// A label name (`[a-zA-Z_][a-zA-Z0-9_]*`), or "" when none starts here.
    fn label_name(&mut self) -> &'a str {
        self.name(|b| b.is_ascii_alphabetic() || b == b'_')
    }

    fn name(&mut self, first: impl Fn(u8) -> bool) -> &'a str {
        let start = self.pos;
        if self.peek().is_some_and(&first) {
            self.pos += 1;
            while self.peek().is_some_and(|b| first(b) || b.is_ascii_digit()) {
                self.pos += 1;
            }
        }
        &self.s[start..self.pos]
    }

    /// A quoted label value, the opening quote already eaten: unescapes `\\`, `\"` and `\n`.
    fn label_value(&mut self) -> Result<String, String> {
        let mut value = String::new();
        let mut chars = self.rest().char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.pos += i + 1;
                    return Ok(value);
                }
                '\\' => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, other)) => return Err(format!("invalid escape `\\{other}` in a label value")),
                    None => break,
                },
                c => value.push(c),
            }
        }
        Err(format!("label value {value:?} is not closed with `\"`"))
    }
}

fn lex_line(line: &str) -> Result<Line, String> {
    let mut c = Cursor { s: line, pos: 0 };
    c.skip_blanks();
    match c.peek() {
        None => Ok(Line::Nothing),
        Some(b'#') => {
            c.pos += 1;
            lex_comment(c)
        }
        Some(_) => lex_sample(c).map(Line::Sample),
    }
}

fn lex_comment(mut c: Cursor<'_>) -> Result<Line, String> {
    c.skip_blanks();
    let keyword = c.token();
    if keyword != "HELP" && keyword != "TYPE" {
        return Ok(Line::Nothing);
    }
    c.skip_blanks();
    if c.at_end() {
        return Ok(Line::Nothing);
    }
    let name = c.metric_name();
    if name.is_empty() || !matches!(c.peek(), None | Some(b' ' | b'\t')) {
        return Err(format!("invalid metric name in a {keyword} line"));
    }
    c.skip_blanks();
    if c.at_end() {
        return Ok(Line::Nothing);
    }
    let name = name.to_string();
    if keyword == "HELP" {
        return Ok(Line::Help { name, text: unescape_help(c.rest()) });
    }
    let word = c.rest().trim_end_matches([' ', '\t']);
    match Kind::from_name(word) {
        Some(kind) => Ok(Line::Type { name, kind }),
        None => Err(format!("unknown metric type {word:?} (counter, gauge, histogram, summary or untyped)")),
    }
}

/// `\\` and `\n` as the format says, `\"` as `expfmt` also accepts; any other backslash is kept:
/// a help text with a Windows path in it is still worth showing.
fn unescape_help(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('\\') => out.push('\\'),
                Some('n') => out.push('\n'),
                Some('"') => out.push('"'),
                _ => {
                    out.push('\\');
                    continue;
                }
            }
            chars.next();
        } else {
            out.push(c);
        }
    }
    out
}

fn lex_sample(mut c: Cursor<'_>) -> Result<Sample, String> {
    if c.peek() == Some(b'{') {
        return Err("a sample needs a metric name before `{` (quoted UTF-8 names are not supported)".into());
    }
    let name = c.metric_name();
    if name.is_empty() {
        return Err(format!("invalid metric name at {:?}", preview(c.rest())));
    }
    let name = name.to_string();
    c.skip_blanks();
    let labels = if c.eat(b'{') { lex_labels(&mut c, &name)? } else { Vec::new() };
    c.skip_blanks();
    let token = c.token();
    if token.is_empty() {
        return Err(format!("sample `{name}` has no value"));
    }
    let value = parse_float(token).ok_or_else(|| format!("expected a float as the value, got {:?}", preview(token)))?;
    c.skip_blanks();
    let timestamp_ms = if c.at_end() {
        None
    } else {
        let token = c.token();
        let ts = token
            .parse::<i64>()
            .map_err(|_| format!("expected an integer timestamp in milliseconds, got {:?}", preview(token)))?;
        c.skip_blanks();
        if !c.at_end() {
            return Err(format!("unexpected text after the timestamp: {:?}", preview(c.rest())));
        }
        Some(ts)
    };
    Ok(Sample { name, labels, value, timestamp_ms })
}

/// The label set after `{`, up to and including `}`. A trailing comma is allowed, as `expfmt` does.
fn lex_labels(c: &mut Cursor<'_>, metric: &str) -> Result<Vec<(String, String)>, String> {
    let mut labels: Vec<(String, String)> = Vec::new();
    loop {
        c.skip_blanks();
        if c.eat(b'}') {
            return no_duplicates(labels, metric);
        }
        if c.at_end() {
            return Err(format!("label set of `{metric}` is not closed with `}}`"));
        }
        let name = c.label_name();
        if name.is_empty() {
            return Err(format!("invalid label name for `{metric}` at {:?}", preview(c.rest())));
        }
        if name == "__name__" {
            return Err("label name `__name__` is reserved".into());
        }
        c.skip_blanks();
        if !c.eat(b'=') {
            return Err(format!("expected `=` after label name `{name}`"));
        }
        c.skip_blanks();
        if !c.eat(b'"') {
            return Err(format!("expected `\"` to open the value of label `{name}`"));
        }
        let value = c.label_value()?;
        labels.push((name.to_string(), value));
        c.skip_blanks();
        if c.eat(b'}') {
            return no_duplicates(labels, metric);
        }
        if !c.eat(b',') {
            return Err(format!("expected `,` or `}}` after the value of label `{name}`"));
        }
    }
}

/// The labels, unless a name appears twice. Sorted rather than compared pairwise: a target that
/// sends thousands of labels on a line must not make the parse quadratic.
fn no_duplicates(labels: Vec<(String, String)>, metric: &str) -> Result<Vec<(String, String)>, String> {
    let mut names: Vec<&str> = labels.iter().map(|(n, _)| n.as_str()).collect();
    names.sort_unstable();
    match names.windows(2).find(|w| w[0] == w[1]) {
        Some(w) => Err(format!("duplicate label `{}` for `{metric}`", w[0])),
        None => Ok(labels),
    }
}

/// A sample value as Go's `strconv.ParseFloat` reads it for `expfmt`: decimal or scientific, and
/// `NaN`, `Inf`, `+Inf`, `-Inf` (also `Infinity`) in any case. Rust's parser accepts the same set,
/// minus Go's hexadecimal floats, which `expfmt` refuses anyway.
fn parse_float(s: &str) -> Option<f64> {
    s.parse::<f64>().ok()
}

/// The start of some text for an error message, cut on a character boundary.
fn preview(s: &str) -> String {
    const MAX: usize = 40;
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_round_trip_through_the_series_key() {
        // Display escapes what the parser unescapes: `\\`, `\"` and `\n`.
        let fams = parse("m{b=\"x\\\\y\",a=\"say \\\"hi\\\"\\n\"} 1\n").unwrap();
        let key = SeriesKey::of(&fams[0].samples[0]);
        assert_eq!(key.labels[0], ("a".to_string(), "say \"hi\"\n".to_string()), "sorted by name");
        assert_eq!(key.to_string(), "m{a=\"say \\\"hi\\\"\\n\",b=\"x\\\\y\"}");
    }

    #[test]
    fn help_keeps_unknown_escapes() {
        assert_eq!(unescape_help(r#"C:\DIR\\FILE a\nb \"q\" end\"#), "C:\\DIR\\FILE a\nb \"q\" end\\");
    }

    #[test]
    fn preview_cuts_on_a_char_boundary() {
        let long = "é".repeat(50);
        assert_eq!(preview(&long).chars().count(), 43);
    }
}
