//! Pages in a real browser: Debian's headless Chromium (`/usr/bin/chromium`,
//! installed by `.ci/run`) opens a perfops page (report or comparison) from
//! `file://`, runs its scripts under a virtual-time budget and dumps the DOM;
//! the page records on `<body>` how many charts it drew and every script
//! error (`data-charts-drawn`, `data-errors`), and on each chart frame the
//! pixels its series changed (`data-series-ink`). So "every chart drew,
//! nothing threw" is read from the DOM, not guessed from a screenshot.
//! Screenshots at 1280 px and at 390 px (a phone) are kept under
//! `target/tmp/report-screenshots/` for people to look at.
//!
//! Chromium's window is at least 500 px wide, so the phone view is the page
//! in a 390 px `<iframe>` of a wrapper page, which copies what the page
//! recorded (and whether it overflows 390 px) onto its own body.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::temp_path;

const CHROMIUM: &str = "/usr/bin/chromium";

/// Run headless Chromium on `url` with `extra` flags; its stdout. Fails
/// (does not skip) when Chromium is not installed.
pub fn chromium(url: &str, extra: &[&str]) -> String {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: the report's browser test needs Debian's chromium. \
         .ci/run installs it (apt-get install chromium)"
    );
    let profile = temp_path("chromium-profile", "d");
    // The flags this machine needs (see the environment notes): no sandbox as
    // root, no GPU, and no background networking, which a closed network
    // answers with refused connections.
    let mut child = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--virtual-time-budget=8000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium on {url} still running after 90 s; killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = reader.join().unwrap();
    let stderr = err_reader.join().unwrap();
    let _ = std::fs::remove_dir_all(&profile);
    assert!(status.success(), "chromium {extra:?} {url} exited {status}:\n{stderr}");
    stdout
}

/// The value of attribute `name` in the first tag of `html` that starts with `tag`.
pub fn attr(html: &str, tag: &str, name: &str) -> Option<String> {
    let start = html.find(tag)?;
    let end = start + html[start..].find('>')?;
    let t = &html[start..end];
    let key = format!(" {name}=\"");
    let at = t.find(&key)? + key.len();
    Some(t[at..at + t[at..].find('"')?].to_string())
}

/// What the page embeds for its charts.
pub fn data_of(html: &str) -> Value {
    let open = r#"<script type="application/json" id="perfops-data">"#;
    let start = html.find(open).expect("embedded data") + open.len();
    let end = start + html[start..].find("</script>").unwrap();
    serde_json::from_str(&html[start..end]).expect("embedded data is JSON")
}

/// The charts a page must draw, counted from its data independently of the page.
pub fn charts_in(data: &Value) -> usize {
    data["time_charts"].as_array().map_or(0, Vec::len)
        + data["xy_charts"].as_array().map_or(0, Vec::len)
        + ["watch", "hockey", "spectrum"].iter().filter(|k| !data[**k].is_null()).count()
}

/// Width and height of a PNG, from its header.
pub fn png_size(path: &Path) -> (u32, u32) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("no screenshot {} ({e})", path.display()));
    assert!(bytes.len() > 8 && bytes[..8] == *b"\x89PNG\r\n\x1a\n", "{} is not a PNG", path.display());
    let be = |i: usize| u32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    (be(16), be(20))
}

