// The report's charts: turns the embedded data (see charts.rs) into uPlot
// charts. Decisions about what to plot are made in Rust; this file only
// draws, keeps the time charts on one synchronised axis, and records what it
// drew on the DOM (data-charts-drawn, and per chart data-series-ink, the
// pixels the series changed) so a headless browser test can check it.
// Strings from the data are only ever set as text, never as HTML.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("perfops-data").textContent);
  var body = document.body;
  var dur = data.duration_s || 1;
  var SYNC = "perfops-time";
  var timeCharts = [];
  var all = [];
  var drawn = 0;
  var syncing = false;
  var pxr = function () { return uPlot.pxRatio || 1; };

  // ---- formatting (as in page.rs) ----
  function num(v) {
    var a = Math.abs(v);
    if (a >= 100 || v === Math.trunc(v)) return Math.round(v).toLocaleString("en-US");
    if (a >= 10) return v.toFixed(1);
    if (a >= 0.01) return v.toFixed(2);
    return v.toPrecision(2);
  }
  // format.rs's ms_parts: two decimals below 10 ms, one below 1 s (a p95 of 250.4 ms that
  // failed `p95 < 250ms` read "250 ms" here, "250.4ms" on the terminal), then seconds.
  function ms(v) {
    if (v == null) return "–";
    var a = Math.abs(v);
    if (a < 9.995) return v.toFixed(2) + " ms";
    if (a < 999.95) return v.toFixed(1) + " ms";
    return (v / 1000).toFixed(2) + " s";
  }
  function clock(t) {
    if (t == null) return "–";
    var s = Math.max(0, Math.round(t));
    var mm = Math.floor(s / 60) % 60, ss = s % 60;
    var pad = function (n) { return (n < 10 ? "0" : "") + n; };
    return s >= 3600 ? Math.floor(s / 3600) + ":" + pad(mm) + ":" + pad(ss) : Math.floor(s / 60) + ":" + pad(ss);
  }
  function fmt(v, unit) {
    if (v == null) return "–";
    if (unit === "ms") return ms(v);
    if (unit === "/s") return num(v) + "/s";
    return num(v);
  }
  function axisMs(v) {
    if (v >= 1000) return num(v / 1000) + " s";
    return num(v) + " ms";
  }
  function pctLabel(x) {
    // x = 1/(1-q)
    if (x == null) return "";
    var q = (1 - 1 / x) * 100;
    if (q <= 0) return "0%";
    var s = q >= 99 ? q.toFixed(Math.max(0, Math.round(Math.log10(x)) - 2)) : q.toFixed(0);
    return s + "%";
  }

  // Log axes: decades only (with 2 and 5 when the range is narrow); uPlot's
  // default grid line at every 1..9 reads as noise.
  function logSplits(u, ai, min, max) {
    var out = [], lo = Math.floor(Math.log10(min) + 1e-9), hi = Math.ceil(Math.log10(max) - 1e-9);
    var mults = hi - lo <= 2 ? [1, 2, 5] : [1];
    for (var e = lo; e <= hi; e++) {
      mults.forEach(function (m) {
        var v = +(m * Math.pow(10, e)).toPrecision(6);
        if (v >= min * 0.999 && v <= max * 1.001) out.push(v);
      });
    }
    return out;
  }
  function keepAll(u, splits) { return splits; }

  function height() { return window.innerWidth < 600 ? 210 : 250; }
  function width(el) { return Math.max(260, Math.floor(el.clientWidth)); }
  function frame(id) { return document.querySelector('.chart[data-chart="' + id + '"]'); }

  // ---- what the browser test reads ----
  function snapshot(u) {
    if (u._measured) return;
    var c = u.ctx.canvas;
    u._before = u.ctx.getImageData(0, 0, c.width, c.height).data.slice();
  }
  function measure(u) {
    if (u._measured || !u._before) return;
    u._measured = true;
    var c = u.ctx.canvas;
    var after = u.ctx.getImageData(0, 0, c.width, c.height).data, before = u._before, n = 0;
    for (var i = 0; i < after.length; i += 4) {
      if (after[i] !== before[i] || after[i + 1] !== before[i + 1] || after[i + 2] !== before[i + 2] || after[i + 3] !== before[i + 3]) n++;
    }
    u._before = null;
    var el = u.root.parentNode, b = u.bbox, r = pxr();
    el.setAttribute("data-series-ink", String(n));
    el.setAttribute("data-plot", Math.round(b.left / r) + "," + Math.round(b.width / r));
    if (!el.hasAttribute("data-drawn")) {
      el.setAttribute("data-drawn", "1");
      drawn++;
      body.setAttribute("data-charts-drawn", String(drawn));
    }
  }

  // ---- stage boundaries and restarts, under the series ----
  function markers(u) {
    var ctx = u.ctx, b = u.bbox, r = pxr();
    ctx.save();
    ctx.beginPath();
    ctx.rect(b.left, b.top, b.width, b.height);
    ctx.clip();
    (data.stages || []).forEach(function (s, i) {
      var x0 = u.valToPos(s.start_s, "x", true), x1 = u.valToPos(s.end_s, "x", true);
      if (s.verdict === "fails") {
        ctx.fillStyle = "rgba(220,38,38,0.06)";
        ctx.fillRect(x0, b.top, x1 - x0, b.height);
      } else if (i % 2 === 1) {
        ctx.fillStyle = "rgba(100,116,139,0.05)";
        ctx.fillRect(x0, b.top, x1 - x0, b.height);
      }
      if (i > 0) {
        ctx.strokeStyle = "rgba(100,116,139,0.55)";
        ctx.lineWidth = r;
        ctx.setLineDash([4 * r, 4 * r]);
        ctx.beginPath();
        ctx.moveTo(Math.round(x0) + 0.5, b.top);
        ctx.lineTo(Math.round(x0) + 0.5, b.top + b.height);
        ctx.stroke();
      }
      ctx.font = 11 * r + "px system-ui, sans-serif";
      var w = ctx.measureText(s.name).width;
      if (w + 8 * r < x1 - x0) {
        ctx.fillStyle = s.verdict === "fails" ? "rgba(185,28,28,0.85)" : "rgba(71,85,105,0.85)";
        ctx.textAlign = "center";
        ctx.textBaseline = "top";
        ctx.fillText(s.name, (x0 + x1) / 2, b.top + 4 * r);
      }
    });
    ctx.setLineDash([]);
    (data.restarts || []).forEach(function (t) {
      var x = Math.round(u.valToPos(t, "x", true)) + 0.5;
      ctx.strokeStyle = "rgba(220,38,38,0.75)";
      ctx.lineWidth = 1.5 * r;
      ctx.beginPath();
      ctx.moveTo(x, b.top);
      ctx.lineTo(x, b.top + b.height);
      ctx.stroke();
    });
    eventMarks(u, ctx, b, r, data.events);
    ctx.restore();
  }

  // ---- actions by hand (events.jsonl): a violet line at each, its words on top ----
  // One function, shared with the live page: `events` is [{t, label, by}].
  function eventMarks(u, ctx, b, r, events) {
    (events || []).forEach(function (e) {
      var x = Math.round(u.valToPos(e.t, "x", true)) + 0.5;
      if (x < b.left || x > b.left + b.width) return;
      ctx.strokeStyle = "rgba(124,58,237,0.8)";
      ctx.lineWidth = 1.5 * r;
      ctx.setLineDash([]);
      ctx.beginPath();
      ctx.moveTo(x, b.top);
      ctx.lineTo(x, b.top + b.height);
      ctx.stroke();
      ctx.font = 11 * r + "px system-ui, sans-serif";
      ctx.fillStyle = "rgba(91,33,182,0.95)";
      ctx.textAlign = "left";
      ctx.textBaseline = "top";
      ctx.fillText(e.label, x + 3 * r, b.top + 18 * r);
    });
  }

  function syncX(u, key) {
    if (key !== "x" || syncing) return;
    syncing = true;
    var mn = u.scales.x.min, mx = u.scales.x.max;
    timeCharts.forEach(function (o) {
      if (o !== u && (o.scales.x.min !== mn || o.scales.x.max !== mx)) o.setScale("x", { min: mn, max: mx });
    });
    syncing = false;
  }

  function resetZoom() {
    timeCharts.forEach(function (o) { o.setScale("x", { min: 0, max: dur }); });
  }

  function seriesOpts(s, unit) {
    var o = {
      label: s.label,
      stroke: s.color,
      width: s.width || 1.5,
      spanGaps: false,
      scale: s.axis === "right" ? "y2" : "y",
      value: function (u, v, si, di) {
        var text = fmt(v, s.unit || unit);
        if (s.notes && di != null && s.notes[di]) text += " (" + s.notes[di] + ")";
        return text;
      },
      points: { show: false },
    };
    if (s.dash) o.dash = [6, 4];
    if (s.stepped) o.paths = uPlot.paths.stepped({ align: 1 });
    if (s.points_only) {
      o.paths = function () { return null; };
      o.points = { show: true, size: 9, width: 1.5, stroke: s.color, fill: s.shape === "diamond" ? "#fff" : s.color };
    }
    return o;
  }

  function yAxis(unit, scale, side, log) {
    var a = {
      scale: scale,
      side: side,
      size: 62,
      grid: { show: side === 3, stroke: "rgba(148,163,184,0.25)", width: 1 },
      ticks: { show: false },
      stroke: "#64748b",
      values: function (u, splits) {
        return splits.map(function (v) {
          if (v == null) return "";
          return unit === "ms" ? axisMs(v) : num(v);
        });
      },
    };
    if (log) {
      a.splits = logSplits;
      a.filter = keepAll;
    }
    return a;
  }

  // Rates and counts tick at whole numbers (no "0.20 dropped/s").
  function counts(axis, log) {
    if (!log) axis.incrs = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1e3, 2e3, 2500, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6];
    return axis;
  }

  // Every chart on the time axis has the same plot area, so that a second
  // stands at one x on all of them, one above the other: a chart without a
  // right-hand axis (dropped/s) keeps that gutter, blank.
  function rightAxis(hasRight) {
    if (hasRight) return counts(yAxis("/s", "y2", 1), false);
    return { scale: "y", side: 1, size: 62, grid: { show: false }, ticks: { show: false },
      values: function (u, splits) { return splits.map(function () { return ""; }); } };
  }

  function xAxisTime() {
    return {
      stroke: "#64748b",
      grid: { stroke: "rgba(148,163,184,0.25)", width: 1 },
      ticks: { show: false },
      values: function (u, splits) { return splits.map(clock); },
      // Whole seconds, minutes and hours: the labels are m:ss, so a half
      // second would print the same label twice.
      incrs: [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400],
      space: 60,
    };
  }

  function timeChart(c) {
    var el = frame(c.id);
    if (!el) return;
    var hasRight = c.series.some(function (s) { return s.axis === "right"; });
    var opts = {
      width: width(el),
      height: height(),
      cursor: { sync: { key: SYNC, setSeries: false }, drag: { x: true, y: false } },
      scales: {
        x: { time: false, auto: false, min: 0, max: dur },
        y: c.log ? { distr: 3, log: 10 } : { range: function (u, mn, mx) { return [0, Math.max(mx == null ? 1 : mx * 1.08, 1)]; } },
        y2: { range: function (u, mn, mx) { return [0, Math.max(mx == null ? 5 : mx * 1.1, 5)]; } },
      },
      axes: [xAxisTime(), counts(yAxis(c.unit, "y", 3, c.log), c.log), rightAxis(hasRight)],
      series: [{ label: "time", value: function (u, v) { return clock(v); } }].concat(
        c.series.map(function (s) { return seriesOpts(s, c.unit); })),
      legend: { live: true },
      hooks: { drawAxes: [markers, snapshot], draw: [measure], setScale: [syncX] },
    };
    var d = [c.x].concat(c.series.map(function (s) { return s.values; }));
    var u = new uPlot(opts, d, el);
    u.over.addEventListener("dblclick", resetZoom);
    timeCharts.push(u);
    all.push({ u: u, el: el });
  }

  // ---- watched metrics: one at a time, picked by source ----
  function watch() {
    var w = data.watch, el = frame("watch"), sel = document.getElementById("watch-select");
    if (!w || !el || !sel) return;
    function options() {
      while (sel.firstChild) sel.removeChild(sel.firstChild);
      // The scenario's `watch.chart` picks come first, in its order.
      if (w.picked && w.picked.length) {
        var pg = document.createElement("optgroup");
        pg.label = "chart (scenario)";
        w.picked.forEach(function (p) {
          var opt = document.createElement("option");
          opt.value = p.group + ":" + p.metric;
          opt.textContent = w.groups[p.group].metrics[p.metric].name;
          pg.appendChild(opt);
        });
        sel.appendChild(pg);
      }
      w.groups.forEach(function (g, gi) {
        var og = document.createElement("optgroup");
        og.label = g.source;
        g.metrics.forEach(function (m, mi) {
          var opt = document.createElement("option");
          opt.value = gi + ":" + mi;
          opt.textContent = m.name;
          og.appendChild(opt);
        });
        sel.appendChild(og);
      });
    }
    var current = null, shown = null;
    function show(gi, mi) {
      var g = w.groups[gi], m = g.metrics[mi];
      if (current) {
        timeCharts.splice(timeCharts.indexOf(current), 1);
        all = all.filter(function (c) { return c.u !== current; });
        current.destroy();
      }
      var opts = {
        width: width(el),
        height: height(),
        cursor: { sync: { key: SYNC, setSeries: false }, drag: { x: true, y: false } },
        scales: { x: { time: false, auto: false, min: 0, max: dur }, y: { range: function (u, mn, mx) {
          if (mn == null) return [0, 1];
          var lo = Math.min(0, mn), hi = mx > lo ? mx * 1.08 : lo + 1;
          return [lo, hi];
        } } },
        axes: [xAxisTime(), yAxis("", "y", 3), rightAxis(false)],
        series: [{ label: "time", value: function (u, v) { return clock(v); } },
          { label: m.name, stroke: "#2563eb", width: 2, spanGaps: true,
            value: function (u, v) { return v == null ? "–" : num(v); }, points: { show: m.x.length < 80, size: 5 } }],
        hooks: { drawAxes: [markers, snapshot], draw: [measure], setScale: [syncX] },
      };
      current = new uPlot(opts, [m.x, m.values], el);
      current.over.addEventListener("dblclick", resetZoom);
      timeCharts.push(current);
      all.push({ u: current, el: el });
      sel.value = shown = gi + ":" + mi;
    }
    sel.addEventListener("change", function () {
      var p = sel.value.split(":");
      show(+p[0], +p[1]);
    });
    options();
    if (w.groups.length) show(w["default"].group, w["default"].metric);
    // The live page adds samples as they come (live.js): the options again
    // when a metric appeared, and the metric shown fed what it has now.
    var listed = -1;
    watchChanged = function () {
      var n = w.groups.reduce(function (k, g) { return k + g.metrics.length; }, 0);
      if (n !== listed) {
        listed = n;
        options();
        if (shown) sel.value = shown;
      }
      if (!current) {
        if (w.groups.length) show(w["default"].group, w["default"].metric);
        return;
      }
      var p = shown.split(":"), m = w.groups[+p[0]].metrics[+p[1]];
      var whole = !(current.scales.x.min > 0);
      current.setData([m.x, m.values]);
      if (whole) current.setScale("x", { min: 0, max: dur });
    };
  }
  var watchChanged = function () {};

  // uPlot's point drawing in xy mode walks the x-scale's index range, which
  // is no series' own: say which points to draw.
  function upTo(n) { var a = []; for (var i = 0; i < n; i++) a.push(i); return function () { return a; }; }

  function xyScaleX() {
    return { time: false, range: function (u, mn, mx) { return [0, Math.max(mx == null ? 1 : mx * 1.1, 1)]; } };
  }

  // ---- overlaid curves, each with its own points (the comparison's hockey sticks) ----
  function xyChart(c) {
    var el = frame(c.id);
    if (!el) return;
    var series = [{}].concat(c.series.map(function (s) {
      var o = {
        label: s.label, stroke: s.color, width: s.width || 2, paths: uPlot.paths.linear(),
        points: { show: true, size: 7, width: 1, fill: s.color, filter: upTo(s.x.length) },
        facets: [{ scale: "x", auto: true }, { scale: "y", auto: true }],
      };
      if (s.dash) o.dash = [6, 4];
      // A fitted curve is a line through its points, not points.
      if (s.points === false) o.points = { show: false };
      return o;
    }));
    var opts = {
      mode: 2,
      width: width(el),
      height: height() + 40,
      legend: { live: false },
      cursor: { drag: { x: false, y: false }, points: { show: false } },
      scales: { x: xyScaleX(), y: c.log ? { distr: 3, log: 10 } : { range: function (u, mn, mx) { return [0, Math.max(mx == null ? 1 : mx * 1.08, 1)]; } } },
      axes: [
        { stroke: "#64748b", grid: { stroke: "rgba(148,163,184,0.25)" }, ticks: { show: false }, label: c.x_label || "", labelSize: 20,
          values: function (u, sp) { return sp.map(function (v) { return v == null ? "" : num(v); }); } },
        yAxis(c.unit, "y", 3, c.log),
      ],
      series: series,
      hooks: { drawAxes: [snapshot], draw: [measure] },
    };
    var d = [null].concat(c.series.map(function (s) { return [s.x, s.y]; }));
    var u = new uPlot(opts, d, el);
    all.push({ u: u, el: el, extra: 40 });
  }

  // ---- latency vs throughput: points per stage (uPlot's xy mode) ----
  function hockey() {
    var h = data.hockey, el = frame("hockey");
    if (!h || !el) return;
    var readout = document.createElement("p");
    readout.className = "readout";
    readout.textContent = "Hover a point.";
    var stages = h.stages;
    var col = function (k) { return stages.map(function (s) { return s[k]; }); };
    var xs = col("achieved");
    var lines = [["p50", "#16a34a"], ["p90", "#ca8a04"], ["p99", "#dc2626"]];
    var series = [{}, {
      label: "each second (p99)", stroke: "rgba(100,116,139,0.6)",
      paths: function () { return null; },
      points: { show: true, size: 4, width: 0, fill: "rgba(100,116,139,0.35)", filter: upTo(h.seconds.x.length) },
      facets: [{ scale: "x", auto: true }, { scale: "y", auto: true }],
    }].concat(lines.map(function (l) {
      return {
        label: l[0] + " per stage", stroke: l[1], width: 2, paths: uPlot.paths.linear(),
        points: { show: true, size: 7, width: 1, fill: l[1], filter: upTo(xs.length) },
        facets: [{ scale: "x", auto: true }, { scale: "y", auto: true }],
      };
    }));
    var d = [null, [h.seconds.x, h.seconds.y]].concat(lines.map(function (l) { return [xs, col(l[0])]; }));
    // Stage names beside their p99 point, moved down past any label they would cover.
    function labels(u) {
      var ctx = u.ctx, r = pxr(), placed = [];
      ctx.save();
      ctx.font = 11 * r + "px system-ui, sans-serif";
      ctx.fillStyle = "#334155";
      ctx.textAlign = "left";
      ctx.textBaseline = "bottom";
      stages.forEach(function (s) {
        if (s.p99 == null) return;
        var x = u.valToPos(s.achieved, "x", true) + 6 * r, y = u.valToPos(s.p99, "y", true) - 3 * r;
        var w = ctx.measureText(s.name).width, hgt = 12 * r;
        var hits = function (p) { return x < p.x + p.w && p.x < x + w && y - hgt < p.y && p.y - hgt < y; };
        for (var k = 0; k < 20 && placed.some(hits); k++) y += hgt + 1;
        placed.push({ x: x, y: y, w: w });
        ctx.fillText(s.name, x, y);
      });
      ctx.restore();
    }
    function hover(u) {
      var left = u.cursor.left, top = u.cursor.top;
      if (left == null || left < 0) return;
      var best = null, bestD = 24 * 24;
      stages.forEach(function (s) {
        ["p50", "p90", "p99"].forEach(function (k) {
          if (s[k] == null) return;
          var dx = u.valToPos(s.achieved, "x") - left, dy = u.valToPos(s[k], "y") - top, dd = dx * dx + dy * dy;
          if (dd < bestD) { bestD = dd; best = s; }
        });
      });
      if (best) {
        readout.textContent = best.name + ": achieved " + num(best.achieved) + "/s" +
          (best.target != null ? " of " + num(best.target) + "/s" : "") +
          " — p50 " + ms(best.p50) + ", p90 " + ms(best.p90) + ", p99 " + ms(best.p99) +
          (best.verdict ? " — " + best.verdict : "");
      }
    }
    var opts = {
      mode: 2,
      width: width(el),
      height: height() + 40,
      legend: { live: false },
      cursor: { drag: { x: false, y: false }, points: { show: false } },
      scales: { x: xyScaleX(), y: { distr: 3, log: 10 } },
      axes: [
        { stroke: "#64748b", grid: { stroke: "rgba(148,163,184,0.25)" }, ticks: { show: false }, label: "achieved throughput (/s)", labelSize: 20,
          values: function (u, sp) { return sp.map(function (v) { return v == null ? "" : num(v); }); } },
        yAxis("ms", "y", 3, true),
      ],
      series: series,
      hooks: { drawAxes: [snapshot], draw: [labels, measure], setCursor: [hover] },
    };
    var u = new uPlot(opts, d, el);
    el.appendChild(readout);
    all.push({ u: u, el: el, extra: 40 });
  }

  // ---- percentile spectrum ----
  function spectrum() {
    var sp = data.spectrum, el = frame("spectrum");
    if (!sp || !el) return;
    var last = 1;
    sp.series.forEach(function (s) {
      s.values.forEach(function (v, i) { if (v != null && sp.x[i] > last) last = sp.x[i]; });
    });
    var decades = [];
    for (var x = 1; x <= last * 1.0001; x *= 10) decades.push(x);
    if (decades.length < 2) decades.push(10);
    var series = [{ label: "percentile", value: function (u, v) { return v == null ? "–" : pctLabel(v); } }].concat(
      sp.series.map(function (s) {
        var o = {
          label: s.label, stroke: s.color, width: s.width || 1.5, spanGaps: false,
          value: function (u, v) { return ms(v); }, points: { show: false },
        };
        if (s.dash) o.dash = [6, 4];
        return o;
      }));
    var opts = {
      width: width(el),
      height: height() + 40,
      cursor: { drag: { x: true, y: false } },
      scales: { x: { time: false, distr: 3, log: 10, auto: false, min: 1, max: decades[decades.length - 1] }, y: { distr: 3, log: 10 } },
      axes: [
        { stroke: "#64748b", grid: { stroke: "rgba(148,163,184,0.25)" }, ticks: { show: false }, label: "percentile", labelSize: 20,
          splits: function () { return [1, 2].concat(decades.slice(1)); }, filter: keepAll,
          values: function (u, spl) { return spl.map(pctLabel); } },
        yAxis("ms", "y", 3, true),
      ],
      series: series,
      hooks: { drawAxes: [snapshot], draw: [measure] },
    };
    var u = new uPlot(opts, [sp.x].concat(sp.series.map(function (s) { return s.values; })), el);
    all.push({ u: u, el: el, extra: 40 });
  }

  function guard(f) {
    try { f(); } catch (e) { console.error("chart: " + (e && e.stack || e)); }
  }

  (data.time_charts || []).forEach(function (c) { guard(function () { timeChart(c); }); });
  guard(watch);
  guard(hockey);
  guard(spectrum);
  (data.xy_charts || []).forEach(function (c) { guard(function () { xyChart(c); }); });

  // What the live page (live.js) needs to feed these charts as seconds
  // come: nothing here changes for a static report.
  window.perfopsReport = {
    data: data, timeCharts: timeCharts, seriesOpts: seriesOpts, fmt: fmt, ms: ms, num: num, clock: clock,
    eventMarks: eventMarks,
    setDuration: function (d) { dur = d; data.duration_s = d; },
    addTimeChart: function (c) { guard(function () { timeChart(c); }); },
    watchChanged: function () { watchChanged(); },
  };

  var pending = null;
  window.addEventListener("resize", function () {
    clearTimeout(pending);
    pending = setTimeout(function () {
      all.forEach(function (c) { c.u.setSize({ width: width(c.el), height: height() + (c.extra || 0) }); });
    }, 100);
  });
})();
