#!/usr/bin/env python3
"""Build the markdown report for bench/scenario.sh (perfops vs k6, JWT scenario).

usage: scenario_report.py RAW_DIR REPORT_MD

RAW_DIR holds env.json and, per run NAME (k6.i, perfops.i): NAME.out / NAME.err,
NAME.time (`/usr/bin/time -f '%e %U %S %M'`), NAME.meta.json (written by
scenario.sh), NAME.srv0 / NAME.srv1 (the demo server's demo_requests_total
counters before and after), and NAME.json (k6 handleSummary) or NAME.runs/*/summary.json
(perfops). Prints the report and writes it to REPORT_MD.
Exit status 0 if every run worked and both tools ran the same flow without
failures, 3 otherwise (the report is written anyway).
"""
import glob
import json
import os
import re
import sys

sys.dont_write_bytecode = True   # no __pycache__ in bench/lib
from benchlib import cli, core_share, last_line, load_meta, med, n0, n2, pct, read, time_stats, write_report  # noqa: E402

RAW, REPORT, ENV = cli()
ROUNDS, DURATION, VUS = ENV["rounds"], ENV["duration"], ENV["vus"]
CLK = float(ENV["clk_tck"])
NOISE_MAX_S = float(ENV.get("noise_max_s", 0.5))
GOAL = float(ENV.get("goal_ratio", 10))
TOOLS = ("perfops", "k6")
FAIL_MAX = 0.001            # failures above 0.1 % of responses: not a clean run
RATIO_RANGE = (700, 1400)   # orders per auth accepted as "about 1000" (weights 1:1000)
NOTES = []
BAD = False


def server_counts(path):
    """demo_requests_total lines -> {(path, code): n}; nginx: {("*", "*"): requests}"""
    out = {}
    for line in (read(path) or "").splitlines():
        m = re.match(r'demo_requests_total\{path="([^"]*)",code="([^"]*)"\}\s+(\d+)', line)
        if m:
            out[(m.group(1), m.group(2))] = int(m.group(3))
        m = re.match(r'nginx_requests_total\s+(\d+)', line)
        if m:
            out[("*", "*")] = int(m.group(1))
    return out


def server_delta(name):
    a = server_counts(os.path.join(RAW, name + ".srv0"))
    b = server_counts(os.path.join(RAW, name + ".srv1"))
    if not b:
        return None
    d = {k: b.get(k, 0) - a.get(k, 0) for k in set(a) | set(b)}
    if ("*", "*") in d:   # nginx stub_status: all requests; the second status request counts itself
        return {"total": d[("*", "*")] - 1}
    return {
        "auth": d.get(("/auth", "200"), 0),
        "orders": d.get(("/orders", "200"), 0),
        "bad": sum(n for (p, c), n in d.items() if c != "200"),
        "bad_detail": ", ".join(f"{p} {c}: {n}" for (p, c), n in sorted(d.items()) if c != "200" and n),
    }


def run(name, tool):
    meta = load_meta(RAW, name)
    if meta is None:
        return None
    r = {"name": name, "tool": tool, "meta": meta, "rc": meta["rc"], "ok": True, "err": None,
         "other_cpu_s": meta.get("other_cpu_s"),
         "target_cpu": core_share(meta["target_ticks"], CLK, meta["wall_s"])}
    t = time_stats(RAW, name)
    if t:
        r.update(t)
    else:
        r["ok"], r["err"] = False, "no /usr/bin/time output"
    r["srv"] = server_delta(name)
    try:
        (parse_perfops if tool == "perfops" else parse_k6)(name, r)
    except (OSError, ValueError, KeyError, TypeError) as e:
        r["ok"], r["err"] = False, f"cannot read the {tool} summary: {e}"
    # perfops' exit 1 with an inconclusive verdict says "the generator was the limit",
    # which a closed loop at full speed always is: an honest run, judged by its figures.
    if r["rc"] == 1 and tool == "perfops" and r.get("verdict") == "inconclusive":
        r["note"] = "exit 1: inconclusive (" + (r.get("headline") or "the generator was the limit") + ")"
    elif r["rc"] != 0:
        r["ok"] = False
        r["err"] = (r["err"] + "; " if r["err"] else "") + f"exit status {r['rc']}: " + \
            last_line(read(os.path.join(RAW, name + ".err")), 2)
    if r.get("completed") and r.get("cpu_s"):
        r["rpcs"] = r["completed"] / r["cpu_s"]
    return r


