#!/usr/bin/env python3
"""The verdict of benchmarks/run_recovery.sh: reads the JSON lines the elastic scenarios append to
IDIST_ELASTIC_TIMINGS (tests/cluster/torchrun_elastic.sh) and prints, per scenario and measure, every
run, the median and the target. Exit 0 when every median meets its target, 1 when one misses, 2 on
bad input."""
import argparse
import json
import statistics
import sys

# (key in the JSON line, label, which target applies: None for the measures without one)
MEASURES = [("fault_to_workers_gone_s", "survivors gone", "survivors"),
            ("workers_gone_to_restart_s", "restart", None),
            ("restart_to_first_step_max_s", "first step", "first_step"),
            ("fault_to_first_step_s", "fault -> step", None)]


def die(message):
    print(f"verdict: {message}", file=sys.stderr)
    sys.exit(2)


def read_runs(path):
    runs = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                run = json.loads(line)
                missing = [k for k, _, _ in MEASURES if not isinstance(run.get(k), (int, float))]
                if missing or not isinstance(run.get("scenario"), str):
                    raise ValueError(f"expected a scenario and the numbers {', '.join(k for k, _, _ in MEASURES)}"
                                     f"{'; missing: ' + ', '.join(missing) if missing else ''}")
            except ValueError as e:
                die(f"{path}:{n}: not a timing line ({e}): {line.strip()[:200]}")
            runs.append(run)
    if not runs:
        die(f"{path} holds no timing line")
    return runs


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("runs", help="the JSON lines of the rounds")
    p.add_argument("--survivors-target", type=float, required=True, help="seconds, fault -> survivors gone")
    p.add_argument("--first-step-target", type=float, required=True,
                   help="seconds, a restarted worker's start -> its first step")
    a = p.parse_args()
    targets = {"survivors": a.survivors_target, "first_step": a.first_step_target}
    runs = read_runs(a.runs)
    missed = 0
    print("| scenario | measure | runs (s) | median (s) | target (s) | verdict |")
    print("|---|---|---|---|---|---|")
    for scenario in dict.fromkeys(r["scenario"] for r in runs):
        mine = [r for r in runs if r["scenario"] == scenario]
        for key, label, which in MEASURES:
            values = [r[key] for r in mine]
            median = statistics.median(values)
            target = targets[which] if which else None
            verdict = "-" if target is None else ("met" if median <= target else "MISSED")
            missed += verdict == "MISSED"
            print(f"| {scenario} | {label} | {', '.join(f'{v:.2f}' for v in values)} | {median:.2f} | "
                  f"{'-' if target is None else f'{target:g}'} | {verdict} |")
    print(f"run_recovery: {missed} target(s) missed" if missed else "run_recovery: every target met")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
