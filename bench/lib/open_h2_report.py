"""Report of bench/open-h2.sh: HTTP/2 and gRPC in the open model beside HTTP/1.1 and the closed loop.

usage: open_h2_report.py RAW_DIR REPORT_MD

Reads, per run PROTO.MODEL.TOOL.ROUND: NAME.json (perfops quick --json), NAME.time (/usr/bin/time),
NAME.meta.json (the server's ticks and requests); per counted run PROTO.MODEL.TOOL:
NAME.count.tool and NAME.count.server (`perf stat -x,`) and NAME.count.meta.json. One table of
medians over the rounds, one of counts per request, then every run. Exit status 3 if a run failed.
"""
import json
import os
import sys

from benchlib import cli, load_meta, med, read, time_stats, write_report

RAW, REPORT, ENV = cli()
ROUNDS = int(ENV["rounds"])
PROTOS = ENV["protos"].split()
MODELS = ENV["models"].split()
TOOLS = ENV["tools"].split()
LABEL = {"h1": "HTTP/1.1 (nginx)", "h2c": "h2c (nginx)", "grpc": "gRPC (grpc-go echo)"}
FAILED = []


def f(v, spec="{:,.0f}"):
    return "—" if v is None else spec.format(v)


def load_json(path):
    text = read(path)
    try:
        return None if text is None else json.loads(text)
    except ValueError:
        return None


def run(name):
    """One timed run -> a dict of its figures, or None if it never ran."""
    meta = load_meta(RAW, name)
    if meta is None:
        return None
    q = load_json(os.path.join(RAW, name + ".json")) or {}
    t = time_stats(RAW, name) or {}
    done = q.get("completed")
    r = {"name": name, "rc": meta.get("rc"), "completed": done, "failed": q.get("failed"),
         "rps": q.get("requests_per_s"), "dropped": q.get("dropped"),
         "p50": (q.get("latency_ms") or {}).get("p50"), "p99": (q.get("latency_ms") or {}).get("p99"),
         "s50": (q.get("service_ms") or {}).get("p50"), "s99": (q.get("service_ms") or {}).get("p99"),
         "cpu_s": t.get("cpu_s"), "rss_mib": t.get("rss_mib")}
    r["cpu100k"] = r["cpu_s"] / done * 1e5 if done and r["cpu_s"] is not None else None
    served, ticks = meta.get("server_requests"), meta.get("server_ticks")
    r["server100k"] = (ticks / ENV["clk_tck"] / served * 1e5) if served and ticks is not None else None
    r["ok"] = meta.get("rc") == 0 and bool(done) and not q.get("failed")
    if not r["ok"]:
        FAILED.append(name)
    return r


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


def per(c, keys, n):
    vals = [c.get(k) for k in keys]
    return sum(v for v in vals if v) / n if n and any(v is not None for v in vals) else None


L = ["# open-h2 %s: HTTP/2 and gRPC in the open model" % ENV["stamp"], ""]
L.append("- open: `perfops quick --workers 1 -r %d -d %ds`; closed: `-c %d` (HTTP/2, gRPC: `-c 1 -p %d`), "
         "%d round(s), tools alternating: %s" % (ENV["rate"], ENV["duration"], ENV["conc"], ENV["conc"],
                                                 ROUNDS, ", ".join(TOOLS)))
L.append("- perfops = %s (git %s); base = %s" % (ENV["perfops_bin"], ENV["perfops_git"], ENV.get("base_bin") or "—"))
L.append("- servers on CPU %d, perfops on CPU %d; nginx %s; %s; %s, kernel %s" % (
    ENV["target_cpu"], ENV["tool_cpu"], ENV.get("nginx_version"), ENV.get("go_version"), ENV.get("cpu"),
    ENV.get("kernel")))
L.append("")
L.append("## CPU per request (medians over the rounds)")
L.append("")
L.append("| protocol | model | tool | rps | CPU s/100k | server CPU s/100k | latency p50 / p99 ms "
         "| service p50 / p99 ms | dropped |")
