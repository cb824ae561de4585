"""What the bench report scripts (vs_wrk_report.py, scenario_report.py) share.

Reading the raw-output folder that bench/lib/common.sh fills (env.json, and per run
NAME NAME.meta.json and NAME.time from `/usr/bin/time -f '%e %U %S %M'`), medians,
number formatting, and writing the report to its file and stdout.
"""
import json
import os
import statistics
import sys


def cli():
    """usage: REPORT_SCRIPT RAW_DIR REPORT_MD -> (raw_dir, report_md, env.json as a dict)"""
    raw, report = sys.argv[1], sys.argv[2]
    with open(os.path.join(raw, "env.json")) as fh:
        env = json.load(fh)
    return raw, report, env


def read(path):
    """The file's text, or None if it cannot be read."""
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return None


def last_line(text, n=1):
    """The last n non-blank lines of text, joined with ' | '."""
    lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
    return " | ".join(lines[-n:])


def load_meta(raw, name):
    """NAME.meta.json (written by measure_once in common.sh) as a dict; None if the run never ran."""
    text = read(os.path.join(raw, name + ".meta.json"))
    return None if text is None else json.loads(text)


def parse_time(path):
    """-> (elapsed, user, sys, maxrss_kb) or None. GNU time may prefix a
    'Command exited with non-zero status N' line."""
    for line in reversed((read(path) or "").splitlines()):
        parts = line.split()
        if len(parts) == 4:
            try:
                return tuple(float(x) for x in parts)
            except ValueError:
                pass
    return None


def time_stats(raw, name):
    """NAME.time -> {elapsed, user, sys, cpu_s (user + sys), rss_mib (peak), tool_cpu
    (cpu_s / elapsed)}, or None if /usr/bin/time wrote nothing usable."""
    t = parse_time(os.path.join(raw, name + ".time"))
    if not t:
        return None
    elapsed, user, sys_s, kb = t
    cpu_s = user + sys_s
    return {"elapsed": elapsed, "user": user, "sys": sys_s, "cpu_s": cpu_s, "rss_mib": kb / 1024.0,
            "tool_cpu": cpu_s / elapsed if elapsed > 0 else None}


def core_share(ticks, clk_tck, wall_s):
    """CPU ticks used during a run of wall_s seconds -> share of one core (1.0 = 100 %)."""
    return ticks / clk_tck / (wall_s or 1e-9)


def med(vals):
    """Median of the values that are not None; None if there are none."""
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def fmt(v, spec="{:,.0f}"):
    return "—" if v is None else spec.format(v)


def n0(v):
    return fmt(v)


def n2(v):
    return fmt(v, "{:.2f}")


def pct(v):
    return "—" if v is None else "{:.0f} %".format(100 * v)


def write_report(path, lines):
    """Writes the lines to path and to stdout."""
    text = "\n".join(lines) + "\n"
    with open(path, "w") as fh:
        fh.write(text)
    sys.stdout.write(text)
