#!/usr/bin/env python3
"""PyTorch's own TCPStore for benchmarks/run_store.sh: the same rendezvous round as client.cpp.

  torch_store.py server --port-file F      serve 127.0.0.1 on a free port until stdin closes or SIGTERM
  torch_store.py client --port P --world N --first-rank R --threads T --rounds K

The client prints one line per client and round: rank round start_ns end_ns add_result (CLOCK_MONOTONIC,
as client.cpp), and exits non-zero when a GET returns a wrong value or a call fails.
"""
import argparse
import datetime
import os
import signal
import sys
import threading
import time

import torch.distributed as dist


def serve(args):
    store = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=args.timeout),
                          wait_for_workers=False)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{store.port}\n")
    os.rename(tmp, args.port_file)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    while not stop.wait(0.2):
        pass
    del store


def run_client(args, rank, out, failures):
    try:
        store = dist.TCPStore("127.0.0.1", args.port, None, False, datetime.timedelta(seconds=args.timeout),
                              wait_for_workers=False)
        for r in range(args.rounds):
            if store.add(f"ready/{r}", 1) == args.world:
                store.set(f"go/{r}", "1")
            store.wait([f"go/{r}"])
            keys = [f"r{r}/k{k}" for k in range(args.world)]
            start = time.monotonic_ns()
            store.set(keys[rank], f"v{r}:{rank}")
            store.wait(keys)
            for d in (1, 2, 3):
                peer = (rank + d) % args.world
                got = store.get(keys[peer]).decode()
                if got != f"v{r}:{peer}":
                    raise RuntimeError(f"rank {rank} round {r}: get of rank {peer} returned {got!r}")
            added = store.add(f"r{r}/count", 1)
            out.append((rank, r, start, time.monotonic_ns(), added))
    except Exception as e:  # reported by main; the other clients time out on the start line
        failures.append(str(e))


def clients(args):
    if args.first_rank + args.threads > args.world:
        sys.exit(f"client: ranks exceed --world {args.world}")
    out, failures = [], []
    threads = [threading.Thread(target=run_client, args=(args, args.first_rank + t, out, failures))
               for t in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        sys.exit(f"client: {failures[0]}")
    for s in sorted(out):
        print(*s)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("server")
    s.add_argument("--port-file", required=True)
    s.add_argument("--timeout", type=int, default=120)
    c = sub.add_parser("client")
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--world", type=int, required=True)
    c.add_argument("--first-rank", type=int, default=0)
    c.add_argument("--threads", type=int, default=1)
    c.add_argument("--rounds", type=int, default=1)
    c.add_argument("--timeout", type=int, default=120)
    args = p.parse_args()
    serve(args) if args.mode == "server" else clients(args)


if __name__ == "__main__":
    main()
