"""Report of bench/open-model.sh: the open model, perfops against oha and vegeta.

usage: open_model_report.py RAW_DIR REPORT_MD

Reads, per run NAME = r<rate>.<tool>.<round>: NAME.time (/usr/bin/time), NAME.json (the
tool's own summary), NAME.server.json (the server's record of the same run: the delay
server's handler time per request and the arrivals it saw; nginx's request count, with no
handler time, so that the tool's own p50 / p99 are shown) and NAME.meta.json. Prints, per rate
and tool, the medians over the rounds and each round's figures: CPU s per 100k answered
requests, peak RSS, the rate the server saw, and the tool's p50 / p99 minus the server's.
Exit status 3 when a run failed or is missing, else 0.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import cli, fmt, last_line, load_meta, med, read, time_stats  # noqa: E402


# perfops' own runs: its default (timerfd) pacer (perfops), the kernel pacer (uring), a build
# before a change (base), the closed loop at about the same rate (closed), and the timerfd pacer
# gathering arrivals within N µs (gatherN).
PERFOPS = ("perfops", "base", "uring", "closed")


def is_perfops(tool):
    return tool in PERFOPS or tool.startswith("gather")


def tool_figures(tool, text):
    """The tool's own summary -> {count, errors, p50_ms, p99_ms} (count: answered requests)."""
    j = json.loads(text)
    if is_perfops(tool):
        t = j if "latency_ms" in j else j["total"]
        lat = t["latency_ms"]
        svc = t.get("service_ms") or {}
        return {"count": t["completed"], "errors": t.get("failed", 0), "p50_ms": lat["p50"], "p99_ms": lat["p99"],
                "svc_p50_ms": svc.get("p50"), "svc_p99_ms": svc.get("p99"), "dropped": t.get("dropped", 0),
                "pacer": (j.get("generator") or {}).get("pacer")}
    if tool == "oha":
        codes = j.get("statusCodeDistribution", {})
        errd = dict(j.get("errorDistribution", {}))
        errd.pop("aborted due to deadline", 0)  # in flight when -z expired: not a failure
        lp = j.get("latencyPercentiles", {})
        return {"count": sum(codes.values()), "errors": sum(v for k, v in codes.items() if not k.startswith("2"))
                + sum(errd.values()), "p50_ms": lp["p50"] * 1e3, "p99_ms": lp["p99"] * 1e3}
    if tool == "vegeta":
        lat = j["latencies"]
        codes = j.get("status_codes", {})
        return {"count": codes.get("200", 0), "errors": j["requests"] - codes.get("200", 0),
                "p50_ms": lat["50th"] / 1e6, "p99_ms": lat["99th"] / 1e6}
    if tool == "k6":
        m = j["metrics"]
        d = m["http_req_duration"]["values"]
        n = int(m["http_reqs"]["values"]["count"])
        return {"count": n, "errors": int(round(m["http_req_failed"]["values"]["rate"] * n)),
                "p50_ms": d["med"], "p99_ms": d["p(99)"]}
    raise ValueError("unknown tool " + tool)


def run(raw, name, tool, rate):
    meta = load_meta(raw, name)
    if meta is None:
        return None
    r = {"name": name, "rc": meta["rc"], "ok": True, "err": None}
    t = time_stats(raw, name)
    if t:
        r.update(t)
    else:
        r["ok"], r["err"] = False, "no /usr/bin/time output"
    try:
        # oha prints its JSON on stdout; the others write NAME.json
        text = read(os.path.join(raw, name + (".out" if tool == "oha" else ".json"))) or ""
        r.update(tool_figures(tool, text[text.find("{"):] if tool == "oha" else text))
        srv = json.loads(read(os.path.join(raw, name + ".server.json")) or "")
        r["srv_rate"] = srv.get("arrival_rate")
        r["srv_p50"], r["srv_p99"] = srv["p50_ms"], srv["p99_ms"]
        # nginx keeps no handler time (it answers in µs): its "server's" is taken as 0
        s50, s99 = r["srv_p50"] or 0.0, r["srv_p99"] or 0.0
        r["d50"], r["d99"] = r["p50_ms"] - s50, r["p99_ms"] - s99
        if r.get("svc_p50_ms") is not None:
            r["s50"], r["s99"] = r["svc_p50_ms"] - s50, r["svc_p99_ms"] - s99
    except (OSError, ValueError, KeyError, TypeError) as e:
        r["ok"], r["err"] = False, f"cannot read the {tool} or server summary: {type(e).__name__} {e}"
    # perfops exits 1 when a verdict is not met (none here) or inconclusive; the figures
    # judge the run: a run that answered what it sent is a run.
    if r["rc"] != 0 and not (is_perfops(tool) and r["rc"] == 1 and r.get("count")):
        r["ok"] = False
        r["err"] = (r["err"] + "; " if r["err"] else "") + f"exit status {r['rc']}: " + \
            last_line(read(os.path.join(raw, name + ".err")), 2)
    if r.get("count") and r.get("cpu_s") is not None:
        r["cpu100k"] = r["cpu_s"] / r["count"] * 1e5
    if r.get("srv_rate"):
        r["rate_err"] = r["srv_rate"] / rate - 1
    return r


