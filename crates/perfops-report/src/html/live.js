// The live mode of the report page (inlined only in the page `--live`
// serves): opens the run's Server-Sent Events and feeds the charts report.js
// drew empty, second by second; fills the stage verdicts when the run
// concludes; becomes the final report at the end (or freezes, for `quick`);
// sends the control buttons to POST /control.
//
// The token (off loopback) comes in the address the run printed
// (`/?token=...`); it is kept in this closure only, never in storage, and
// taken out of the address bar. Requests send it as `Authorization: Bearer`;
// the event stream cannot (EventSource sets no headers), so it carries it
// as a query parameter, over the same connection the page came by.
//
// What a test reads, on <body>: data-live-state (connecting, live,
// reconnecting, frozen, final), data-live-seconds (seconds received),
// data-live-last-t, data-live-events (actions by hand received),
// data-live-verdicts (stage verdicts received before the end),
// data-live-failing (failing exchanges received), data-live-watched
// (watched samples and probe checks received).
(function () {
  "use strict";
  var R = window.perfopsReport;
  if (!R) return;
  var data = R.data, body = document.body;
  var params = new URLSearchParams(location.search);
  var token = params.get("token");
  if (token && history.replaceState) history.replaceState(null, "", location.pathname);
  // Charts keep about their width in points, as the report's (LTTB).
  var POINTS = 1200;

  var xs = [];
  var cols = {};        // key -> full column of values
  var kinds = [];       // failure kinds seen, in order of appearance
  var marks = [];       // actions by hand: {t, label}
  var seen = -1, lastT = -1, count = 0, nEvents = 0, nVerdicts = 0, nFailing = 0, nWatched = 0, state = "connecting";
  var source = null;
  var PALETTE = ["#dc2626", "#ea580c", "#7c3aed", "#0891b2", "#db2777", "#ca8a04", "#4b5563", "#65a30d"];

  function $(id) { return document.getElementById(id); }
  function setState(s, badge) {
    state = s;
    body.setAttribute("data-live-state", s);
    $("live-badge").textContent = badge;
  }
  function chart(id) {
    return R.timeCharts.filter(function (u) { return u.root.parentNode.getAttribute("data-chart") === id; })[0];
  }
  function def(id) { return (data.time_charts || []).filter(function (c) { return c.id === id; })[0]; }

  // ---- LTTB, as lttb.rs: indices kept, the union over a chart's series ----
  function lttb(x, y, threshold) {
    var n = x.length, out = [0];
    if (threshold >= n || threshold < 3) { for (var i = 1; i < n; i++) out.push(i); return out; }
    var every = (n - 2) / (threshold - 2), a = 0;
    var start = function (b) { return Math.min(Math.floor(b * every) + 1, n - 1); };
    for (var b = 0; b < threshold - 2; b++) {
      var from = start(b), to = Math.max(start(b + 1), from + 1);
      var nf = b + 1 < threshold - 2 ? to : n - 1, nt = b + 1 < threshold - 2 ? Math.max(start(b + 2), to + 1) : n;
      var sx = 0, sy = 0, k = 0;
      for (var j = nf; j < Math.min(nt, n); j++) if (y[j] != null) { sx += x[j]; sy += y[j]; k++; }
      var ay = y[a], cx = k ? sx / k : x[nf], cy = k ? sy / k : (ay == null ? 0 : ay), best = -1, bestA = -1;
      for (j = from; j < Math.min(to, n - 1); j++) {
        if (y[j] == null) continue;
        var yy = ay == null ? y[j] : ay;
        var area = Math.abs((x[a] - cx) * (y[j] - yy) - (x[a] - x[j]) * (cy - yy));
        if (area > bestA) { bestA = area; best = j; }
      }
      a = best < 0 ? from : best;
      out.push(a);
    }
    out.push(n - 1);
    return out;
  }
  function keep(columns) {
    if (xs.length <= POINTS) return null;
    var set = {};
    columns.forEach(function (c) { lttb(xs, c, POINTS).forEach(function (i) { set[i] = true; }); });
    return Object.keys(set).map(Number).sort(function (p, q) { return p - q; });
  }
  function pick(col, idx) { return idx ? idx.map(function (i) { return col[i]; }) : col.slice(); }

  function col(key) {
    if (!cols[key]) { cols[key] = []; for (var i = 0; i < xs.length; i++) cols[key].push(null); }
    return cols[key];
  }

  function redraw() {
    (data.time_charts || []).forEach(function (c) {
      var u = chart(c.id);
      if (!u) return;
      var columns = c.series.map(function (s) { return col(s.key); });
      var idx = keep(columns);
      // Zoomed in by hand (a drag): left there; else the whole run so far.
      var whole = !(u.scales.x.min > 0);
      u.setData([pick(xs, idx)].concat(columns.map(function (cl) { return pick(cl, idx); })), false);
      if (whole) u.setScale("x", { min: 0, max: data.duration_s });
      else u.redraw();
    });
  }

  // A failure kind seen for the first time gets its series on the failures chart.
  function addKind(kind) {
    kinds.push(kind);
    var c = def("failures"), u = chart("failures");
    var s = { label: kind, key: "failure:" + kind, values: [], color: PALETTE[(kinds.length - 1) % PALETTE.length], stepped: true };
    c.series.push(s);
    if (u) u.addSeries(R.seriesOpts(s, "/s"), u.series.length);
  }

  // Actions by hand: drawn as the report draws them (its eventMarks), above the series.
  function withMarks(u) {
    u.hooks.draw = (u.hooks.draw || []).concat([function (u) {
      if (!marks.length) return;
      u.ctx.save();
      R.eventMarks(u, u.ctx, u.bbox, uPlot.pxRatio || 1, marks);
      u.ctx.restore();
    }]);
  }

  // A chart the page holds back until the seconds carry its figures (the
  // streamed answers'), two of one series at least: a line to draw (a run
  // that streams nothing shows none, as its report). Its frame goes after
  // the latency chart, as in the report; report.js draws it, and redraw()
  // feeds it from then on.
  function pending() {
    function drawable(s) { return cols[s.key] && cols[s.key].filter(function (v) { return v != null; }).length >= 2; }
    (data.pending_charts || []).forEach(function (c) {
      if (c.drawn || !c.series.some(drawable)) return;
      c.drawn = true;
      var fig = document.createElement("figure"), cap = document.createElement("figcaption");
      var h = document.createElement("h3"), div = document.createElement("div");
      fig.className = "chart-box";
      fig.id = "box-" + c.id;
      h.textContent = c.title;
      cap.appendChild(h);
      if (c.note) {
        var p = document.createElement("p");
        p.className = "note";
        p.textContent = c.note;
        cap.appendChild(p);
      }
      div.className = "chart";
      div.setAttribute("data-chart", c.id);
      fig.appendChild(cap);
      fig.appendChild(div);
      var after = $("box-latency");
      after.parentNode.insertBefore(fig, after.nextSibling);
      // Drawn first with the run so far: its first draw is what the
      // page's test marks read (data-series-ink).
      c.x = xs.slice();
      c.series.forEach(function (s) { s.values = col(s.key).slice(); });
      data.time_charts.push(c);
      R.addTimeChart(c);
      var u = chart(c.id), lat = chart("latency");
      if (!u) return;
      withMarks(u);
      // The others zoomed in by hand: this one shows the same span.
      if (lat && lat.scales.x.min > 0) u.setScale("x", { min: lat.scales.x.min, max: lat.scales.x.max });
    });
  }

  // Stage boundaries as they happened (hold and next move them).
  function placeStage(name, t) {
    if (name.charAt(0) === "(") return;
    var st = data.stages, cur = null;
    for (var i = 0; i < st.length; i++) if (st[i].name === name && !st[i].seen) { cur = st[i]; break; }
    var open = st.filter(function (s) { return s.seen && !s.closed; })[0];
    if (open && open.name === name) { if (t + 1 > open.end_s) open.end_s = t + 1; return; }
    if (open) { open.end_s = t; open.closed = true; }
    if (!cur) { cur = { name: name, verdict: null }; st.push(cur); }
    var len = cur.end_s - cur.start_s;
    cur.seen = true;
    cur.start_s = t;
    cur.end_s = t + (len > 0 ? len : 1);
  }

  function second(ev) {
    var row = { target: ev.target, achieved: ev.achieved, p50: ev.p50, p90: ev.p90, p99: ev.p99, max: ev.max,
      failed: ev.failed, in_flight: ev.in_flight };
    Object.keys(ev.failures || {}).forEach(function (k) { if (kinds.indexOf(k) < 0) addKind(k); });
    kinds.forEach(function (k) { row["failure:" + k] = (ev.failures || {})[k] || 0; });
    (data.pending_charts || []).forEach(function (c) {
      c.series.forEach(function (s) { if (ev[s.key] != null) row[s.key] = ev[s.key]; });
    });
    // Every column as long as xs before this second, then one more each.
    Object.keys(row).forEach(function (k) { col(k); });
    Object.keys(cols).forEach(function (k) { cols[k].push(row[k] == null ? null : row[k]); });
    xs.push(ev.t);
    pending();
    (ev.events || []).forEach(function (e) {
      marks.push({ t: e.t, label: e.action + (e.value != null ? " " + e.value : "") });
      nEvents++;
    });
    placeStage(ev.stage, ev.t);
    if (ev.verdicts) verdicts(ev.verdicts);
    if (ev.failing) failing(ev.failing);
    if (ev.watch || ev.probes) watched(ev.watch, ev.probes);
    count++;
    lastT = ev.t;
    // Past the planned end (held, or no plan: quick): the axis grows by a tenth.
    if (ev.t + 1 > data.duration_s) R.setDuration(Math.ceil((ev.t + 1) * 1.1));
    body.setAttribute("data-live-seconds", String(count));
    body.setAttribute("data-live-last-t", String(ev.t));
    body.setAttribute("data-live-events", String(nEvents));
    $("live-headline").textContent = "t=" + R.clock(ev.t) + " · " + ev.stage + " · " + R.num(ev.achieved) + "/s" +
      (ev.target != null ? " of " + R.num(ev.target) + "/s" : "") + " · p99 " + R.ms(ev.p99) +
      " · " + R.num(ev.failed) + " failed/s · " + ev.in_flight + " in flight";
    var tb = document.querySelector("#live-steps tbody");
    while (tb.firstChild) tb.removeChild(tb.firstChild);
    (ev.steps || []).forEach(function (s) {
      var tr = document.createElement("tr");
      [s.name, R.num(s.rate) + "/s", R.num(s.failed) + "/s", R.ms(s.p50), R.ms(s.p90), R.ms(s.p99)].forEach(function (v, i) {
        var td = document.createElement(i ? "td" : "th");
        td.textContent = v;
        tr.appendChild(td);
      });
      tb.appendChild(tr);
    });
  }

  // Watched samples and probe checks into data.watch, which report.js's
  // watched-metrics chart draws: a metric's points appended in time, a new
  // metric or source at the end (the picker's indices stay what they were).
  // A probe is a source of two metrics: its response time, and 1 when it failed.
  function watched(samples, probes) {
    var w = data.watch;
    if (!w) return;
    function metric(source, name) {
      var g = w.groups.filter(function (x) { return x.source === source; })[0];
      if (!g) { g = { source: source, metrics: [] }; w.groups.push(g); }
      var m = g.metrics.filter(function (x) { return x.name === name; })[0];
      if (!m) { m = { name: name, x: [], values: [] }; g.metrics.push(m); }
      return m;
    }
    function add(m, t, v) { m.x.push(t); m.values.push(v == null || !isFinite(v) ? null : v); }
    (samples || []).forEach(function (s) {
      Object.keys(s.values || {}).forEach(function (k) { add(metric(s.source, k), s.t, s.values[k]); });
      nWatched++;
    });
    (probes || []).forEach(function (p) {
      add(metric("probe " + p.probe, "response ms"), p.t, p.ms > 0 ? p.ms : null);
      add(metric("probe " + p.probe, "failed"), p.t, p.ok ? 0 : 1);
      nWatched++;
    });
    body.setAttribute("data-live-watched", String(nWatched));
    if (R.watchChanged) R.watchChanged();
  }

  // Failing exchanges, as the report shows them: a collapsed <details>
  // each, text only (a body that holds markup shows it). The run sends the
  // first few of each step and kind, so the list stays short.
  function failing(list) {
    var box = $("live-failing");
    function f3(v) { return Number(v).toFixed(3); }
    list.forEach(function (s) {
      var d = document.createElement("details"), sum = document.createElement("summary"), dl = document.createElement("dl");
      d.className = "exchange";
      dl.className = "kv";
      sum.textContent = s.step + " · " + s.kind + " · t=" + f3(s.t) + "s" + (s.status != null ? ", status " + s.status : "");
      function field(name, text, pre) {
        var dt = document.createElement("dt"), dd = document.createElement("dd");
        dt.textContent = name;
        if (pre) { var p = document.createElement("pre"); p.className = name; p.textContent = text; dd.appendChild(p); } else dd.textContent = text;
        dl.appendChild(dt);
        dl.appendChild(dd);
      }
      function lines(first, fields) {
        return [first || ""].concat((fields || []).map(function (f) { return f[0] + ": " + f[1]; })).join("\n");
      }
      if (s.check) field("check", s.check, false);
      if (s.request || (s.request_headers || []).length) field("request", lines(s.request, s.request_headers), true);
      if (s.status != null || (s.response_headers || []).length) field("response", lines(s.status != null ? "status " + s.status : "", s.response_headers), true);
      if (s.body != null) field("body", s.body, true);
      var t = s.timings;
      if (t) field("timings", "due t=" + f3(t.due) + "s, " + (t.sent != null ? "sent t=" + f3(t.sent) + "s" : "never sent") +
        ", latency " + Number(t.latency_ms).toFixed(1) + " ms" + (t.service_ms != null ? ", service " + Number(t.service_ms).toFixed(1) + " ms" : ""), false);
      d.appendChild(sum);
      d.appendChild(dl);
      box.appendChild(d);
      nFailing++;
    });
    $("live-failing-note").textContent = "The first few failing exchanges of each step and kind, as they were (secrets redacted): open one to read it.";
    body.setAttribute("data-live-failing", String(nFailing));
  }

  // A stage not planned at the start (limit's tries): a row of its own.
  function newRow(tbody, name) {
    var tr = document.createElement("tr");
    ["th", "td", "td", "td"].forEach(function (t, k) {
      var c = document.createElement(t);
      if (k === 2) c.className = "live-v";
      if (k === 3) c.className = "live-why";
      tr.appendChild(c);
    });
    tr.firstChild.textContent = name;
    tbody.appendChild(tr);
    return tr;
  }
  // A stage's verdict and why (its reasons, then its failed SLO lines).
  function fill(tr, s, provisional) {
    var d = data.stages.filter(function (x) { return x.name === s.name; })[0];
    if (d) d.verdict = s.verdict;
    var v = tr.querySelector(".live-v");
    v.textContent = (s.verdict || "–") + (provisional ? " (provisional)" : "");
    // Italic until the end's verdicts (the report's styles, shared, stay as they are).
    v.style.fontStyle = provisional ? "italic" : "";
    var why = (s.reasons || []).slice();
    (s.slo || []).forEach(function (l) { if (l && l.passed === false) why.push(l.slo + (l.value != null ? " (" + R.num(l.value) + ")" : "")); });
    tr.querySelector(".live-why").textContent = why.join("; ");
  }
  // Stages judged as they closed: each fills the first row of its name not
  // yet judged (a limit's tries: a row each), until the end's verdicts.
  function verdicts(list) {
    var tbody = document.querySelector("#live-stages tbody");
    list.forEach(function (s) {
      var tr = Array.prototype.filter.call(tbody.querySelectorAll("tr"), function (r) {
        return r.firstChild.textContent === s.name && !r.getAttribute("data-judged");
      })[0] || newRow(tbody, s.name);
      tr.setAttribute("data-judged", "provisional");
      fill(tr, s, true);
      nVerdicts++;
    });
    body.setAttribute("data-live-verdicts", String(nVerdicts));
  }

  function stages(ev) {
    var tbody = document.querySelector("#live-stages tbody"), rows = tbody.querySelectorAll("tr");
    (ev.stages || []).forEach(function (s, i) {
      var tr = rows[i] || newRow(tbody, s.name);
      tr.setAttribute("data-judged", "final");
      fill(tr, s, false);
    });
    if (ev.headline) $("live-headline").textContent = ev.headline + (ev.why ? " — " + ev.why : "");
    if (ev.result) $("live-badge").textContent = String(ev.result).toUpperCase();
    R.timeCharts.forEach(function (u) { u.redraw(); });
  }

  function auth() { return token ? { Authorization: "Bearer " + token } : {}; }

  function final(ev) {
    if (source) source.close();
    if (!ev.report) {
      setState("frozen", "OVER");
      $("live-note").textContent = "The run is over: these are its final figures.";
      return;
    }
    fetch(ev.report, { headers: auth(), cache: "no-store" }).then(function (r) {
      if (!r.ok) throw new Error("the final report: HTTP " + r.status);
      return r.text();
    }).then(function (html) {
      document.open();
      document.write(html);
      document.close();
      document.body.setAttribute("data-live-state", "final");
    }).catch(function (e) {
      setState("frozen", "OVER");
      $("live-note").textContent = "The run is over; its report could not be fetched (" + e.message + "): see its results directory.";
    });
  }

  function handle(kind, fn) {
    return function (e) {
      var id = Number(e.lastEventId);
      if (id <= seen) return;    // already shown (a resumed stream never repeats, but be sure)
      seen = id;
      var ev;
      try { ev = JSON.parse(e.data); } catch (err) { console.error("live " + kind + ": " + err); return; }
      fn(ev);
      if (kind === "second") redraw();
    };
  }

  function connect() {
    source = new EventSource("/events" + (token ? "?token=" + encodeURIComponent(token) : ""));
    source.onopen = function () { if (state !== "frozen") setState("live", "LIVE"); };
    source.onerror = function () {
      if (state === "frozen" || state === "final") return;
      setState("reconnecting", "RECONNECTING");
    };
    source.addEventListener("second", handle("second", second));
    source.addEventListener("stages", handle("stages", stages));
    source.addEventListener("final", handle("final", final));
  }

  R.timeCharts.forEach(withMarks);

  // ---- the buttons ----
  function act(text) {
    var out = $("live-answer");
    out.textContent = "…";
    fetch("/control", { method: "POST", body: text, headers: Object.assign({ "Content-Type": "text/plain", "X-Perfops-By": "page" }, auth()) })
      .then(function (r) {
        return r.text().then(function (t) {
          if (!r.ok) { out.textContent = text + ": " + t.trim(); return; }
          var e = JSON.parse(t);
          out.textContent = e.action + (e.value != null ? " " + e.value : "") + " at t=" + Math.round(e.t) + " (stage \"" + e.stage + "\")";
        });
      })
      .catch(function (e) { out.textContent = text + ": " + e.message; });
  }
  Array.prototype.forEach.call(document.querySelectorAll("#live-controls button"), function (b) {
    b.addEventListener("click", function () {
      var a = b.getAttribute("data-action");
      if (a === "rate") {
        var v = $("live-rate").value;
        if (!v) { $("live-answer").textContent = "say a rate first"; return; }
        act("rate " + v);
      } else {
        act(a);
      }
    });
  });

  setState("connecting", "CONNECTING");
  body.setAttribute("data-live-seconds", "0");
  body.setAttribute("data-live-verdicts", "0");
  body.setAttribute("data-live-failing", "0");
  body.setAttribute("data-live-watched", "0");
  connect();
})();
