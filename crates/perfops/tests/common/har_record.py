"""Record a HAR 1.2 file from a real headless Chromium while it uses a page:
the DevTools protocol's `Network` domain on `--remote-debugging-pipe` (as
cdp.py drives it), its events assembled into HAR entries the way DevTools'
own "Save all as HAR" does (requestWillBeSent, the ExtraInfo events with the
header fields as sent and received, cookies included, responseReceived,
loadingFinished, then each body from Network.getResponseBody).

    har_record.py CHROMIUM PROFILE_DIR OUT.har STEPS_JSON

STEPS_JSON is a list of steps, run in order on one tab:
    ["open", URL]                  a new tab on URL (Network enabled first)
    ["wait", SECONDS]
    ["until", EXPR, SECONDS]       poll EXPR until truthy (else fail)
    ["eval", EXPR]                 evaluate EXPR (its value printed as {"eval": v})
Then OUT.har is written. Every wait is bounded; any failure prints
{"error": ...} and exits 1.
"""

import base64, datetime, json, os, select, signal, subprocess, sys, time
from urllib.parse import urlsplit, parse_qsl

signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))

chromium, profile, out_path, steps = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
r_cmd, w_cmd = os.pipe()
r_out, w_out = os.pipe()
proc = subprocess.Popen(
    [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
     "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
     "--remote-debugging-pipe", "--user-data-dir=" + profile, "about:blank"],
    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    pass_fds=(3, 4),
    preexec_fn=lambda: (os.dup2(r_cmd, 100), os.dup2(w_out, 101), os.dup2(100, 3), os.dup2(101, 4)),
)
os.close(r_cmd)
os.close(w_out)
buf = b""
ids = [0]
session = [None]
events = []   # every event, in the order Chromium sent them


def pump(deadline):
    global buf
    r, _, _ = select.select([r_out], [], [], max(0.0, min(0.5, deadline - time.time())))
    if r:
        chunk = os.read(r_out, 1 << 20)
        if not chunk:
            raise RuntimeError("chromium closed its pipe")
        buf += chunk


def send(method, params=None, timeout=20.0):
    global buf
    ids[0] += 1
    msg = {"id": ids[0], "method": method, "params": params or {}}
    if session[0] and not method.startswith("Target."):
        msg["sessionId"] = session[0]
    os.write(w_cmd, json.dumps(msg).encode() + b"\0")
    deadline = time.time() + timeout
    while True:
        while b"\0" in buf:
            raw, buf = buf.split(b"\0", 1)
            m = json.loads(raw)
            if "method" in m:
                events.append(m)
            elif m.get("id") == ids[0]:
                if "error" in m:
                    raise RuntimeError(method + ": " + json.dumps(m["error"]))
                return m.get("result", {})
        if time.time() > deadline:
            raise RuntimeError(method + ": no answer in %ss" % timeout)
        pump(deadline)