def parse_perfops(name, r):
    found = sorted(glob.glob(os.path.join(RAW, name + ".runs", "*", "summary.json")))
    if not found:
        raise OSError("no summary.json under " + name + ".runs/")
    s = json.load(open(found[-1]))
    r["summary_path"] = os.path.relpath(found[-1], RAW)
    tot = s["total"]
    r["completed"] = tot["completed"]
    r["failed"] = tot["failed"]
    r["failures"] = ", ".join(f"{k}: {v}" for k, v in sorted(tot.get("failures", {}).items()))
    steps = {st["name"]: st for st in s["steps"]}
    r["auth"] = steps.get("auth", {}).get("completed", 0)
    r["orders"] = steps.get("orders", {}).get("completed", 0)
    r["step_failed"] = {k: v.get("failed", 0) for k, v in steps.items()}
    r["duration_s"] = s["elapsed_s"]
    r["self_cpu_s"] = s["generator"]["cpu_user_s"] + s["generator"]["cpu_sys_s"]
    r["workers"] = s["generator"]["workers"]
    r["warnings"] = s.get("warnings", [])
    r["verdict"] = (s.get("verdict") or {}).get("result")
    r["headline"] = (s.get("verdict") or {}).get("headline")
    if s.get("interrupted") or s.get("aborted"):
        r["ok"], r["err"] = False, f"interrupted={s.get('interrupted')} aborted={s.get('aborted')}"
    r["setup_auth"] = 1


def parse_k6(name, r):
    d = json.load(open(os.path.join(RAW, name + ".json")))
    m = d["metrics"]

    def val(metric, key):
        return (m.get(metric) or {}).get("values", {}).get(key, 0)

    r["auth"] = int(val("http_reqs{name:auth}", "count"))
    r["orders"] = int(val("http_reqs{name:orders}", "count"))
    r["setup_auth"] = int(val("http_reqs{name:login}", "count"))
    # responses of the load (the setup login excluded, as perfops excludes its setup)
    r["completed"] = int(val("http_reqs", "count")) - r["setup_auth"]
    # http_req_failed is a Rate: `passes` counts the failed requests
    failed_reqs = int(val("http_req_failed", "passes"))
    failed_checks = int(val("checks", "fails"))
    r["failed"] = max(failed_reqs, failed_checks)
    r["failures"] = f"http_req_failed: {failed_reqs}, failed checks: {failed_checks}" if r["failed"] else ""
    r["step_failed"] = {"auth": int(val("http_req_failed{name:auth}", "passes")),
                        "orders": int(val("http_req_failed{name:orders}", "passes"))}
    r["duration_s"] = d["state"]["testRunDurationMs"] / 1000.0
    r["iterations"] = int(val("iterations", "count"))


def values(runs, key):
    return [r[key] for r in runs if r.get(key) is not None]


def rng(runs, key, fmt):
    xs = values(runs, key)
    if len(xs) < 2:
        return ""
    return f" ({fmt(min(xs))}–{fmt(max(xs))})"


# ------------------------------------------------------------------ gather
runs = {t: [] for t in TOOLS}
for i in range(1, ROUNDS + 1):
    for t in TOOLS:
        r = run(f"{t}.{i}", t)
        if r is not None:
            runs[t].append(r)

