"""The report of bench/soak.sh: RSS per sample, results size, report open time, verdicts.

Reads the raw-output folder: env.json, samples.tsv (t_s, perfops VmRSS and VmHWM in KiB,
its CPU ticks, the demo's VmRSS, perfops' open fds), run.json (exit status, wall time, results dir),
results.bytes and results.files.tsv, report.time/report.rc (`perfops report`),
report.N.dom and chromium.tsv (headless Chromium rounds). Exit status 0 when the three
bounds of issue #12 held and the run completed, 3 otherwise.
"""
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
from benchlib import cli, med, n0, n2, parse_time, read, write_report  # noqa: E402

RAW, REPORT, ENV = cli()
MIB = 1024.0 * 1024.0


def samples():
    rows = []
    for line in (read(os.path.join(RAW, "samples.tsv")) or "").splitlines()[1:]:
        p = line.split("\t")
        if len(p) == 6 and p[1]:
            rows.append({"t": int(p[0]), "rss": int(p[1]), "hwm": int(p[2] or 0),
                         "ticks": int(p[3] or 0), "demo": int(p[4]) if p[4] else None, "fds": p[5]})
    return rows


def body_attr(dom, name):
    m = re.search(r"<body\b[^>]*\b" + re.escape(name) + r'="([^"]*)"', dom or "")
    return m.group(1) if m else None


rows = samples()
run = json.loads(read(os.path.join(RAW, "run.json")) or "{}")
ref_s, sample_s, clk = ENV["ref_s"], ENV["sample_s"], ENV["clk_tck"]
ok = True
L = [f"# Soak {ENV['stamp']}: perfops run, {ENV['rate']:,}/s for {ENV['duration']} s against the demo (async)", ""]
L.append(f"perfops {ENV['perfops_version']} at {ENV['perfops_git']} ({ENV['perfops_bin']}), on CPU {ENV['tool_cpu']}, "
         f"`--workers 1`; demo on CPU {ENV['target_cpu']}, io-wait {ENV['io_wait']}, cpu-work {ENV['cpu_work']}; "
         f"{ENV['cpu'].strip()}, kernel {ENV['kernel']}.")
L.append("")

# ------------------------------------------------------------------ the run itself
summary = None
found = sorted(glob.glob(os.path.join(RAW, "runs", "*", "summary.json")))
if found:
    try:
        summary = json.load(open(found[-1]))
    except (OSError, ValueError) as e:
        L.append(f"summary.json unreadable: {e}")
rc = run.get("run_rc")
if summary:
    t = summary["total"]
    fails = ", ".join(f"{k} {v:,}" for k, v in sorted(t.get("failures", {}).items())) or "none"
    L.append(f"Run: exit {rc} after {run.get('run_wall_s')} s; {summary.get('elapsed_s')} s of load; "
             f"sent {t['sent']:,}, completed {t['completed']:,}, achieved {t['achieved_rate']:,.1f}/s of {ENV['rate']:,}/s, "
             f"dropped {t['dropped']:,}, failed {t['failed']:,} ({fails}); p50 {t['latency_ms']['p50']:.2f} ms, "
             f"p99 {t['latency_ms']['p99']:.2f} ms; verdict: {(summary.get('verdict') or {}).get('headline', '?')}; "
             f"generator CPU {summary['generator']['cpu_user_s'] + summary['generator']['cpu_sys_s']:.0f} s.")
    held = t["achieved_rate"] >= 0.97 * ENV["rate"] and not summary.get("interrupted") and not summary.get("aborted")
    if not held:
        ok = False
        L.append("**The run did not hold the rate (or was interrupted): the RSS figures are not those of the soak asked for.**")
else:
    ok = False
    L.append(f"Run: exit {rc}, no summary.json (see run.err).")
if run.get("stopped"):
    ok = False
    L.append(f"The run overran DURATION and was stopped ({run['stopped']}).")
if rc not in (0, 1):   # 1: the SLO failed, which the soak reports but does not judge
    ok = False
L.append("")

# ------------------------------------------------------------------ RSS table
ref = next((r for r in rows if r["t"] >= ref_s), None)
L.append(f"## perfops RSS, sampled every {sample_s} s (reference: the sample at {ref['t'] if ref else ref_s} s)")
L.append("")
L.append("| minute | t (s) | RSS MiB | growth vs reference | peak (VmHWM) MiB | perfops CPU | open fds | demo RSS MiB |")
L.append("|---:|---:|---:|---:|---:|---:|---:|---:|")
prev = None
for r in rows:
    growth = "—" if ref is None or r["t"] < ref["t"] else "{:+.1f} %".format(100.0 * (r["rss"] / ref["rss"] - 1))
    cpu = "—" if prev is None else "{:.0f} %".format(100.0 * (r["ticks"] - prev["ticks"]) / clk / (r["t"] - prev["t"]))
    demo = "—" if r["demo"] is None else "{:.1f}".format(r["demo"] / 1024.0)
    L.append(f"| {r['t'] / 60:.1f} | {r['t']} | {r['rss'] / 1024.0:.1f} | {growth} | {r['hwm'] / 1024.0:.1f} | {cpu} | {r['fds']} | {demo} |")
    prev = r
