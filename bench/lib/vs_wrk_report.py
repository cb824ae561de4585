#!/usr/bin/env python3
"""Build the markdown report for bench/vs-wrk.sh from its raw-output folder.

usage: vs_wrk_report.py RAW_DIR REPORT_MD

RAW_DIR holds env.json and, per run NAME (closed.wrk.i, closed.perfops.i, and with
BASE / WAKEUPS / PNAPS closed.base.i, closed.napN.i, closed.pnapN.i; open.perfops.i): NAME.out / NAME.err
(tool stdout/stderr), NAME.time (`/usr/bin/time -f '%e %U %S %M'`), NAME.meta.json
(written by vs-wrk.sh) and, for perfops, NAME.json (`--json`); with COUNT_S, per
closed-loop client C: closed.C.count.{tool,nginx} (`perf stat -x,` of the client
and of nginx's worker) and closed.C.count.meta.json. Prints the report and writes
it to REPORT_MD.
Exit status 0 if every run worked, 3 otherwise (the report is written anyway).
"""
import json
import os
import re
import sys

sys.dont_write_bytecode = True   # no __pycache__ in bench/lib
from benchlib import cli, core_share, fmt as f, last_line, load_meta, med, pct, read, time_stats, write_report  # noqa: E402

RAW, REPORT, ENV = cli()
ROUNDS, DURATION, CONNS, RATE = ENV["rounds"], ENV["duration"], ENV["conns"], ENV["rate"]
CLK = float(ENV["clk_tck"])
NOISE_MAX_S = float(ENV.get("noise_max_s", 0.5))
NOTES = []
FAILED = False


def dig(d, dotted):
    cur = d
    for k in dotted.split("."):
        if not isinstance(cur, dict) or k not in cur:
            return None
        cur = cur[k]
    return cur if isinstance(cur, (int, float)) and not isinstance(cur, bool) else None


def base_run(name):
    meta = load_meta(RAW, name)
    if meta is None:
        return None  # never ran
    r = {"name": name, "ok": True, "err": None, "meta": meta, "rc": meta["rc"],
         "nginx_cpu": core_share(meta["nginx_ticks"], CLK, meta["wall_s"]),
         "nginx_seen": meta.get("nginx_requests")}
    t = time_stats(RAW, name)
    if t:
        r.update(t)
        r["other_cpu_s"] = meta["busy_ticks"] / CLK - r["cpu_s"] - meta["nginx_ticks"] / CLK
    if meta["rc"] != 0:
        err = (last_line(read(os.path.join(RAW, name + ".err")), 2)
               or last_line(read(os.path.join(RAW, name + ".out")), 1) or "(no output)")
        what = "killed by timeout" if meta["rc"] in (124, 137) else "exit status %d" % meta["rc"]
        r["err"] = "%s: %s" % (what, err)
    return r


def fail(r, msg):
    global FAILED
    FAILED = True
    r["ok"] = False
    r["err"] = msg if not r.get("err") else "%s; %s" % (r["err"], msg)


def load_wrk(name):
    r = base_run(name)
    if r is None:
        return None
    out = read(os.path.join(RAW, name + ".out")) or ""
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+)", out)
    m2 = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not (m and m2):
        fail(r, "wrk output not understood: %s" % (last_line(out) or last_line(read(os.path.join(RAW, name + ".err")), 2)))
        return r
    r["count"] = int(m.group(1))
    r["rps"] = float(m2.group(1))
    errs = 0
    se = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if se:
        errs += sum(int(x) for x in se.groups())
    n2 = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if n2:
        errs += int(n2.group(1))
    r["errors"] = errs
    if r["rc"] != 0:
        fail(r, "")
    finish(r)
    return r


