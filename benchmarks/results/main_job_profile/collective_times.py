#!/usr/bin/python3
"""Durations of the all-reduces of each training step from `perf script -F pid,tid,time,event` output of
collective_times.sh (uprobes on entry and return of gloo::allreduce or PMPI_Allreduce).

  collective_times.py FILE CALLS_PER_STEP STEPS TRAILING

The training steps' calls are the STEPS * CALLS_PER_STEP calls before the last TRAILING ones of each
process (the test evaluation's count and the like); call k of a step is reported over all steps: median,
90th percentile and mean in microseconds. Gloo calls also report the handleEvents calls that found the pair
locked (the device thread's spin), split by whether the process was inside gloo::allreduce.
"""
import collections
import re
import statistics
import sys

path, per, steps, trailing = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
start, durations = {}, collections.defaultdict(list)
inside = collections.Counter()
events = collections.Counter()
for line in open(path):
    m = re.match(r"\s*(\d+)/(\d+)\s+([\d.]+):\s+probe_\w+:(\w+)", line)
    if not m:
        continue
    pid, tid, t, ev = m.group(1), m.group(2), float(m.group(3)), m.group(4)
    if ev.endswith("_in"):
        start[tid] = t
        inside[pid] += 1
    elif ev.endswith("__return"):
        durations[pid].append((t - start.pop(tid, t)) * 1e6)
        inside[pid] -= 1
    else:
        events[(ev, "inside" if inside[pid] > 0 else "outside")] += 1
for pid, d in sorted(durations.items()):
    body = d[len(d) - trailing - steps * per:len(d) - trailing]
    print(f"process {pid}: {len(d)} calls")
    for k in range(per):
        x = sorted(body[k::per])
        print(f"  call {k} of the step: median {statistics.median(x):.0f} us, p90 {x[int(0.9 * len(x))]:.0f} us, "
              f"mean {statistics.fmean(x):.0f} us")
if events:
    for where in ("inside", "outside"):
        h, r = events[("cg_handle", where)], events[("cg_rw", where)]
        print(f"handleEvents {where} gloo::allreduce: {h} calls, {h - r} found the pair locked")
