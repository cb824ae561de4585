#!/usr/bin/env python3
"""Build the markdown report for bench/h2.sh (perfops vs h2load, HTTP/2 over TLS).

usage: h2_report.py RAW_DIR REPORT_MD

Per round i: h2load.i.{out,time,meta.json} and perfops.i.{json,time,meta.json}.
Completed responses: h2load's `requests: ... N succeeded` line, perfops' `completed`
(its `failed` must be 0); elapsed: h2load's `finished in Xs`, perfops' `elapsed_s`.
Exit status 0 if every run worked, 3 otherwise (the report is written anyway).
"""
import json
import os
import re
import sys

sys.dont_write_bytecode = True   # no __pycache__ in bench/lib
from benchlib import cli, core_share, fmt, load_meta, med, pct, read, time_stats, write_report  # noqa: E402

RAW, REPORT, ENV = cli()
CLK = float(ENV["clk_tck"])
FAILED = False
NOTES = []


def run(name):
    global FAILED
    meta = load_meta(RAW, name)
    if meta is None:
        return None
    r = {"name": name, "t": time_stats(RAW, name),
         "nginx_cpu": core_share(meta["nginx_ticks"], CLK, meta["wall_s"]), "done": None, "elapsed": None}
    if name.startswith("h2load"):
        out = read(os.path.join(RAW, name + ".out")) or ""
        m = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed", out)
        e = re.search(r"finished in ([0-9.]+)s", out)
        if m and e:
            r["done"], r["elapsed"] = int(m.group(1)), float(e.group(1))
            if int(m.group(2)):
                NOTES.append("%s: %s requests failed" % (name, m.group(2)))
    else:
        text = read(os.path.join(RAW, name + ".json"))
        if text:
            j = json.loads(text)
            r["done"], r["elapsed"] = j["completed"], j["elapsed_s"]
            if j.get("failed"):
                NOTES.append("%s: %d requests failed (%s)" % (name, j["failed"], j.get("failures")))
            r["protocol"] = j.get("protocol")
    if meta["rc"] != 0 or r["done"] is None or not r["t"]:
        FAILED = True
        NOTES.append("%s: exit status %d, no figures" % (name, meta["rc"]))
        return r
    r["rps"] = r["done"] / r["elapsed"] if r["elapsed"] else None
    r["cpu100k"] = r["t"]["cpu_s"] / r["done"] * 1e5 if r["done"] else None
    # What the tool asked of the server: nginx's CPU per request it served.
    r["nginx100k"] = meta["nginx_ticks"] / CLK / r["done"] * 1e5 if r["done"] else None
    return r


rows = []
for tool in ("h2load", "perfops"):
    runs = [run("%s.%d" % (tool, i)) for i in range(1, ENV["rounds"] + 1)]
    runs = [r for r in runs if r and r.get("rps")]
    rows.append((tool, runs))

lines = ["# HTTP/2 over TLS: perfops vs h2load (%s)" % ENV["stamp"], "",
         "nginx %s, 1 worker on CPU %d; tools on CPU %d; %d connections x %d streams, %d s per run, %d rounds. "
         "perfops %s, %s." % (ENV["nginx_version"], ENV["target_cpu"], ENV["tool_cpu"], ENV["conns"], ENV["streams"],
                              ENV["duration"], ENV["rounds"], ENV["perfops_git"], ENV["h2load_version"]), "",
         "| tool | rps (median) | CPU s per 100k | tool CPU | peak RSS MiB | nginx CPU | nginx CPU s per 100k | runs |",
         "|---|---:|---:|---:|---:|---:|---:|---:|"]
for tool, runs in rows:
    lines.append("| %s | %s | %s | %s | %s | %s | %s | %d |" % (
        tool, fmt(med([r["rps"] for r in runs])), fmt(med([r["cpu100k"] for r in runs]), "{:.2f}"),
        pct(med([r["t"]["tool_cpu"] for r in runs])), fmt(med([r["t"]["rss_mib"] for r in runs]), "{:.1f}"),
        pct(med([r["nginx_cpu"] for r in runs])), fmt(med([r["nginx100k"] for r in runs]), "{:.3f}"), len(runs)))
lines += ["", "Round by round (rps; nginx CPU s per 100k requests):", ""]
for tool, runs in rows:
    lines.append("- %s: %s" % (tool, ", ".join("%s (%s)" % (fmt(r["rps"]), fmt(r["nginx100k"], "{:.3f}")) for r in runs)))
h2, po = (med([r["rps"] for r in runs]) for _, runs in rows)
if h2 and po:
    lines += ["", "perfops / h2load: %.2fx the requests per second." % (po / h2)]
n2, npo = (med([r["nginx100k"] for r in runs]) for _, runs in rows)
if n2 and npo:
    lines += ["nginx's CPU per request, perfops' / h2load's: %.3f (below 1: nginx works less for perfops' requests; "
              "with nginx's one worker saturated, rps follows it)." % (npo / n2)]
if NOTES:
    lines += ["", "Notes:"] + ["- " + n for n in NOTES]
write_report(REPORT, lines)
sys.exit(3 if FAILED else 0)