def evaluate(expr):
    r = send("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True})
    if "exceptionDetails" in r:
        raise RuntimeError("eval %s: %s" % (expr, json.dumps(r["exceptionDetails"])[:300]))
    return r.get("result", {}).get("value")


def har_headers(h):
    out = []
    for k, v in (h or {}).items():
        # ExtraInfo joins repeated fields (Set-Cookie) with newlines.
        for one in str(v).split("\n"):
            out.append({"name": k, "value": one})
    return out


def iso(wall):
    return datetime.datetime.fromtimestamp(wall, datetime.timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def build_har():
    reqs = {}
    order = []
    for e in events:
        p = e.get("params", {})
        rid = p.get("requestId")
        m = e["method"]
        if m == "Network.requestWillBeSent":
            # A redirect reuses the id: the earlier hop is finished by this event.
            if rid in reqs and "sent" in reqs[rid]:
                rid_old = rid + "#%d" % len(order)
                reqs[rid_old] = reqs.pop(rid)
                order[order.index(rid)] = rid_old
                if p.get("redirectResponse"):
                    reqs[rid_old]["response"] = p["redirectResponse"]
                    reqs[rid_old]["end"] = p["timestamp"]
            # ExtraInfo may come before requestWillBeSent: keep what it said.
            early = reqs.get(rid, {}) if rid in reqs and "sent" not in reqs[rid] else {}
            reqs[rid] = dict(early, sent=p, start=p["timestamp"], wall=p["wallTime"])
            order.append(rid)
        elif rid in reqs:
            r = reqs[rid]
            if m == "Network.requestWillBeSentExtraInfo":
                r["req_headers"] = p.get("headers")
            elif m == "Network.responseReceivedExtraInfo":
                r["resp_headers"] = p.get("headers")
            elif m == "Network.responseReceived":
                r["response"] = p["response"]
            elif m == "Network.loadingFinished":
                r["end"] = p["timestamp"]
                r["finished"] = True
            elif m == "Network.loadingFailed":
                r["failed"] = p.get("errorText", "failed")
                r["end"] = p["timestamp"]
        elif m in ("Network.requestWillBeSentExtraInfo", "Network.responseReceivedExtraInfo"):
            # ExtraInfo may come before requestWillBeSent.
            reqs.setdefault(rid, {}).update({"req_headers" if "Sent" in m else "resp_headers": p.get("headers")})
    entries = []
    for rid in order:
        r = reqs[rid]
        sent = r["sent"]
        request = sent["request"]
        response = r.get("response") or {}
        body_text, encoding = None, None
        if r.get("finished") and "#" not in rid:
            try:
                b = send("Network.getResponseBody", {"requestId": rid})
                body_text, encoding = b.get("body"), ("base64" if b.get("base64Encoded") else None)
            except RuntimeError:
                pass
        post = None
        if request.get("hasPostData"):
            text = request.get("postData")
            if text is None:
                try:
                    text = send("Network.getRequestPostData", {"requestId": rid}).get("postData")
                except RuntimeError:
                    text = None
            req_h = r.get("req_headers") or request.get("headers") or {}
            ctype = next((v for k, v in req_h.items() if k.lower() == "content-type"), "")
            post = {"mimeType": ctype, "text": text or ""}
        url = request["url"] + request.get("urlFragment", "")
        content = {"size": len(body_text or ""), "mimeType": response.get("mimeType", "")}
        if body_text is not None:
            content["text"] = body_text
            if encoding:
                content["encoding"] = encoding
        entry = {
            "startedDateTime": iso(r["wall"]),
            "time": max(0.0, (r.get("end", r["start"]) - r["start"]) * 1000.0),
            "request": {
                "method": request["method"],
                "url": url,
                "httpVersion": response.get("protocol", "http/1.1").upper(),
                "headers": har_headers(r.get("req_headers") or request.get("headers")),
                "queryString": [{"name": k, "value": v} for k, v in parse_qsl(urlsplit(url).query, keep_blank_values=True)],
                "cookies": [],
                "headersSize": -1,
                "bodySize": len((post or {}).get("text", "")),
            },
            "response": {
                "status": response.get("status", 0),
                "statusText": response.get("statusText", ""),
                "httpVersion": response.get("protocol", "http/1.1").upper(),
                "headers": har_headers(r.get("resp_headers") or response.get("headers")),
                "cookies": [],
                "content": content,
                "redirectURL": "",
                "headersSize": -1,
                "bodySize": -1,
            },
            "cache": {},
            "timings": {"send": 0, "wait": max(0.0, (r.get("end", r["start"]) - r["start"]) * 1000.0), "receive": 0},
            "_resourceType": sent.get("type", ""),
            "pageref": "page_1",
        }
        if post is not None:
            entry["request"]["postData"] = post
        entries.append(entry)
    first = min((reqs[rid]["wall"] for rid in order), default=time.time())
    return {"log": {"version": "1.2", "creator": {"name": "perfops-test-har_record.py", "version": "1"},
                    "browser": {"name": "Chromium", "version": version[0]},
                    "pages": [{"startedDateTime": iso(first), "id": "page_1", "title": title[0], "pageTimings": {}}],
                    "entries": entries}}


version = [""]
title = [""]
code = 0
try:
    version[0] = send("Browser.getVersion").get("product", "")
    for step in steps:
        kind = step[0]
        if kind == "open":
            target = send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session[0] = send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            send("Network.enable")
            send("Page.enable")
            send("Page.navigate", {"url": step[1]})
        elif kind == "wait":
            end = time.time() + float(step[1])
            while time.time() < end:
                send("Runtime.evaluate", {"expression": "1"})
                time.sleep(0.05)
        elif kind == "until":
            deadline = time.time() + float(step[2])
            while not evaluate(step[1]):
                if time.time() > deadline:
                    raise RuntimeError("still not %s after %ss" % (step[1], step[2]))
                time.sleep(0.1)
        elif kind == "eval":
            print(json.dumps({"eval": evaluate(step[1])}), flush=True)
        else:
            raise RuntimeError("unknown step " + kind)
    title[0] = evaluate("document.title") or ""
    # Let the last events (loadingFinished) arrive.
    time.sleep(0.3)
    send("Runtime.evaluate", {"expression": "1"})
    har = build_har()
    with open(out_path, "w") as f:
        json.dump(har, f, indent=1)
    print(json.dumps({"entries": len(har["log"]["entries"])}), flush=True)
except Exception as e:
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
