#!/usr/bin/env python3
"""Round times of benchmarks/run_store.sh: reads the clients' lines (rank round start_ns end_ns add_result)
of one run, checks them, and prints one JSON object: impl, clients, round_s (per round: the last client's
end minus the first client's start), median_s.

  summarize.py --impl idist --world 1024 --server-rss-kib 5000 --server-hwm-kib 9000 lines...
"""
import argparse
import json
import statistics
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--impl", required=True)
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--layout", default="")
    p.add_argument("--server-rss-kib", type=int, default=0, help="server VmRSS before the clients came")
    p.add_argument("--server-hwm-kib", type=int, default=0, help="server VmHWM after the rounds")
    p.add_argument("--warmup", type=int, default=0, help="first rounds left out of the times (still checked)")
    p.add_argument("files", nargs="+")
    a = p.parse_args()
    rounds = {}
    for name in a.files:
        with open(name) as f:
            for line in f:
                rank, r, start, end, added = map(int, line.split())
                rounds.setdefault(r, []).append((rank, start, end, added))
    times = []
    for r in sorted(rounds):
        rows = rounds[r]
        ranks = sorted(x[0] for x in rows)
        adds = sorted(x[3] for x in rows)
        expected = list(range(a.world))
        if ranks != expected or adds != [x + 1 for x in expected]:
            sys.exit(f"summarize: round {r} of {a.impl} at {a.world}: ranks or ADD results are not 0..N-1 / 1..N")
        if r >= a.warmup:
            times.append((max(x[2] for x in rows) - min(x[1] for x in rows)) / 1e9)
    if not times:
        sys.exit("summarize: no rounds")
    print(json.dumps({"impl": a.impl, "clients": a.world, "layout": a.layout, "rounds": len(times),
                      "round_s": [round(t, 4) for t in times], "median_s": round(statistics.median(times), 4),
                      "server_rss_start_kib": a.server_rss_kib, "server_hwm_kib": a.server_hwm_kib}))


if __name__ == "__main__":
    main()
