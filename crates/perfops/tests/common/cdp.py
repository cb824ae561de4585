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
Imported, its `Browser` is har_record.py's too.
"""

import base64, json, os, select, signal, subprocess, sys, time


class Browser:
    """A headless Chromium on a DevTools pipe, one tab at a time. `events`: every event it
    sent, in order, when made with `keep_events` (har_record.py's Network log), else none."""

    def __init__(self, chromium, profile, keep_events=False):
        self.r_cmd, self.w_cmd = os.pipe()   # we write commands, chromium reads fd 3
        self.r_out, self.w_out = os.pipe()   # chromium writes fd 4, we read
        r_cmd, w_out = self.r_cmd, self.w_out
        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
             "--remote-debugging-pipe", "--user-data-dir=" + profile, "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            # Through fds past 3 and 4 first: one of ours may be 3 or 4 already.
            preexec_fn=lambda: (os.dup2(r_cmd, 100), os.dup2(w_out, 101), os.dup2(100, 3), os.dup2(101, 4)),
        )
        os.close(self.r_cmd)
        os.close(self.w_out)
        self.buf = b""
        self.last_id = 0
        self.session = None
        self.keep_events = keep_events
        self.events = []

    def send(self, method, params=None, timeout=20.0):
        self.last_id += 1
        msg = {"id": self.last_id, "method": method, "params": params or {}}
        if self.session and not method.startswith("Target."):
            msg["sessionId"] = self.session
        os.write(self.w_cmd, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            while b"\0" in self.buf:
                raw, self.buf = self.buf.split(b"\0", 1)
                m = json.loads(raw)
                if "method" in m:
                    if self.keep_events:
                        self.events.append(m)
                elif m.get("id") == self.last_id:
                    if "error" in m:
                        raise RuntimeError(method + ": " + json.dumps(m["error"]))
                    return m.get("result", {})
            if time.time() > deadline:
                raise RuntimeError(method + ": no answer in %ss" % timeout)
            r, _, _ = select.select([self.r_out], [], [], max(0.0, min(0.5, deadline - time.time())))
            if r:
                chunk = os.read(self.r_out, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed its pipe")
                self.buf += chunk

    def evaluate(self, expr):
        r = self.send("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            raise RuntimeError("eval %s: %s" % (expr, json.dumps(r["exceptionDetails"])[:300]))
        return r.get("result", {}).get("value")

    def open(self, url, network=False):
        """A new tab on `url`, 1280 x 900; with `network`, the Network domain enabled first."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Emulation.setDeviceMetricsOverride", {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False})
        if network:
            self.send("Network.enable")
        self.send("Page.enable")
        self.send("Page.navigate", {"url": url})

    def until(self, expr, seconds, poll=0.2):
        deadline = time.time() + float(seconds)
        while not self.evaluate(expr):
            if time.time() > deadline:
                raise RuntimeError("still not %s after %ss: body %s" % (
                    expr, seconds, self.evaluate("JSON.stringify(Array.from(document.body ? document.body.attributes : []).map(a => a.name + '=' + a.value.slice(0, 200)))")))
            time.sleep(poll)

    def shot(self, path, width, height):
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        time.sleep(0.5)
        png = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": False})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(png))

    def close(self):
        try:
            self.send("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
            self.proc.wait()


def main():
    # Killed (a bench's cleanup): still close the browser, in `finally` below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    chromium, profile, steps = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    browser = Browser(chromium, profile)
    code = 0
    try:
        for step in steps:
            kind = step[0]
            if kind == "open":
                browser.open(step[1])
            elif kind == "wait":
                time.sleep(float(step[1]))
            elif kind == "until":
                browser.until(step[1], step[2])
            elif kind == "eval":
                print(json.dumps({"eval": browser.evaluate(step[1])}), flush=True)
            elif kind == "shot":
                browser.shot(step[1], int(step[2]), int(step[3]))
            else:
                raise RuntimeError("unknown step " + kind)
    except Exception as e:  # said as a line the test reads
        print(json.dumps({"error": str(e)}), flush=True)
        code = 1
    finally:
        browser.close()
    sys.exit(code)


if __name__ == "__main__":
    main()
