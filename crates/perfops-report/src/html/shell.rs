//! The document shell shared by the report and the comparison page: the
//! head with uPlot's and the report's style inlined, the error capture the
//! browser tests read, the frames charts are drawn into, and the close with
//! the chart data, uPlot and the page's script, so the file opens anywhere,
//! offline.
//!
//! The chart data goes in once, as JSON in a `<script type="application/json">`
//! with `<`, `>` and `&` escaped so no value can end that element.

use std::fmt::Write;

use serde_json::Value;

use super::charts;
use crate::format::escape;

const UPLOT_JS: &str = include_str!("../../assets/uplot/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../../assets/uplot/uPlot.min.css");
const REPORT_JS: &str = include_str!("report.js");
const REPORT_CSS: &str = include_str!("report.css");

/// JSON that can sit inside a `<script>` element: `</script>` and `<!--`
/// in a string would end or confuse it, so `<`, `>` and `&` become `\u003c`
/// and so on (the same string to a JSON parser).
pub fn script_json(v: &Value) -> String {
    let json = serde_json::to_string(v).unwrap_or_else(|_| "null".into());
    json.replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026")
}

/// The document up to `<main>`: title, the inlined styles, and the error
/// capture; `<body>` says how many charts `data` should draw.
pub(crate) fn open(o: &mut String, title: &str, data: &Value) {
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"perfops {version}\">\n\
         <title>{title}</title>\n<style>{UPLOT_CSS}</style>\n<style>{REPORT_CSS}</style>\n</head>\n\
         <body data-charts-expected=\"{expected}\" data-charts-drawn=\"0\" data-errors=\"0\">\n{CAPTURE}\n<main>\n",
        version = env!("CARGO_PKG_VERSION"),
        title = escape(title),
        expected = charts::expected_charts(data),
    );
}

/// From `</main>` to the end: the footer naming `source`, the chart data,
/// uPlot and the page's script.
pub(crate) fn close(o: &mut String, source: &str, data: &Value) {
    close_with(o, source, data, "");
}

/// [`close`], with one more script after the page's (the live page's
/// `live.js`, which uses what `report.js` exposes).
pub(crate) fn close_with(o: &mut String, source: &str, data: &Value, script: &str) {
    let script = if script.is_empty() { String::new() } else { format!("<script>{script}</script>\n") };
    let _ = write!(
        o,
        "</main>\n<footer>Made by perfops {} from <code>{}</code>. One self-contained file: it opens offline and \
         loads nothing. Charts by <a href=\"https://github.com/leeoniya/uPlot\">uPlot</a> (MIT licence, © Leon Sorokin).</footer>\n\
         <script type=\"application/json\" id=\"perfops-data\">{}</script>\n<script>{UPLOT_JS}</script>\n<script>{REPORT_JS}</script>\n{script}</body>\n</html>\n",
        env!("CARGO_PKG_VERSION"),
        escape(source),
        script_json(data),
    );
}

/// First in the body, before any other script: every error and
/// `console.error` is counted on `<body data-errors>` (and the messages kept
/// in `data-error-messages`), so a headless browser's DOM dump shows them.
const CAPTURE: &str = r#"<script>
(function () {
  var errors = [];
  function note(msg) {
    errors.push(String(msg).slice(0, 300));
    document.body.setAttribute("data-errors", String(errors.length));
    document.body.setAttribute("data-error-messages", errors.join(" | "));
  }
  window.addEventListener("error", function (e) { note(e.message || "error"); });
  window.addEventListener("unhandledrejection", function (e) { note("unhandled rejection: " + e.reason); });
  var orig = console.error;
  console.error = function () { note(Array.prototype.join.call(arguments, " ")); return orig.apply(console, arguments); };
})();
</script>"#;

/// A chart's frame: its title, an optional note and controls (`extra`,
/// trusted HTML), and the element the page's script draws chart `id` into.
pub(crate) fn frame(o: &mut String, id: &str, title: &str, note: &str, extra: &str) {
    let _ = write!(o, "<figure class=\"chart-box\" id=\"box-{id}\"><figcaption><h3>{}</h3>{extra}", escape(title));
    if !note.is_empty() {
        let _ = write!(o, "<p class=\"note\">{}</p>", escape(note));
    }
    let _ = writeln!(o, "</figcaption><div class=\"chart\" data-chart=\"{id}\"></div></figure>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_json_cannot_end_its_element() {
        let v = serde_json::json!({"name": "</script><!-- & -->"});
        let s = script_json(&v);
        assert!(!s.contains('<') && !s.contains('>') && !s.contains('&'), "{s}");
        assert_eq!(serde_json::from_str::<Value>(&s).unwrap(), v, "the same JSON to a parser");
    }
}