L.append("|---|---|---|---:|---:|---:|---|---|---:|")
runs = {}
for p in PROTOS:
    for m in MODELS:
        for t in TOOLS:
            rs = [run("%s.%s.%s.%d" % (p, m, t, i)) for i in range(1, ROUNDS + 1)]
            rs = [r for r in rs if r]
            runs[(p, m, t)] = rs
            ok = [r for r in rs if r["ok"]]
            if not rs:
                continue

            def md(k, spec="{:.3f}"):
                return f(med([r.get(k) for r in ok]), spec)
            L.append("| %s | %s | %s | %s | %s | %s | %s / %s | %s / %s | %s |" % (
                LABEL[p], m, t, md("rps", "{:,.0f}"), md("cpu100k", "{:.2f}"), md("server100k", "{:.2f}"),
                md("p50"), md("p99"), md("s50"), md("s99"), md("dropped", "{:,.0f}")))

counted = []
for p in PROTOS:
    for m in MODELS:
        for t in TOOLS:
            name = "%s.%s.%s" % (p, m, t)
            meta = load_meta(RAW, name + ".count")
            if meta is None:
                continue
            q = load_json(os.path.join(RAW, name + ".count.json")) or {}
            tool = perf_counts(os.path.join(RAW, name + ".count.tool"))
            srv = perf_counts(os.path.join(RAW, name + ".count.server"))
            n = meta.get("server_requests")
            counted.append((p, m, t, n, tool, srv))
if counted:
    L.append("")
    L.append("## Counts per request (`perf stat`, %d s per run, not timed)" % ENV["count_s"])
    L.append("")
    L.append("Per request the server answered during the run. writes: sendto, write, writev; reads: recvfrom, "
             "recvmsg, read (a timerfd's read too); waits: epoll_wait, epoll_pwait; sleeps: clock_nanosleep.")
    L.append("")
    L.append("| protocol | model | tool | requests | syscalls | context switches | writes | reads | waits "
             "| sleeps | timerfd_settime | server syscalls | server context switches |")
    L.append("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for p, m, t, n, tool, srv in counted:
        L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            LABEL[p], m, t, f(n), f(per(tool, ["raw_syscalls:sys_enter"], n), "{:.2f}"),
            f(per(tool, ["context-switches"], n), "{:.3f}"),
            f(per(tool, ["sendto", "write", "writev"], n), "{:.3f}"),
            f(per(tool, ["recvfrom", "recvmsg", "read"], n), "{:.3f}"),
            f(per(tool, ["epoll_wait", "epoll_pwait"], n), "{:.3f}"),
            f(per(tool, ["clock_nanosleep"], n), "{:.3f}"),
            f(per(tool, ["timerfd_settime"], n), "{:.3f}"),
            f(per(srv, ["raw_syscalls:sys_enter"], n), "{:.2f}"),
            f(per(srv, ["context-switches"], n), "{:.3f}")))

L.append("")
L.append("## Every run")
L.append("")
L.append("| run | rc | completed | failed | rps | CPU s | CPU s/100k | server CPU s/100k | p50 / p99 ms |")
L.append("|---|---:|---:|---:|---:|---:|---:|---:|---|")
for key, rs in runs.items():
    for r in rs:
        L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s / %s |" % (
            r["name"], r["rc"], f(r["completed"]), f(r["failed"]), f(r["rps"]), f(r["cpu_s"], "{:.2f}"),
            f(r["cpu100k"], "{:.2f}"), f(r["server100k"], "{:.2f}"), f(r["p50"], "{:.3f}"), f(r["p99"], "{:.3f}")))
if FAILED:
    L.append("")
    L.append("Failed or with failures: " + ", ".join(FAILED))
write_report(REPORT, L)
sys.exit(3 if FAILED else 0)
