#!/usr/bin/python3
"""Per-step instruction counts by region from the callgrind dumps of an instrumented run.

  analyze_regions.py DIR [--skip N] [--functions REGION [--grep RE] [--top K]]

DIR holds callgrind.out-style files written with --callgrind-out-file=DIR/cg.%p: one dump per region
and step (instrument_example.py / instrument_ddp.py name them setup, barrier, load, zero_grad, forward,
backward, allreduce (the MPI loop only), optimizer, metrics, epoch_end). For every process that trained (its dumps include 'load'),
prints the mean instructions (Ir) per step of each region over the steady steps (all but the first
--skip steps and the last one, whose progress line is printed once per epoch), and the first steps in
full. --functions REGION sums callgrind_annotate's inclusive costs over that region's steady dumps and
prints the --top functions per step.
"""
import argparse
import collections
import glob
import os
import re
import statistics
import subprocess
import sys

REGIONS = ["load", "zero_grad", "forward", "backward", "allreduce", "optimizer", "metrics"]


def dumps(directory):
    """{pid: [(part, region, Ir, path)]} in dump order."""
    out = collections.defaultdict(list)
    for path in glob.glob(os.path.join(directory, "cg.*")):
        m = re.match(r"cg\.(\d+)(?:\.(\d+))?$", os.path.basename(path))
        if not m:
            continue
        region, total = None, None
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("desc: Trigger:"):
                    region = line.split(":")[-1].strip()
                elif line.startswith("totals:") or line.startswith("summary:"):
                    total = int(line.split()[1])
                    break
        if region is None or total is None:
            continue
        region = region.replace("Client Request", "").strip() or "?"
        out[m.group(1)].append((int(m.group(2) or 1 << 30), region, total, path))
    for pid in out:
        out[pid].sort()
    return out


def steps_of(entries):
    """[{region: Ir}] per training step: a step starts at each 'load' dump."""
    steps = []
    for _, region, total, path in entries:
        if region == "load":
            steps.append({})
        if steps and region in REGIONS:
            steps[-1][region] = (total, path)
    return steps


def annotate(path):
    """{function: inclusive Ir} of one dump."""
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", path],
                          capture_output=True, text=True, check=True).stdout
    costs = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(?:\([\s\d.]+%\)\s+)?(?:\*\s+)?(.+)$", line)
        if m and ":" in m.group(2):
            fn = m.group(2).split(":", 1)[1].strip()
            fn = re.sub(r"\s+\[[^\]]*\]$", "", fn)
            costs[fn] = costs.get(fn, 0) + int(m.group(1).replace(",", ""))
    return costs


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir")
    p.add_argument("--skip", type=int, default=3, help="first steps left out of the steady state")
    p.add_argument("--functions", help="region whose functions to rank")
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--grep", help="only functions matching this regular expression")
    a = p.parse_args(argv)
    procs = {pid: steps_of(e) for pid, e in dumps(a.dir).items()}
    procs = {pid: s for pid, s in procs.items() if s}
    if not procs:
        sys.exit(f"analyze_regions: no training dumps in {a.dir}")
    for pid, steps in sorted(procs.items()):
        steady = steps[a.skip:-1]
        print(f"# process {pid}: {len(steps)} steps, steady = steps {a.skip + 1}..{len(steps) - 1}")
        print(f"{'region':<10} {'Ir/step (mean)':>15} {'min':>12} {'max':>12}   first steps")
        total = 0
        for r in REGIONS:
            vals = [s[r][0] for s in steady if r in s]
            if not vals:
                continue
            total += statistics.fmean(vals)
            first = " ".join(f"{s[r][0] / 1e6:.2f}M" for s in steps[:a.skip] if r in s)
            print(f"{r:<10} {statistics.fmean(vals):>15,.0f} {min(vals):>12,} {max(vals):>12,}   {first}")
        print(f"{'step':<10} {total:>15,.0f}")
        if a.functions:
            summed = collections.Counter()
            paths = [s[a.functions][1] for s in steady if a.functions in s]
            for path in paths:
                summed.update(annotate(path))
            print(f"## {a.functions}: inclusive Ir per step, mean over {len(paths)} steps")
            ranked = [(fn, ir) for fn, ir in summed.most_common() if not a.grep or re.search(a.grep, fn)]
            for fn, ir in ranked[:a.top]:
                print(f"{ir / len(paths):>14,.0f}  {fn[:160]}")
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