def load_perfops(name, fields):
    r = base_run(name)
    if r is None:
        return None
    path = os.path.join(RAW, name + ".json")
    text = read(path)
    if text is None:
        fail(r, "no JSON report written (%s)" % os.path.basename(path))
        return r
    try:
        doc = json.loads(text)
    except ValueError as e:
        fail(r, "JSON report does not parse: %s" % e)
        return r
    missing = []
    for key, dotted in fields.items():
        v = dig(doc, dotted)
        if v is None:
            missing.append(dotted)
        r[key] = v
    r["count"] = r.get("completed")
    r["errors"] = r.get("failed")
    if missing:
        fail(r, "JSON report lacks field(s): %s" % ", ".join(missing))
    if r["rc"] == 1 and not missing:
        # perfops exit 1 = "thresholds failed": more failed requests than --max-errors
        # (default 0 %). The measurement itself is complete, so keep it and say so.
        NOTES.append("%s: perfops exited 1 (failed requests above --max-errors): %s failed, %s dropped"
                     % (name, f(r.get("failed")), f(r.get("dropped"))))
        r["err"] = None
    elif r["rc"] != 0:
        fail(r, "")
    finish(r)
    return r


def load_wakeups(name):
    """bench/wakeups' one line: rps and more; its count is what nginx served."""
    r = base_run(name)
    if r is None:
        return None
    out = read(os.path.join(RAW, name + ".out")) or ""
    kv = dict(zip(*[iter(out.split())] * 2))
    try:
        r["rps"] = float(kv["rps"])
    except (KeyError, ValueError):
        fail(r, "bench/wakeups output not understood: %s" % (last_line(out) or last_line(read(os.path.join(RAW, name + ".err")), 2)))
        return r
    r["count"] = r.get("nginx_seen")
    r["errors"] = 0
    if r["rc"] != 0:
        fail(r, "")
    finish(r)
    return r


def finish(r):
    if r.get("nginx_seen"):
        r["nginx100k"] = r["meta"]["nginx_ticks"] / CLK / r["nginx_seen"] * 1e5
    if r.get("count") and r.get("cpu_s") is not None:
        r["cpu100k"] = r["cpu_s"] / r["count"] * 1e5
    if r.get("count") and r.get("nginx_seen") is not None:
        diff = abs(r["nginx_seen"] - r["count"]) / r["count"]
        if diff > 0.01:
            NOTES.append("%s: tool counted %d responses, nginx served %d (%.1f %% apart)"
                         % (r["name"], r["count"], r["nginx_seen"], 100 * diff))
    if r.get("other_cpu_s") is not None and r["other_cpu_s"] > NOISE_MAX_S:
        NOTES.append("%s: other processes used ~%.1f CPU s during the run (noisy machine; treat with care)"
                     % (r["name"], r["other_cpu_s"]))
    redone = sorted(x for x in os.listdir(RAW) if x.startswith(r["name"] + ".noisy") and x.endswith(".meta.json"))
    if redone:
        NOTES.append("%s: redone %d time(s) because other processes used CPU during the run (kept as %s.noisyN.*)"
                     % (r["name"], len(redone), r["name"]))


# ------------------------------------------------------------------ load
perfops_err = ENV.get("perfops_err") or ""
if perfops_err:
    FAILED = True
wrk = [load_wrk("closed.wrk.%d" % i) for i in range(1, ROUNDS + 1)]
closed_fields = {"completed": "completed", "rps": "requests_per_s", "failed": "failed", "naps": "generator.naps"}
open_fields = {"target_rate": "target_rate", "sent": "sent", "completed": "completed",
               "dropped": "dropped", "failed": "failed", "elapsed_s": "elapsed_s",
               "rps": "requests_per_s", "p50": "latency_ms.p50", "p99": "latency_ms.p99"}
pc = [load_perfops("closed.perfops.%d" % i, closed_fields) for i in range(1, ROUNDS + 1)]
BASE_BIN = ENV.get("base_bin") or ""
NAPS = (ENV.get("wakeups") or "").split()
PNAPS = (ENV.get("pnaps") or "").split()
# every closed-loop client of the rounds: (label, runs)
CLIENTS = [("wrk", wrk), ("perfops", pc)]
for n in PNAPS:
    CLIENTS.append(("perfops naps ≤ %s µs" % n,
                    [load_perfops("closed.pnap%s.%d" % (n, i), closed_fields) for i in range(1, ROUNDS + 1)]))
if BASE_BIN:
    CLIENTS.append(("base", [load_perfops("closed.base.%d" % i, closed_fields) for i in range(1, ROUNDS + 1)]))