def main():
    raw, report, env = cli()
    rates = [int(x) for x in env["rates"].split()]
    tools = env["tools"].split()
    nginx = env.get("target") == "nginx"
    server = (f"nginx (1 worker, answers at once; p50/p99 are the tools' own)" if nginx else "delay server (10 ms)")
    L = [f"# open-model {env['stamp']}", "",
         f"perfops {env.get('perfops_git')} ({env.get('perfops_version')})"
         + (f", base = {env['base_bin']}" if env.get("base_bin") else "") + f", {env.get('oha_version')}, "
         f"vegeta {env.get('vegeta_version')}; {env['rounds']} rounds of {env['duration']} s, tools alternating; "
         f"{server} on CPU {env['target_cpu']}, tool on CPU {env['tool_cpu']}; {env.get('cpu')}, "
         f"kernel {env.get('kernel')}.", "",
         "Medians over the rounds (each round's in the next table). p50/p99 are the tool's minus the server's "
         "own handler time in the same run.", "",
         "| rate | tool | CPU s / 100k | peak RSS MiB | server-seen rate | p50 - server's ms | p99 - server's ms | "
         "service p50 / p99 - server's ms | errors |",
         "|---:|---|---:|---:|---:|---:|---:|---|---:|"]
    bad = []
    rows = {}
    for rate in rates:
        for tool in tools:
            rs = []
            i = 1
            while True:
                name = f"r{rate}.{tool}.{i}"
                if load_meta(raw, name) is None and i > 1:
                    break
                r = run(raw, name, tool, rate)
                if r is None:
                    bad.append(f"{name}: missing")
                    break
                if not r["ok"]:
                    bad.append(f"{name}: {r['err']}")
                rs.append(r)
                i += 1
            rows[(rate, tool)] = rs
            ok = [r for r in rs if r["ok"]]
            svc = "—"
            if any(r.get("s50") is not None for r in ok):
                svc = f"{fmt(med([r.get('s50') for r in ok]), '{:+.3f}')} / {fmt(med([r.get('s99') for r in ok]), '{:+.3f}')}"
            pacer = next((r["pacer"] for r in ok if r.get("pacer")), None)
            L.append(f"| {rate:,} | {tool}{f' ({pacer})' if pacer else ''} | {fmt(med([r.get('cpu100k') for r in ok]), '{:.2f}')} | "
                     f"{fmt(med([r.get('rss_mib') for r in ok]), '{:.1f}')} | "
                     f"{fmt(med([r.get('srv_rate') for r in ok]), '{:,.1f}')} | "
                     f"{fmt(med([r.get('d50') for r in ok]), '{:+.3f}')} | {fmt(med([r.get('d99') for r in ok]), '{:+.3f}')} | "
                     f"{svc} | {sum(r.get('errors', 0) for r in ok)} |")
    # The goals: the open model within 1.5x the closed loop's CPU per request, and at 0.5x oha's.
    L += ["", "The open model's CPU per request against the closed loop's and oha's (medians):", "",
          "| rate | pacer | / closed loop | / oha | uring / perfops |", "|---:|---|---:|---:|---:|"]
    for rate in rates:
        c = {t: med([r.get("cpu100k") for r in rows.get((rate, t), []) if r["ok"]]) for t in tools}
        ratio = lambda a, b: fmt(c[a] / c[b], "{:.2f}x") if c.get(a) and c.get(b) else "—"
        for t in ["perfops", "uring"] + [t for t in tools if t.startswith("gather")]:
            if t in tools:
                L.append(f"| {rate:,} | {t} | {ratio(t, 'closed')} | {ratio(t, 'oha')} | {ratio('uring', 'perfops')} |")
    L += ["", "Each round:", "",
          "| run | CPU s / 100k | tool CPU | peak RSS MiB | answered | server-seen rate | server p50 / p99 ms | "
          "p50 / p99 - server's ms | server CPU |",
          "|---|---:|---:|---:|---:|---:|---|---|---:|"]
    for (rate, tool), rs in rows.items():
        for r in rs:
            meta = load_meta(raw, r["name"]) or {}
            server_cpu = meta.get("server_ticks", 0) / env.get("clk_tck", 100) / (meta.get("wall_s") or 1)
            L.append(f"| {r['name']} | {fmt(r.get('cpu100k'), '{:.2f}')} | {fmt(r.get('tool_cpu'), '{:.0%}')} | "
                     f"{fmt(r.get('rss_mib'), '{:.1f}')} | {fmt(r.get('count'))} | {fmt(r.get('srv_rate'), '{:,.1f}')} | "
                     f"{fmt(r.get('srv_p50'), '{:.3f}')} / {fmt(r.get('srv_p99'), '{:.3f}')} | "
                     f"{fmt(r.get('d50'), '{:+.3f}')} / {fmt(r.get('d99'), '{:+.3f}')} | "
                     f"{fmt(server_cpu, '{:.0%}')} |")
    if bad:
        L += ["", "Runs that failed:", ""] + [f"- {b}" for b in bad]
    text = "\n".join(L) + "\n"
    with open(report, "w") as f:
        f.write(text)
    sys.stdout.write(text)
    sys.exit(3 if bad else 0)


main()
