"""Where an open-model run's latency from the intended start goes, read off a loopback capture
(bench/open-wire.sh KEEP_PCAP=1): for a run at a constant RATE, each arrival's lateness (when
it left against when it was due) and, for an arrival that opened a connection, its connect.

An arrival leaves at its SYN when it opened a connection, else at its request's first byte.
Sorted, the k-th departure is arrival k (one worker sends in order), due at
start + k / RATE, with `start` the departures' 1st percentile of (departure - k / RATE): the
pacer sends nothing more than its gathering window early. Then, per arrival:
  late     = departure - due                  (the pacer's, and the machine's, lateness)
  connect  = request's first byte - SYN       (0 on a kept connection)
  ahead    = late + connect                   (what latency from the intended start adds
                                               to the wire's exchange)
Prints JSON: counts, and p50/p99/p99.9 in ms of `late` for all, of `connect` for the arrivals
that connected, and of `ahead` for all and for the kept connections alone; the share of the
arrivals above the p99 of `ahead` that opened a connection; and the episodes of lateness: the
arrivals late by more than the budget (0.5 ms) grouped where less than 2 ms apart, how many
episodes, the longest lateness, and the share of those arrivals in an episode that opened 10
connections or more (a connection storm: the server stalled, the kept connections were all busy,
and each connect costs the generator its kernel's work, ~45 us on the 2-core VM).

Usage: wire_lateness.py FILE.pcap SERVER_PORT RATE"""
import json
import struct
import sys


def packets(path):
    """(time s, src port, dst port, flags, payload bytes) of each IPv4 TCP segment."""
    data = open(path, "rb").read()
    magic = struct.unpack("<I", data[:4])[0]
    scale = {0xA1B23C4D: 1e-9, 0xA1B2C3D4: 1e-6}.get(magic)
    if scale is None:
        sys.exit("not a little-endian pcap")
    linktype = struct.unpack("<I", data[20:24])[0]
    skip = {1: 14, 113: 16, 0: 4, 12: 0, 101: 0}.get(linktype)
    if skip is None:
        sys.exit(f"link type {linktype} not read")
    off = 24
    while off + 16 <= len(data):
        ts_s, ts_f, incl, _ = struct.unpack("<IIII", data[off:off + 16])
        pkt = data[off + 16:off + 16 + incl]
        off += 16 + incl
        if linktype == 1 and pkt[12:14] != b"\x08\x00":
            continue
        ip = pkt[skip:]
        if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
            continue
        ihl = (ip[0] & 15) * 4
        total = struct.unpack("!H", ip[2:4])[0]
        tcp = ip[ihl:]
        if len(tcp) < 20:
            continue
        src, dst = struct.unpack("!HH", tcp[:4])
        yield ts_s + ts_f * scale, src, dst, tcp[13], total - ihl - (tcp[12] >> 4) * 4


# The wire-accuracy budget at p99 (bench/open-wire.sh): lateness past it makes an episode.
BUDGET_S = 0.0005


def quantiles(xs):
    xs = sorted(xs)
    if not xs:
        return None
    q = lambda p: round(xs[min(len(xs) - 1, int(p * len(xs)))] * 1000, 3)
    return {"n": len(xs), "p50_ms": q(0.50), "p99_ms": q(0.99), "p999_ms": q(0.999)}


def main():
    path, port, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    syn = {}          # client port -> SYN time, until its first request
    answered = {}     # client port -> whether a response came since the last request began
    departures = []   # (departure, connect)
    for t, src, dst, flags, payload in packets(path):
        if dst == port and flags & 0x02 and not flags & 0x10:  # SYN, not SYN-ACK
            syn[src] = t
            answered[src] = True
        elif dst == port and payload > 0 and answered.get(src, True):
            answered[src] = False
            opened = syn.pop(src, None)
            departures.append((opened, t - opened) if opened is not None else (t, 0.0))
        elif src == port and payload > 0:
            answered[dst] = True
    departures.sort()
    if not departures:
        sys.exit("no requests in the capture")
    offsets = sorted(d - k / rate for k, (d, _) in enumerate(departures))
    start = offsets[len(offsets) // 100]
    late = [d - (start + k / rate) for k, (d, _) in enumerate(departures)]
    ahead = [lt + c for lt, (_, c) in zip(late, departures)]
    kept = [a for a, (_, c) in zip(ahead, departures) if c == 0.0]
    cut = sorted(ahead)[min(len(ahead) - 1, int(0.99 * len(ahead)))]
    tail = [c > 0 for a, (_, c) in zip(ahead, departures) if a > cut]
    episodes = []  # [(departure, late, connect)], late past the budget, less than 2 ms apart
    for (d, c), lt in zip(departures, late):
        if lt <= BUDGET_S:
            continue
        if episodes and d - episodes[-1][-1][0] < 0.002:
            episodes[-1].append((d, lt, c))
        else:
            episodes.append([(d, lt, c)])
    over = sum(len(e) for e in episodes)
    storms = sum(len(e) for e in episodes if sum(1 for _, _, c in e if c > 0) >= 10)
    print(json.dumps({
        "arrivals": len(departures),
        "connected": sum(1 for _, c in departures if c > 0),
        "late": quantiles(late),
        "connect": quantiles([c for _, c in departures if c > 0]),
        "ahead": quantiles(ahead),
        "ahead_kept": quantiles(kept),
        "tail_connected_share": round(sum(tail) / len(tail), 3) if tail else None,
        "late_over_budget": over,
        "episodes": len(episodes),
        "episode_late_max_ms": round(max((lt for e in episodes for _, lt, _ in e), default=0) * 1000, 3),
        "over_budget_in_storms_share": round(storms / over, 3) if over else None,
    }))


main()