for n in NAPS:
    CLIENTS.append(("wakeups nap %s µs" % n, [load_wakeups("closed.nap%s.%d" % (n, i)) for i in range(1, ROUNDS + 1)]))
OPEN_ROUNDS = ENV.get("open_rounds", ROUNDS)
po = [load_perfops("open.perfops.%d" % i, open_fields) for i in range(1, OPEN_ROUNDS + 1)]
for r in po:
    if r is not None and r.get("completed") is not None:
        tr = r.get("target_rate") or RATE
        r["achieved"] = r["completed"] / (tr * DURATION)
for r in wrk:
    if r is None or not r["ok"]:
        FAILED = True

g = lambda r, k: None if r is None else r.get(k)  # noqa: E731

# ------------------------------------------------------------------ render
L = []
L.append("# perfops vs wrk — %s" % ENV["stamp"])
L.append("")
L.append("- machine: %s, kernel %s; nginx %s (1 worker, CPU %d), tools on CPU %d"
         % (ENV.get("cpu"), ENV.get("kernel"), ENV.get("nginx_version"), ENV["target_cpu"], ENV["tool_cpu"]))
L.append("- wrk %s; perfops %s (%s, git %s)" % (ENV.get("wrk_version"), ENV.get("perfops_version") or "?",
                                             ENV.get("perfops_bin"), ENV.get("perfops_git")))
L.append("- closed: `wrk -t1 -c%d -d%ds %s` vs `perfops quick -c %d -d %ds --json …`, %d round(s), alternating"
         % (CONNS, DURATION, ENV["url"], CONNS, DURATION, ROUNDS))
L.append("- open: `perfops quick -r %d -d %ds --json …`, %d run(s)" % (RATE, DURATION, OPEN_ROUNDS))
L.append("- CPU s/100k = (user+sys)/completed×1e5 from `/usr/bin/time`; RSS = peak RSS; "
         "nginx CPU = worker CPU / wall (≈100 % → nginx was the bottleneck)")
if perfops_err:
    L.append("")
    L.append("**perfops was not measured: %s**" % perfops_err)
L.append("")
L.append("## Closed loop (%d connections, %d s)" % (CONNS, DURATION))
L.append("")
L.append("| round | wrk rps | perfops rps | perfops/wrk | wrk CPU s/100k | perfops CPU s/100k "
         "| wrk RSS MiB | perfops RSS MiB | nginx CPU (wrk) | nginx CPU (perfops) |")
L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
ratios = []
for i in range(ROUNDS):
    w, p = wrk[i], pc[i]
    wr = g(w, "rps") if w and w["ok"] else None
    pr = g(p, "rps") if p and p["ok"] else None
    ratio = pr / wr if (wr and pr) else None
    ratios.append(ratio)
    L.append("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        i + 1, "FAIL" if (w and not w["ok"]) else f(wr), "FAIL" if (p and not p["ok"]) else f(pr), f(ratio, "{:.2f}"),
        f(g(w, "cpu100k"), "{:.2f}"), f(g(p, "cpu100k") if p and p["ok"] else None, "{:.2f}"),
        f(g(w, "rss_mib"), "{:.1f}"), f(g(p, "rss_mib"), "{:.1f}"),
        pct(g(w, "nginx_cpu")), pct(g(p, "nginx_cpu"))))
okw = [r for r in wrk if r and r["ok"]]
okp = [r for r in pc if r and r["ok"]]
m_ratio = med(ratios)
m_wcpu = med([r.get("cpu100k") for r in okw])
m_pcpu = med([r.get("cpu100k") for r in okp])
L.append("| **median** | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
    f(med([r.get("rps") for r in okw])), f(med([r.get("rps") for r in okp])), f(m_ratio, "{:.2f}"),
    f(m_wcpu, "{:.2f}"), f(m_pcpu, "{:.2f}"),
    f(med([r.get("rss_mib") for r in okw]), "{:.1f}"), f(med([r.get("rss_mib") for r in okp]), "{:.1f}"),
    pct(med([r.get("nginx_cpu") for r in okw])), pct(med([r.get("nginx_cpu") for r in okp]))))

L.append("")
L.append("### Every closed-loop client: medians of the rounds, and what its requests cost nginx")
L.append("")
if BASE_BIN:
    L.append("base = `%s`" % BASE_BIN)
    L.append("")
