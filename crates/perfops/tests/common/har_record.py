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

import datetime, json, os, signal, sys, time
from urllib.parse import urlsplit, parse_qsl

sys.dont_write_bytecode = True  # no __pycache__ beside the tests
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cdp import Browser  # noqa: E402

signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))

chromium, profile, out_path, steps = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
browser = Browser(chromium, profile, keep_events=True)
send = browser.send


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
    for e in browser.events:
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
            browser.open(step[1], network=True)
        elif kind == "wait":
            # Polled, so that the events keep being read meanwhile.
            end = time.time() + float(step[1])
            while time.time() < end:
                send("Runtime.evaluate", {"expression": "1"})
                time.sleep(0.05)
        elif kind == "until":
            browser.until(step[1], step[2], poll=0.1)
        elif kind == "eval":
            print(json.dumps({"eval": browser.evaluate(step[1])}), flush=True)
        else:
            raise RuntimeError("unknown step " + kind)
    title[0] = browser.evaluate("document.title") or ""
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
    browser.close()
sys.exit(code)
