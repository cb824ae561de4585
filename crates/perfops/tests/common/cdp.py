"""Drive a headless Chromium in real time over the DevTools protocol, on
`--remote-debugging-pipe` (fds 3 and 4, NUL-delimited JSON: no port, no
websocket library). For pages that change while they are open (the live
page's Server-Sent Events), where `--dump-dom` under a virtual-time budget
does not fit.

    cdp.py CHROMIUM PROFILE_DIR STEPS_JSON

STEPS_JSON is a list of steps, run in order on one tab:
    ["open", URL]                  a new tab on URL
    ["wait", SECONDS]
    ["until", EXPR, SECONDS]       poll EXPR until truthy (else fail)
    ["eval", EXPR]                 print {"eval": value} as a line
    ["shot", PATH, WIDTH, HEIGHT]  a PNG of the page at that size
Every wait is bounded; any failure prints {"error": ...} and exits 1.
"""

import base64, json, os, signal, subprocess, sys, time

# Killed (a bench's cleanup): still close the browser, in `finally` below.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))

chromium, profile, steps = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
r_cmd, w_cmd = os.pipe()   # we write commands, chromium reads fd 3
r_out, w_out = os.pipe()   # chromium writes fd 4, we read
proc = subprocess.Popen(
    [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
     "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
     "--remote-debugging-pipe", "--user-data-dir=" + profile, "about:blank"],
    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    pass_fds=(3, 4),
    # Through fds past 3 and 4 first: one of ours may be 3 or 4 already.
    preexec_fn=lambda: (os.dup2(r_cmd, 100), os.dup2(w_out, 101), os.dup2(100, 3), os.dup2(101, 4)),
)
os.close(r_cmd)
os.close(w_out)
buf = b""
ids = [0]
session = [None]


def send(method, params=None, timeout=20.0):
    ids[0] += 1
    msg = {"id": ids[0], "method": method, "params": params or {}}
    if session[0] and not method.startswith("Target."):
        msg["sessionId"] = session[0]
    os.write(w_cmd, json.dumps(msg).encode() + b"\0")
    global buf
    deadline = time.time() + timeout
    while True:
        while b"\0" in buf:
            raw, buf = buf.split(b"\0", 1)
            m = json.loads(raw)
            if m.get("id") == ids[0]:
                if "error" in m:
                    raise RuntimeError(method + ": " + json.dumps(m["error"]))
                return m.get("result", {})
        if time.time() > deadline:
            raise RuntimeError(method + ": no answer in %ss" % timeout)
        import select
        r, _, _ = select.select([r_out], [], [], 0.5)
        if r:
            chunk = os.read(r_out, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed its pipe")
            buf += chunk


def evaluate(expr):
    r = send("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True})
    if "exceptionDetails" in r:
        raise RuntimeError("eval %s: %s" % (expr, json.dumps(r["exceptionDetails"])[:300]))
    return r.get("result", {}).get("value")


code = 0
try:
    for step in steps:
        kind = step[0]
        if kind == "open":
            target = send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session[0] = send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            send("Emulation.setDeviceMetricsOverride", {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False})
            send("Page.enable")
            send("Page.navigate", {"url": step[1]})
        elif kind == "wait":
            time.sleep(float(step[1]))
        elif kind == "until":
            deadline = time.time() + float(step[2])
            while not evaluate(step[1]):
                if time.time() > deadline:
                    raise RuntimeError("still not %s after %ss: body %s" % (
                        step[1], step[2], evaluate("JSON.stringify(Array.from(document.body ? document.body.attributes : []).map(a => a.name + '=' + a.value.slice(0, 200)))")))
                time.sleep(0.2)
        elif kind == "eval":
            print(json.dumps({"eval": evaluate(step[1])}), flush=True)
        elif kind == "shot":
            w, h = int(step[2]), int(step[3])
            send("Emulation.setDeviceMetricsOverride", {"width": w, "height": h, "deviceScaleFactor": 1, "mobile": False})
            time.sleep(0.5)
            png = send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": False})["data"]
            with open(step[1], "wb") as f:
                f.write(base64.b64decode(png))
        else:
            raise RuntimeError("unknown step " + kind)
except Exception as e:  # said as a line the test reads
    print(json.dumps({"error": str(e)}), flush=True)
    code = 1
finally:
    try:
        send("Browser.close", timeout=5)
    except Exception:
        pass
    try:
        proc.wait(timeout=10)
    except Exception:
        proc.kill()
        proc.wait()
sys.exit(code)