pub fn screenshots() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Load `report` at 1280 px and in a 390 px frame; assert that every chart
/// drew ink, no script failed, the phone view does not overflow; keep
/// screenshots named `name-1280.png` and `name-390.png`.
pub fn check_in_browser(report: &Path, name: &str, want_charts: usize) {
    let html = std::fs::read_to_string(report).unwrap();
    let data = data_of(&html);
    let expected = charts_in(&data);
    // The charts drawn against time, read from the data, not from the page.
    let mut on_time_axis: Vec<String> = data["time_charts"]
        .as_array()
        .map_or(Vec::new(), |cs| cs.iter().filter_map(|c| c["id"].as_str().map(String::from)).collect());
    if !data["watch"].is_null() {
        on_time_axis.push("watch".into());
    }
    assert_eq!(expected, want_charts, "charts in the data of {name}");
    let url = format!("file://{}", report.display());

    let dom = chromium(&url, &["--window-size=1280,2400", "--dump-dom"]);
    let body = |a: &str| {
        attr(&dom, "<body", a).unwrap_or_else(|| panic!("<body> has no {a}:\n{}", &dom[..dom.len().min(3000)]))
    };
    assert_eq!(body("data-errors"), "0", "{name}: script errors: {:?}", attr(&dom, "<body", "data-error-messages"));
    assert_eq!(body("data-charts-expected"), expected.to_string(), "{name}");
    assert_eq!(body("data-charts-drawn"), expected.to_string(), "{name}: charts drawn");
    let frames: Vec<&str> = dom.split("<div class=\"chart\" ").skip(1).collect();
    assert_eq!(frames.len(), expected, "{name}: chart frames");
    // Plot areas (left edge and width, CSS px) of the charts against time.
    let mut plots: Vec<(String, String)> = Vec::new();
    for f in frames {
        let f = format!("<div {}>", &f[..f.find('>').unwrap_or(f.len())]);
        let id = attr(&f, "<div", "data-chart").unwrap_or_default();
        assert_eq!(attr(&f, "<div", "data-drawn").as_deref(), Some("1"), "{name}: chart {id} did not draw");
        let ink: u64 = attr(&f, "<div", "data-series-ink").and_then(|v| v.parse().ok()).unwrap_or(0);
        assert!(ink > 200, "{name}: chart {id}'s series changed only {ink} pixels");
        if on_time_axis.contains(&id) {
            plots.push((id, attr(&f, "<div", "data-plot").unwrap_or_default()));
        }
    }
    // "Charts on one time axis": a second stands at one x on every one of
    // them, so each has the same plot area (a right-hand axis on one chart
    // once narrowed its plot and shifted its seconds).
    assert_eq!(plots.len(), on_time_axis.len(), "{name}: time charts {plots:?}");
    assert!(
        plots.iter().all(|(_, p)| !p.is_empty() && *p == plots[0].1),
        "{name}: the charts against time have different plot areas (left,width): {plots:?}"
    );

    let shots = screenshots();
    let wide = shots.join(format!("{name}-1280.png"));
    let _ = std::fs::remove_file(&wide);
    chromium(&url, &["--window-size=1280,2400", &format!("--screenshot={}", wide.display())]);
    assert_eq!(png_size(&wide), (1280, 2400));
    assert!(std::fs::metadata(&wide).unwrap().len() > 50_000, "{} is nearly empty", wide.display());

    // The phone: the report in a 390 px frame; the wrapper copies what the
    // report recorded (file:// frames are readable with the flag below).
    let wrapper = report.with_file_name(format!("{name}-phone.html"));
    std::fs::write(
        &wrapper,
        format!(
            r#"<!DOCTYPE html><html><body style="margin:0;background:#fff">
<iframe id="f" src="{url}" style="width:390px;height:5600px;border:0;display:block"></iframe>
<script>
setInterval(function () {{
  var d = document.getElementById("f").contentDocument;
  if (!d || !d.body) return;
  ["data-charts-expected", "data-charts-drawn", "data-errors", "data-error-messages"].forEach(function (a) {{
    if (d.body.hasAttribute(a)) document.body.setAttribute(a.replace("data-", "data-phone-"), d.body.getAttribute(a));
  }});
  document.body.setAttribute("data-phone-width", d.documentElement.clientWidth);
  document.body.setAttribute("data-phone-scroll-width", d.documentElement.scrollWidth);
}}, 100);
</script></body></html>"#
        ),
    )
    .unwrap();
    let wrapper_url = format!("file://{}", wrapper.display());
    let dom = chromium(&wrapper_url, &["--allow-file-access-from-files", "--window-size=500,5600", "--dump-dom"]);
    let phone = |a: &str| attr(&dom, "<body", a).unwrap_or_else(|| panic!("phone view: no {a} on the wrapper:\n{dom}"));
    assert_eq!(
        phone("data-phone-errors"),
        "0",
        "{name} at 390 px: {:?}",
        attr(&dom, "<body", "data-phone-error-messages")
    );
    assert_eq!(phone("data-phone-charts-drawn"), expected.to_string(), "{name} at 390 px: charts drawn");
    assert_eq!(phone("data-phone-width"), "390");
    let scroll: u32 = phone("data-phone-scroll-width").parse().unwrap();
    assert!(scroll <= 390, "{name} at 390 px is {scroll} px wide: it scrolls sideways");
    let narrow = shots.join(format!("{name}-390.png"));
    let _ = std::fs::remove_file(&narrow);
    chromium(
        &wrapper_url,
        &["--allow-file-access-from-files", "--window-size=500,5600", &format!("--screenshot={}", narrow.display())],
    );
    assert_eq!(png_size(&narrow), (500, 5600));
    assert!(std::fs::metadata(&narrow).unwrap().len() > 50_000, "{} is nearly empty", narrow.display());
}

/// Drive one headless Chromium in real time through `steps` (see
/// `cdp.py`: open, wait, until, eval, shot), over the DevTools protocol on
/// a pipe: for a page that changes while it is open (the live page), which
/// `--dump-dom` under a virtual-time budget cannot watch. Returns what each
/// `eval` step gave, in order; fails on any step's error, and after 120 s.
pub fn drive(steps: &Value) -> Vec<Value> {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: the live page's browser tests need Debian's chromium"
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/common/cdp.py");
    let profile = temp_path("chromium-cdp", "d");
    // Debian's python3: the one the test servers use.
    let mut child = Command::new("/usr/bin/python3")
        .arg(&script)
        .arg(CHROMIUM)
        .arg(&profile)
        .arg(steps.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start cdp.py");
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium driven through {steps} still running after 120 s; killed");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = reader.join().unwrap();
    let _ = std::fs::remove_dir_all(&profile);
    let lines: Vec<Value> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    if let Some(e) = lines.iter().find_map(|l| l.get("error")) {
        panic!("in chromium: {e}\n(steps {steps})");
    }
    assert!(status.success(), "cdp.py exited {status}: {text}");
    lines.into_iter().filter_map(|mut l| l.get_mut("eval").map(Value::take)).collect()
}