for t in TOOLS:
    if not runs[t]:
        NOTES.append(f"**{t}: no run was recorded.**")
        BAD = True
    for r in runs[t]:
        if r.get("note"):
            NOTES.append(f"{r['name']}: {r['note']}; its figures count.")
        if not r["ok"]:
            BAD = True
            NOTES.append(f"**{r['name']} failed**: {r['err']}")
            continue
        comp = r.get("completed") or 0
        if comp == 0:
            BAD = True
            NOTES.append(f"**{r['name']}: no completed request.**")
            continue
        if r["failed"] > FAIL_MAX * comp:
            BAD = True
            NOTES.append(f"**{r['name']}: {r['failed']:,} failures of {comp:,} ({100 * r['failed'] / comp:.2f} %)**: {r['failures']}")
        r["ratio"] = r["orders"] / r["auth"] if r["auth"] else None
        if r["auth"] + r["orders"] != comp:
            NOTES.append(f"{r['name']}: auth + orders = {r['auth'] + r['orders']:,} but completed = {comp:,}.")
        if r["ratio"] is None or not RATIO_RANGE[0] <= r["ratio"] <= RATIO_RANGE[1]:
            BAD = True
            NOTES.append(f"**{r['name']}: {r['orders']:,} orders for {r['auth']:,} re-logins: not the 1000:1 mix.**")
        s = r["srv"]
        if s is None:
            NOTES.append(f"{r['name']}: the target's request counters could not be read; no server-side cross-check.")
        elif "total" in s:
            want = comp + r.get("setup_auth", 0)
            if not 0 <= s["total"] - want <= VUS + max(VUS, 0.001 * comp):
                NOTES.append(f"**{r['name']}: nginx counted {s['total']:,} requests, the tool reports "
                             f"{comp:,} (+{r.get('setup_auth', 0)} setup).**")
        else:
            # the server also sees the setup login; k6 does not count requests cut by gracefulStop: 0s
            d_auth = s["auth"] - r["auth"] - r.get("setup_auth", 0)
            d_orders = s["orders"] - r["orders"]
            r["srv_orders_diff"] = d_orders
            if abs(d_auth) > VUS or abs(d_orders) > max(VUS, 0.001 * comp):
                NOTES.append(f"**{r['name']}: the server saw {s['auth']:,} auth / {s['orders']:,} orders, the tool "
                             f"reports {r['auth']:,} (+{r.get('setup_auth', 0)} setup) / {r['orders']:,}.**")
            if s["bad"]:
                NOTES.append(f"{r['name']}: the server answered non-200: {s['bad_detail']}.")
        if r.get("other_cpu_s") is not None and r["other_cpu_s"] > NOISE_MAX_S:
            NOTES.append(f"{r['name']}: other processes used {r['other_cpu_s']:.2f} CPU s during the run (noisy).")
        if r["tool"] == "perfops":
            if r.get("warnings"):
                NOTES.append(f"{r['name']}: perfops warnings: {'; '.join(r['warnings'])}")
            if r.get("self_cpu_s") is not None and r.get("cpu_s"):
                if abs(r["self_cpu_s"] - r["cpu_s"]) > max(0.05, 0.05 * r["cpu_s"]):
                    NOTES.append(f"{r['name']}: perfops' own generator CPU ({r['self_cpu_s']:.2f} s) differs from "
                                 f"/usr/bin/time's ({r['cpu_s']:.2f} s).")

good = {t: [r for r in runs[t] if r["ok"] and r.get("rpcs")] for t in TOOLS}
m = {t: {k: med(values(good[t], k))
         for k in ("completed", "failed", "auth", "orders", "ratio", "duration_s", "cpu_s",
                   "rpcs", "rss_mib", "tool_cpu", "target_cpu", "elapsed")} for t in TOOLS}
for t in TOOLS:
    rates = [r["completed"] / r["duration_s"] for r in good[t] if r.get("duration_s")]
    m[t]["rps"] = med(rates)
ratio = (m["perfops"]["rpcs"] / m["k6"]["rpcs"]) if m["perfops"]["rpcs"] and m["k6"]["rpcs"] else None
paired = []
for a in good["perfops"]:
    i = a["name"].split(".")[1]
    b = next((r for r in good["k6"] if r["name"].split(".")[1] == i), None)
    if b:
        paired.append(a["rpcs"] / b["rpcs"])
for t in TOOLS:
    tc, tt = m[t]["target_cpu"], m[t]["tool_cpu"]
    if tc is not None and tc > 0.9 and tt is not None and tt > 0.9:
        NOTES.append(f"{t}: the target ({100 * tc:.0f} %) and {t} ({100 * tt:.0f} %) both used about all of their core: "
                     f"{t} ran at its own maximum rate, give or take the target.")
    elif tc is not None and tc > 0.9:
        NOTES.append(f"{t}: the target used {100 * tc:.0f} % of its core and {t} {100 * (tt or 0):.0f} %: the target, "
                     f"not {t}, limited the rate ({t} idled part of the time; its requests per CPU s are measured "
                     f"below its own maximum load, where it would batch more per wake-up).")

# ------------------------------------------------------------------ render
L = []
L.append(f"# perfops vs k6: 2-step JWT scenario, target {ENV.get('target', 'demo')} ({ENV['stamp']})")
L.append("")
TARGET = ENV.get("target", "demo")
TARGET_TEXT = {
    "demo": "demo server (`perfops demo --model async --io-wait 0ms --cpu-work 0us --threads 1 --backlog 1024`)",
    "nginx": f"nginx {ENV.get('nginx_version', '')} (1 worker; bench/lib/scenario_nginx.py: the demo's routes and "
             "/orders bytes, fixed token compared as a string)",
}[TARGET]
L.append(f"Closed model, {VUS} users/VUs, {DURATION} s per run, {ROUNDS} round(s) alternating k6 and perfops, medians. "
         f"Tool pinned to CPU {ENV['tool_cpu']}, {TARGET_TEXT} pinned to CPU {ENV['target_cpu']}; GET /orders = {ENV['orders_bytes']:,} bytes "
         f"of JSON. Flow: setup POST /auth (token = `$.token`); then 1 re-login per 1000 GET /orders with "
         f"`Authorization: Bearer <token>`, expect 200.")
