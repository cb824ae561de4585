#!/usr/bin/env python3
"""Build the markdown report for bench/grpc.sh (perfops vs ghz, gRPC unary).

usage: grpc_report.py RAW_DIR REPORT_MD

Per run NAME (closed.{ghz,perfops}.i, open.{perfops,ghz}.i): NAME.json (ghz's --format json
report, or perfops' --json summary), NAME.time, NAME.meta.json, and NAME.server.json (the
server's /__stats after the run: its own p50/p99 per call, in the open model). Calls: ghz's
statusCodeDistribution OK (its count minus errors), perfops' succeeded; elapsed: ghz's total
(ns), perfops' elapsed_s. The open model's figures are each run's p50/p99 minus the server's
own of the same run, then the median over rounds.
Exit status 0 if every run worked, 3 otherwise (the report is written anyway).
"""
import json
import os
import sys

sys.dont_write_bytecode = True   # no __pycache__ in bench/lib
from benchlib import cli, fmt, load_meta, med, pct, read, time_stats, write_report  # noqa: E402

RAW, REPORT, ENV = cli()
FAILED = False
NOTES = []


def run(name):
    global FAILED
    meta = load_meta(RAW, name)
    if meta is None:
        return None
    r = {"name": name, "t": time_stats(RAW, name), "ok": None}
    text = read(os.path.join(RAW, name + ".json"))
    try:
        j = json.loads(text) if text else None
    except ValueError:
        j = None
    if j and ".ghz." in name:
        codes = j.get("statusCodeDistribution") or {}
        r["ok"] = codes.get("OK", 0)
        r["errors"] = sum(v for k, v in codes.items() if k != "OK")
        r["elapsed"] = j["total"] / 1e9
        lat = {d["percentage"]: d["latency"] / 1e6 for d in (j.get("latencyDistribution") or [])}
        r["p50"], r["p99"] = lat.get(50), lat.get(99)
    elif j:
        r["ok"], r["errors"], r["elapsed"] = j["succeeded"], j["failed"], j["elapsed_s"]
        r["p50"], r["p99"] = j["latency_ms"]["p50"], j["latency_ms"]["p99"]
        r["s50"], r["s99"] = j["service_ms"]["p50"], j["service_ms"]["p99"]
    srv = read(os.path.join(RAW, name + ".server.json"))
    try:
        srv = json.loads(srv) if srv else {}
    except ValueError:
        srv = {}
    r["srv50"], r["srv99"] = srv.get("p50_ms"), srv.get("p99_ms")
    if meta["rc"] != 0 or not r["ok"] or not r["t"]:
        FAILED = True
        NOTES.append("%s: exit status %d, no figures" % (name, meta["rc"]))
        return None
    if r["errors"]:
        NOTES.append("%s: %d calls failed" % (name, r["errors"]))
    r["rps"] = r["ok"] / r["elapsed"] if r["elapsed"] else None
    r["cpu100k"] = r["t"]["cpu_s"] / r["ok"] * 1e5
    return r


def runs(prefix):
    out = [run("%s.%d" % (prefix, i)) for i in range(1, ENV["rounds"] + 1)]
    return [r for r in out if r]


lines = ["# gRPC unary: perfops vs ghz (%s)" % ENV["stamp"], "",
         "grpc-go echo server on CPU %d, tools on CPU %d; %d s per run, %d rounds; open model at %s priority. perfops %s, %s." % (
             ENV["target_cpu"], ENV["tool_cpu"], ENV["duration"], ENV["rounds"], ENV.get("prio", "normal"), ENV["perfops_git"],
             ENV["ghz_version"]), "",
         "## %d calls in flight on one connection, no delay" % ENV["conc"], "",
         "| tool | calls/s (median) | CPU s per 100k | tool CPU | peak RSS MiB |", "|---|---:|---:|---:|---:|"]
closed = {}
for tool in ("ghz", "perfops"):
    rs = runs("closed." + tool)
    closed[tool] = med([r["rps"] for r in rs])
    lines.append("| %s | %s | %s | %s | %s |" % (
        tool, fmt(closed[tool]), fmt(med([r["cpu100k"] for r in rs]), "{:.2f}"),
        pct(med([r["t"]["tool_cpu"] for r in rs])), fmt(med([r["t"]["rss_mib"] for r in rs]), "{:.1f}")))
if closed["ghz"] and closed["perfops"]:
    lines += ["", "perfops / ghz: %.2fx the calls per second." % (closed["perfops"] / closed["ghz"])]
lines += ["", "## Open model, %d calls/s against a %s method" % (ENV["rate"], ENV["delay"]), "",
          "Each run's p50/p99 minus the server's own of the same run (from the request's HEADERS read "
          "off its connection to its status handed to the writer), median over rounds.", "",
          "| tool | calls/s | p50 ms | p99 ms | server p50 | server p99 | p50 - server's | p99 - server's "
          "| from the send: p50 - server's | p99 - server's | CPU s per 100k |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]


def minus(a, b):
    return None if a is None or b is None else a - b


for tool in ("perfops", "ghz"):
    rs = runs("open." + tool)
    # perfops' latency counts from the intended start; its service time, as ghz's latency, from the send
    send50 = [minus(r.get("s50", r["p50"]), r["srv50"]) for r in rs]
    send99 = [minus(r.get("s99", r["p99"]), r["srv99"]) for r in rs]
    lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        tool, fmt(med([r["rps"] for r in rs])), fmt(med([r["p50"] for r in rs]), "{:.3f}"),
        fmt(med([r["p99"] for r in rs]), "{:.3f}"), fmt(med([r["srv50"] for r in rs]), "{:.3f}"),
        fmt(med([r["srv99"] for r in rs]), "{:.3f}"),
        fmt(med([minus(r["p50"], r["srv50"]) for r in rs]), "{:+.3f}"),
        fmt(med([minus(r["p99"], r["srv99"]) for r in rs]), "{:+.3f}"),
        fmt(med(send50), "{:+.3f}"), fmt(med(send99), "{:+.3f}"),
        fmt(med([r["cpu100k"] for r in rs]), "{:.2f}")))
    for r in rs:
        if r["srv50"] is None:
            NOTES.append("%s: no server timing (NAME.server.json)" % r["name"])
lines += ["", "perfops' latency counts from each call's intended start, its service time from its send; "
          "ghz's latency from its send (so both of its columns are the same)."]
if NOTES:
    lines += ["", "Notes:"] + ["- " + n for n in NOTES]
write_report(REPORT, lines)
sys.exit(3 if FAILED else 0)