L.append("| client | rps | rps / wrk (per round) | CPU s/100k | nginx CPU | nginx CPU s/100k | RSS MiB | naps / req |")
L.append("|---|---:|---|---:|---:|---:|---:|---:|")
for label, runs in CLIENTS:
    ok = [r for r in runs if r and r["ok"]]
    per_round = []
    for i, r in enumerate(runs):
        w = wrk[i] if i < len(wrk) else None
        if r and r["ok"] and w and w["ok"] and r.get("rps") and w.get("rps"):
            per_round.append(r["rps"] / w["rps"])
    # perfops' closed-loop naps (its --json's generator.naps) per request; "—" for other clients
    naps = [r["naps"] / r["completed"] for r in ok if r.get("naps") is not None and r.get("completed")]
    L.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
        label, f(med([r.get("rps") for r in ok])),
        ("%s (%s)" % (f(med(per_round), "{:.2f}"), " ".join("%.2f" % x for x in per_round))) if per_round else "—",
        f(med([r.get("cpu100k") for r in ok]), "{:.2f}"), pct(med([r.get("nginx_cpu") for r in ok])),
        f(med([r.get("nginx100k") for r in ok]), "{:.3f}"), f(med([r.get("rss_mib") for r in ok]), "{:.1f}"),
        f(med(naps), "{:.3f}") if naps else "—"))


def perf_counts(path):
    """`perf stat -x,` output -> {event: count} (events not counted are left out)."""
    counts = {}
    for line in (read(path) or "").splitlines():
        parts = line.split(",")
        if len(parts) < 3 or line.startswith("#"):
            continue
        try:
            counts[parts[2].replace("syscalls:sys_enter_", "")] = float(parts[0])
        except ValueError:
            pass
    return counts


COUNTED = [(label, "closed." + key) for label, key in
           [("wrk", "wrk"), ("perfops", "perfops")] + [("perfops naps ≤ %s µs" % n, "pnap" + n) for n in PNAPS]
           + ([("base", "base")] if BASE_BIN else [])
           + [("wakeups nap %s µs" % n, "nap" + n) for n in NAPS]]
count_rows = []
for label, name in COUNTED:
    meta = load_meta(RAW, name + ".count")
    if meta is None:
        continue
    served = meta.get("nginx_requests")
    tool, ngx = perf_counts(os.path.join(RAW, name + ".count.tool")), perf_counts(os.path.join(RAW, name + ".count.nginx"))
    if not served or not tool:
        NOTES.append("%s: syscall count unusable (rc %s, nginx served %s)" % (name, meta.get("rc"), served))
        continue
    count_rows.append((label, served, tool, ngx))
if count_rows:
    L.append("")
    L.append("### Syscalls and context switches per request (`perf stat`, %s s per client, not timed)" % ENV.get("count_s"))
    L.append("")
    L.append("Per request nginx served during the client's run; the client's syscalls by kind (those above 0.005).")
    L.append("")
    L.append("| client | requests | client syscalls | client by kind | client cs | nginx syscalls | nginx by kind | nginx cs |")
    L.append("|---|---:|---:|---|---:|---:|---|---:|")

    def kinds(c, n):
        skip = ("raw_syscalls:sys_enter", "context-switches")
        return ", ".join("%s %.2f" % (k, v / n) for k, v in sorted(c.items(), key=lambda kv: -kv[1])
                         if k not in skip and v / n >= 0.005) or "—"
    for label, served, tool, ngx in count_rows:
        L.append("| %s | %s | %.2f | %s | %.3f | %s | %s | %s |" % (
            label, f(served), tool.get("raw_syscalls:sys_enter", 0) / served, kinds(tool, served),
            tool.get("context-switches", 0) / served,
            f(ngx.get("raw_syscalls:sys_enter", 0) / served if ngx else None, "{:.2f}"),
            kinds(ngx, served) if ngx else "—",
            f(ngx.get("context-switches", 0) / served if ngx else None, "{:.3f}")))

L.append("")
L.append("## Open model (perfops quick -r %d, %d s)" % (RATE, DURATION))
L.append("")
oko = [r for r in po if r and r["ok"]]
if not any(po):
    L.append("not run" + (" (perfops unavailable)" if perfops_err else ""))
