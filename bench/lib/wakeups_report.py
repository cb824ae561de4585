#!/usr/bin/env python3
"""Build the markdown report for bench/wakeups.sh from its raw-output folder.

usage: wakeups_report.py RAW_DIR REPORT_MD

Per round i: wrk.i (wrk --latency output), perfops.i (its --json) and napN.i (the
one line bench/wakeups prints), each with NAME.time from /usr/bin/time and
NAME.meta.json. CPU s/100k comes from /usr/bin/time for every tool; the nginx
CPU share from the meta's tick count. Exit status 3 if a run failed.
"""
import json
import os
import re
import sys

sys.dont_write_bytecode = True   # no __pycache__ in bench/lib
from benchlib import cli, core_share, fmt, load_meta, med, n2, pct, read, time_stats, write_report  # noqa: E402

RAW, REPORT, ENV = cli()
ROUNDS, CLK = ENV["rounds"], float(ENV["clk_tck"])
NAPS = ENV["naps"].split()
FAILED = []
UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def wrk_figures(out):
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    done = re.search(r"(\d+) requests in", out)
    p = dict(re.findall(r"^\s+(50|99)%\s+([\d.]+\w+)", out, re.M))

    def ms(v):
        m = re.fullmatch(r"([\d.]+)(us|ms|s)", v or "")
        return float(m[1]) * UNITS[m[2]] if m else None
    return (float(rps[1]) if rps else None), (int(done[1]) if done else None), ms(p.get("50")), ms(p.get("99"))


def run(name):
    """-> dict(rps, cpu, p50, p99, wakeups, nap, nginx) or None when the run failed."""
    meta, t = load_meta(RAW, name), time_stats(RAW, name)
    out = read(os.path.join(RAW, name + ".out")) or ""
    if meta is None or t is None or meta["rc"] != 0:
        FAILED.append(name)
        return None
    r = {"wakeups": None, "nap": None, "nginx": core_share(meta["nginx_ticks"], CLK, meta["wall_s"])}
    if name.startswith("wrk."):
        r["rps"], done, r["p50"], r["p99"] = wrk_figures(out)
    elif name.startswith("perfops."):
        doc = json.loads(read(os.path.join(RAW, name + ".json")) or "{}")
        r["rps"], done = doc.get("requests_per_s"), doc.get("completed")
        r["p50"], r["p99"] = doc.get("latency_ms", {}).get("p50"), doc.get("latency_ms", {}).get("p99")
    else:
        kv = dict(zip(*[iter(out.split())] * 2))
        r["rps"], r["wakeups"], r["nap"] = float(kv["rps"]), float(kv["wakeups_per_req"]), float(kv["mean_nap_us"])
        r["p50"], r["p99"] = float(kv["p50_us"]) / 1e3, float(kv["p99_us"]) / 1e3
        done = r["rps"] * t["elapsed"]
    r["cpu"] = t["cpu_s"] / done * 1e5 if done else None
    return r


TOOLS = ["wrk", "perfops"] + ["nap" + n for n in NAPS]
LABEL = {"wrk": "wrk -t1", "perfops": "perfops quick"}
rows = {tool: [run(f"{tool}.{i}") for i in range(1, ROUNDS + 1)] for tool in TOOLS}
wrk = rows["wrk"]


def ratio(a, b, key):
    return a[key] / b[key] if a and b and a.get(key) and b.get(key) else None


lines = [f"# wakeups — {ENV['stamp']}", "",
         f"- {ENV['conns']} connections, {ENV['duration']} s per run, {ROUNDS} rounds; perfops at {ENV['perfops_git']}, kernel {ENV['kernel']}",
         "- napN: bench/wakeups (io_uring, one `io_uring_enter` per wake-up) sleeping N µs whenever it runs out of work (nap0: never)",
         "- ratios are to wrk in the same round, then the median is taken", "",
         "| tool | rps | rps / wrk | CPU s/100k | CPU / wrk | wake-ups per request | mean nap µs | p50 ms | p99 ms | nginx CPU |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for tool in TOOLS:
    rs = rows[tool]
    col = lambda k: med([r[k] if r else None for r in rs])  # noqa: E731
    lines.append("| " + " | ".join([
        LABEL.get(tool, f"wakeups, nap {tool[3:]} µs"), fmt(col("rps")),
        n2(med([ratio(r, w, "rps") for r, w in zip(rs, wrk)])), n2(col("cpu")),
        n2(med([ratio(r, w, "cpu") for r, w in zip(rs, wrk)])),
        n2(col("wakeups")) if col("wakeups") is not None else "", fmt(col("nap"), "{:.1f}") if col("nap") else "",
        fmt(col("p50"), "{:.3f}"), fmt(col("p99"), "{:.3f}"), pct(col("nginx"))]) + " |")
if FAILED:
    lines += ["", "Failed runs: " + ", ".join(FAILED)]
write_report(REPORT, lines)
sys.exit(3 if FAILED else 0)