L.append("")

# ------------------------------------------------------------------ results directory
size = read(os.path.join(RAW, "results.bytes"))
size = int(size) if size and size.strip().isdigit() else None
L.append(f"## Results directory: {run.get('results_dir', '?')}")
L.append("")
L.append("| file | bytes |")
L.append("|---|---:|")
for line in (read(os.path.join(RAW, "results.files.tsv")) or "").splitlines():
    name, _, n = line.partition("\t")
    L.append(f"| {name} | {int(n):,} |")
L.append(f"| **total** (du --apparent-size) | **{n0(size)}** ({n2(size / MIB if size is not None else None)} MiB) |")
L.append("")

# ------------------------------------------------------------------ report and Chromium
rep_rc = (read(os.path.join(RAW, "report.rc")) or "?").strip()
rt = parse_time(os.path.join(RAW, "report.time"))
L.append("## The report")
L.append("")
L.append(f"`perfops report DIR`: exit {rep_rc}" + (f", {rt[0]:.2f} s wall, {rt[1] + rt[2]:.2f} CPU s, peak RSS "
                                                   f"{rt[3] / 1024.0:.1f} MiB" if rt else "") +
         f"; report.html {n0(os.path.getsize(found[-1].replace('summary.json', 'report.html')) if found and os.path.exists(found[-1].replace('summary.json', 'report.html')) else None)} bytes.")
L.append("")
L.append("| round | Chromium, blank page (s) | Chromium, report (s) | report: navigation -> scripts ran, laid out (ms) | load event (ms) | charts drawn / expected | script errors |")
L.append("|---:|---:|---:|---:|---:|---:|---:|")
rendered, charts_ok = [], True
chrom = {}
for line in (read(os.path.join(RAW, "chromium.tsv")) or "").splitlines()[1:]:
    p = line.split("\t")
    if len(p) == 3:
        chrom[int(p[0])] = (float(p[1]), float(p[2]))
for i in sorted(chrom):
    dom = read(os.path.join(RAW, f"report.{i}.dom"))
    ms = body_attr(dom, "data-soak-rendered-ms")
    load = body_attr(dom, "data-soak-load-ms")
    drawn, expected = body_attr(dom, "data-charts-drawn"), body_attr(dom, "data-charts-expected")
    errors = body_attr(dom, "data-errors")
    if ms is not None:
        rendered.append(float(ms))
    if drawn is None or drawn != expected or errors != "0":
        charts_ok = False
    L.append(f"| {i} | {chrom[i][0]:.2f} | {chrom[i][1]:.2f} | {ms or '—'} | {load or '—'} | {drawn or '—'} / {expected or '—'} | {errors or '—'} |")
L.append("")
open_s = med(rendered) / 1000.0 if rendered else None

# ------------------------------------------------------------------ verdicts
after = [r for r in rows if ref is not None and r["t"] > ref["t"]]
growth = max((r["rss"] / ref["rss"] - 1 for r in after), default=None) if ref else None
last = (rows[-1]["rss"] / ref["rss"] - 1) if ref and rows else None
L.append("## Verdicts (issue #12, point 5)")
L.append("")


def verdict(name, passed, text):
    global ok
    ok = ok and passed
    L.append(f"- {'PASS' if passed else 'FAIL'} {name}: {text}")


if growth is None:
    verdict("RSS flat", False, f"no sample after the reference at {ref_s} s")
else:
    verdict("RSS flat", 100 * growth < ENV["growth_max_pct"],
            f"largest RSS after {ref['t']} s is {100 * growth:+.1f} % of the reference {ref['rss'] / 1024.0:.1f} MiB "
            f"(last sample {100 * last:+.1f} %); bound < {ENV['growth_max_pct']} %")
if size is None:
    verdict("results size", False, "results directory not measured")
else:
    verdict("results size", size / MIB < ENV["results_max_mib"],
            f"{size / MIB:.2f} MiB; bound < {ENV['results_max_mib']} MiB")
if open_s is None:
    verdict("report opens", False, "no Chromium round recorded a time (see chromium.err)")
else:
    verdict("report opens", open_s < ENV["open_max_s"] and charts_ok and rep_rc == "0",
            f"median {open_s:.2f} s from navigation to every chart drawn and laid out "
            f"({len(rendered)} rounds{'' if charts_ok else '; some chart did not draw or a script failed'}); "
            f"bound < {ENV['open_max_s']} s")
if ENV["duration"] < 3600:
    L.append("")
    L.append(f"(A rehearsal: {ENV['duration']} s, not the hour the bounds are about.)")
write_report(REPORT, L)
sys.exit(0 if ok else 3)