L.append("")
L.append(f"{ENV['perfops_version'] or 'perfops ?'} (git {ENV['perfops_git']}), {ENV['k6_version'] or 'k6 ?'}; "
         f"CPU: {ENV['cpu']}; kernel {ENV['kernel']}.")
L.append("")
L.append("| tool | completed | failed | auth / orders | orders per auth | req/s | CPU s (user+sys) | tool CPU | "
         "target CPU | **req per CPU s** | peak RSS MiB |")
L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for t in TOOLS:
    x = m[t]
    if not good[t]:
        L.append(f"| {t} | — | — | — | — | — | — | — | — | — | — |")
        continue
    L.append(f"| {t} | {n0(x['completed'])} | {n0(x['failed'])} | {n0(x['auth'])} / {n0(x['orders'])} | "
             f"{n0(x['ratio'])} | {n0(x['rps'])} | {n2(x['cpu_s'])} | {pct(x['tool_cpu'])} | {pct(x['target_cpu'])} | "
             f"**{n0(x['rpcs'])}**{rng(good[t], 'rpcs', n0)} | {x['rss_mib']:.1f} |")
L.append("")
if ratio is not None:
    verdict = "meets" if ratio >= GOAL else "does NOT meet"
    L.append(f"requests per CPU second: perfops {m['perfops']['rpcs']:,.0f}, k6 {m['k6']['rpcs']:,.0f}, "
             f"ratio {ratio:.1f} ({verdict} the goal of {GOAL:g}x)")
    if len(paired) > 1:
        L.append("")
        L.append(f"Per-round ratios: {', '.join(f'{p:.1f}' for p in paired)}.")
else:
    L.append("requests per CPU second: not available for both tools (see the notes)")
L.append("")
L.append("Runs:")
L.append("")
L.append("| run | rc | wall s | tool s | completed | failed | auth | orders | server-seen auth / orders / non-200 | "
         "user s | sys s | req per CPU s | tool CPU | target CPU | RSS MiB | other CPU s |")
L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for i in range(1, ROUNDS + 1):
    for t in TOOLS:
        r = next((r for r in runs[t] if r["name"] == f"{t}.{i}"), None)
        if r is None:
            continue
        s = r["srv"]
        srv = "—" if not s else f"all: {s['total']:,}" if "total" in s else f"{s['auth']:,} / {s['orders']:,} / {s['bad']:,}"
        L.append(f"| {r['name']} | {r['rc']} | {n2(r.get('elapsed'))} | {n2(r.get('duration_s'))} | "
                 f"{n0(r.get('completed'))} | {n0(r.get('failed'))} | {n0(r.get('auth'))} | {n0(r.get('orders'))} | "
                 f"{srv} | {n2(r.get('user'))} | {n2(r.get('sys'))} | {n0(r.get('rpcs'))} | {pct(r.get('tool_cpu'))} | "
                 f"{pct(r.get('target_cpu'))} | {n2(r.get('rss_mib'))} | "
                 f"{n2(r.get('other_cpu_s'))} |")
L.append("")
L.append("Definitions: *completed* = responses of the load phase (perfops: summary.json `total.completed`; k6: "
         "`http_reqs` minus the setup login); *failed* = perfops `total.failed`, k6 max(`http_req_failed` "
         "passes, failed checks); *auth / orders* = perfops `steps[]`, k6 `http_reqs{name:...}`; *req per CPU s* = "
         "completed / (user + sys) from /usr/bin/time, i.e. the whole process including start-up (k6 starts one JS "
         "runtime per VU); *tool s* = the tool's own test duration; *server-seen* = deltas of the demo server's "
         "`demo_requests_total` auth / orders / non-200 responses, or nginx's stub_status request count (all: "
         "includes the setup login; k6's `gracefulStop: 0s` cuts up to one in-flight "
         "request per VU that the server still answers); *other CPU s* = CPU used by other processes meanwhile "
         f"(runs above {NOISE_MAX_S} s are redone).")
if NOTES:
    L.append("")
    L.append("Notes:")
    L.append("")
    for n in NOTES:
        L.append(f"- {n}")
L.append("")
L.append(f"Raw outputs: `{os.path.relpath(RAW, os.path.dirname(os.path.dirname(RAW)))}`.")

write_report(REPORT, L)
sys.exit(3 if BAD else 0)
