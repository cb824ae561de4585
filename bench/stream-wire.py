"""Inter-event gaps of streamed answers as the loopback interface saw them, against perfops'.

From a pcap (tcpdump -i lo, nanosecond timestamps, a snap length that keeps the first bytes of each
segment's payload): per connection, the server->client segments whose payload holds an SSE `data:`
line are its events (the testkit's aiohttp-sse server writes one event per segment); each gap is the
time from one such segment to the next on the same connection. perfops' figures are the step's
`event_gap_ms` in summary.json. Prints JSON: both distributions' p50/p90/p99 in ms and perfops'
minus the wire's.
Usage: stream-wire.py FILE.pcap SERVER_PORT SUMMARY.json"""
import json, struct, sys

path, sport, summary = sys.argv[1], int(sys.argv[2]), sys.argv[3]
data = open(path, "rb").read()
magic = struct.unpack("<I", data[:4])[0]
if magic == 0xA1B23C4D:
    scale = 1e-9
elif magic == 0xA1B2C3D4:
    scale = 1e-6
else:
    sys.exit("not a little-endian pcap")
linktype = struct.unpack("<I", data[20:24])[0]
off, last, gaps, events = 24, {}, [], 0
while off + 16 <= len(data):
    ts_s, ts_f, incl, _ = struct.unpack("<IIII", data[off:off + 16])
    pkt = data[off + 16:off + 16 + incl]
    off += 16 + incl
    t = ts_s + ts_f * scale
    ip = pkt[14:] if linktype == 1 else pkt[16:] if linktype == 113 else pkt
    if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
        continue
    ihl = (ip[0] & 15) * 4
    tcp = ip[ihl:]
    if len(tcp) < 20:
        continue
    src, dst = struct.unpack("!HH", tcp[:4])
    payload = tcp[(tcp[12] >> 4) * 4:]
    if src != sport:
        continue
    # A new answer on a kept connection starts with its head: no gap from the previous stream.
    if payload.startswith(b"HTTP/"):
        last.pop(dst, None)
    if b"data:" not in payload:
        continue
    events += 1
    if dst in last:
        gaps.append((t - last[dst]) * 1000.0)
    last[dst] = t

def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else None

step = json.load(open(summary))["steps"][0]
mine = step.get("event_gap_ms", {})
out = {"wire_events": events, "wire_gaps": len(gaps), "perfops_gaps": mine.get("count")}
for name, p in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
    w = q(gaps, p)
    out[f"wire_{name}_ms"] = round(w, 3)
    out[f"perfops_{name}_ms"] = mine.get(name)
    out[f"diff_{name}_ms"] = round(mine.get(name, 0) - w, 3)
print(json.dumps(out))