else:
    L.append("| run | target rps | sent | completed | achieved % | dropped | failed | p50 ms | p99 ms "
             "| CPU s/100k | RSS MiB | tool CPU | nginx CPU |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for i, r in enumerate(po):
        if r is None:
            continue
        L.append("| %d%s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            i + 1, "" if r["ok"] else " (FAIL)", f(r.get("target_rate")), f(r.get("sent")), f(r.get("completed")),
            f(None if r.get("achieved") is None else 100 * r["achieved"], "{:.1f}"),
            f(r.get("dropped")), f(r.get("failed")), f(r.get("p50"), "{:.2f}"), f(r.get("p99"), "{:.2f}"),
            f(r.get("cpu100k"), "{:.2f}"), f(r.get("rss_mib"), "{:.1f}"), pct(r.get("tool_cpu")),
            pct(r.get("nginx_cpu"))))
    L.append("| **median** | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % tuple(
        [f(med([r.get(k) for r in oko])) for k in ("target_rate", "sent", "completed")]
        + [f(None if med([r.get("achieved") for r in oko]) is None else 100 * med([r.get("achieved") for r in oko]), "{:.1f}")]
        + [f(med([r.get(k) for r in oko])) for k in ("dropped", "failed")]
        + [f(med([r.get(k) for r in oko]), "{:.2f}") for k in ("p50", "p99", "cpu100k")]
        + [f(med([r.get("rss_mib") for r in oko]), "{:.1f}"), pct(med([r.get("tool_cpu") for r in oko])),
           pct(med([r.get("nginx_cpu") for r in oko]))]))

L.append("")
L.append("## Every run")
L.append("")
L.append("| run | rc | wall s | responses (tool) | nginx served | errors | user s | sys s | tool CPU "
         "| other CPU s | quiet wait s | lock |")
L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
EXTRA = [r for label, runs in CLIENTS[2:] for r in runs]
for r in wrk + pc + EXTRA + po:
    if r is None:
        continue
    m = r["meta"]
    L.append("| %s | %d | %.1f | %s | %s | %s | %s | %s | %s | %s | %d | %s |" % (
        r["name"], r["rc"], m["wall_s"], f(r.get("count")), f(r.get("nginx_seen")), f(r.get("errors")),
        f(r.get("user"), "{:.2f}"), f(r.get("sys"), "{:.2f}"), pct(r.get("tool_cpu")),
        f(r.get("other_cpu_s"), "{:.2f}"), m["waited_quiet_s"], m["lock"]))

fails = [r for r in wrk + pc + EXTRA + po if r is not None and not r["ok"]]
if fails or NOTES or perfops_err:
    L.append("")
    L.append("## Problems and notes")
    L.append("")
    if perfops_err:
        L.append("- perfops unavailable: %s" % perfops_err)
    for r in fails:
        L.append("- %s FAILED: %s" % (r["name"], r["err"] or "?"))
    for n in NOTES:
        L.append("- %s" % n)

L.append("")
L.append("## Summary")
L.append("")
why = "" if not perfops_err else " (perfops not measured)"
L.append("median rps ratio perfops/wrk: %s" % (f(m_ratio, "{:.2f}") if m_ratio is not None else "n/a" + why))
L.append("median CPU s/100k: wrk %s, perfops %s" % (f(m_wcpu, "{:.2f}"), f(m_pcpu, "{:.2f}") if m_pcpu is not None else "n/a" + why))
m_ach = med([r.get("achieved") for r in oko])
m_drop = med([r.get("dropped") for r in oko])
if m_ach is not None:
    L.append("open model: achieved %.1f %% of %d, dropped %s" % (100 * m_ach, RATE, f(m_drop)))
else:
    L.append("open model: n/a%s" % (why or " (every open-model run failed)"))
rss = [r.get("rss_mib") for r in okp if r.get("rss_mib") is not None]
L.append("perfops peak RSS (quick -c %d): %s" % (CONNS, ("%.1f MiB" % max(rss)) if rss else "n/a" + why))

write_report(REPORT, L)
sys.exit(3 if (FAILED or fails) else 0)
