#!/usr/bin/python3
"""Tables of benchmarks/run_peers.sh (no torch needed).

  summarize.py --tag LINE ROUND PROGRAM        LINE (a JSON object) with its round and program added
  summarize.py --training-csv CSV              idist_bench_training's one-configuration CSV as a JSON line
  summarize.py --runs RUNS.jsonl --out-dir D [--strict]
      medians over the rounds and the ratios of the issue, printed and written to D/peers_main_job.{csv,md}
      and D/peers_mlp.{csv,md}; --strict exits 3 when the programs of a round end with different weights (main job) or last losses (MLP).
"""
import argparse
import csv
import json
import os
import statistics
import sys

# program -> (what it is, backend)
MAIN_JOB = {
    "example_gloo": ("fashion_mnist example (idist, --nproc-per-node)", "gloo"),
    "ddp_gloo": ("PyTorch DDP (Python, one process per rank)", "gloo"),
    "example_mpi": ("fashion_mnist example (idist, mpirun)", "mpi"),
    "mpi_loop": ("hand-written LibTorch + MPI loop", "mpi"),
}
MLP = {
    "mlp_idist_gloo": ("idist auto_model (idist_bench_training, 25 MiB buckets)", "gloo"),
    "mlp_ddp_gloo": ("PyTorch DDP (Python, default buckets)", "gloo"),
    "mlp_idist_mpi": ("idist auto_model (idist_bench_training, 25 MiB buckets)", "mpi"),
    "mlp_mpi_loop": ("hand-written LibTorch + MPI loop (one MPI_Allreduce per gradient)", "mpi"),
}
# (numerator, denominator, target) of the ratios: images/s for the main job, speed for the MLP
MAIN_RATIOS = [("example_gloo", "ddp_gloo", 1.15), ("example_mpi", "mpi_loop", 1.00)]
MLP_RATIOS = [("mlp_idist_gloo", "mlp_ddp_gloo", None), ("mlp_idist_mpi", "mlp_mpi_loop", None)]


def training_csv_line(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if len(rows) != 1:
        sys.exit(f"summarize: {path}: expected one configuration, found {len(rows)}")
    r = rows[0]
    return json.dumps({"program": "idist_bench_training", "mode": r["model"], "config": r["config"],
                       "world_size": int(r["ranks"]), "batch_per_rank": int(r["batch"]), "buckets": int(r["buckets"]),
                       "p50_ms": float(r["p50_ms"]), "p90_ms": float(r["p90_ms"]), "mean_ms": float(r["avg_ms"]),
                       "min_ms": float(r["min_ms"]), "steps": int(r["steps"]), "samples_per_s": float(r["samples_per_s"]),
                       "last_loss": float(r["last_loss"])})


def med(values):
    return statistics.median(values) if values else float("nan")


def span(values, fmt):
    return f"{fmt.format(min(values))}–{fmt.format(max(values))}" if values else "-"


def write(out_dir, name, header, rows):
    with open(os.path.join(out_dir, name), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def ratio_rows(runs, ratios, key, invert):
    """Ratio of the medians (numerator / denominator of `key`, or its inverse for times), with the range
    of the per-round ratios."""
    out = []
    for num, den, target in ratios:
        a = {r["round"]: r[key] for r in runs if r["program"] == num}
        b = {r["round"]: r[key] for r in runs if r["program"] == den}
        if not a or not b:
            continue
        per_round = [(b[k] / a[k] if invert else a[k] / b[k]) for k in sorted(a.keys() & b.keys())]
        ratio = med(b.values()) / med(a.values()) if invert else med(a.values()) / med(b.values())
        verdict = "-" if target is None else ("met" if ratio >= target else f"not met (target {target:.2f}x)")
        out.append((num, den, ratio, per_round, target, verdict))
    return out


def summarize(path, out_dir, strict):
    with open(path) as f:
        runs = [json.loads(line) for line in f if line.strip()]
    rounds = sorted({r["round"] for r in runs})
    md = []

    main = [r for r in runs if r["program"] in MAIN_JOB]
    if main:
        write(out_dir, "peers_main_job.csv",
              ["round", "program", "backend", "images_per_s", "train_seconds", "test_accuracy", "train_loss",
               "weights_digest"],
              [[r["round"], r["program"], MAIN_JOB[r["program"]][1], r["images_per_s"], r["train_seconds"],
                r["test_accuracy"], r["train_loss"], r["weights_digest"]] for r in main])
        md += ["## Main job: Fashion-MNIST CNN, 1 process per rank, 1 intra-op thread each", "",
               f"{main[0]['world_size']} ranks, global batch {main[0]['batch_size']}, {main[0]['train_images']} "
               f"training images, {main[0]['epochs']} epoch(s); medians of {len(rounds)} alternating round(s).", "",
               "| program | backend | images/s (median) | images/s (range) | test accuracy | weights digest |",
               "|---|---|---:|---:|---:|---|"]
        for p, (what, backend) in MAIN_JOB.items():
            rs = [r for r in main if r["program"] == p]
            if not rs:
                continue
            ips = [r["images_per_s"] for r in rs]
            acc = sorted({r["test_accuracy"] for r in rs})
            digests = sorted({r["weights_digest"] for r in rs})
            md.append(f"| {what} | {backend} | {med(ips):,.0f} | {span(ips, '{:,.0f}')} | "
                      f"{', '.join(f'{a:.4f}' for a in acc)} | {', '.join(digests)} |")
        md += ["", "| ratio (images/s) | median | per round | target |", "|---|---:|---:|---|"]
        for num, den, ratio, per_round, target, verdict in ratio_rows(main, MAIN_RATIOS, "images_per_s", False):
            md.append(f"| {num} / {den} | {ratio:.3f}x | {span(per_round, '{:.3f}')} | {verdict} |")
        md.append("")

    mlp = [r for r in runs if r["program"] in MLP]
    if mlp:
        write(out_dir, "peers_mlp.csv",
              ["round", "program", "backend", "p50_ms", "p90_ms", "mean_ms", "min_ms", "last_loss"],
              [[r["round"], r["program"], MLP[r["program"]][1], r["p50_ms"], r["p90_ms"], r["mean_ms"], r["min_ms"],
                r["last_loss"]] for r in mlp])
        md += ["## MLP step: 32 Linear 512x512, 16 samples per rank, SGD", "",
               f"Per-step times are maxima over the ranks; p50 of {mlp[0].get('steps', '?')} timed steps per run, "
               f"median over {len(rounds)} round(s).", "",
               "| program | backend | step p50 ms (median) | range | last loss |", "|---|---|---:|---:|---:|"]
        for p, (what, backend) in MLP.items():
            rs = [r for r in mlp if r["program"] == p]
            if not rs:
                continue
            ms = [r["p50_ms"] for r in rs]
            md.append(f"| {what} | {backend} | {med(ms):.2f} | {span(ms, '{:.2f}')} | "
                      f"{', '.join(sorted({'{:.5f}'.format(r['last_loss']) for r in rs}))} |")
        md += ["", "| speed ratio (peer step / idist step) | median | per round |", "|---|---:|---:|"]
        for num, den, ratio, per_round, _, _ in ratio_rows(mlp, MLP_RATIOS, "p50_ms", True):
            md.append(f"| {num} vs {den} | {ratio:.3f}x | {span(per_round, '{:.3f}')} |")
        md.append("")

    differ = []
    for k in rounds:
        digests = {r["program"]: r["weights_digest"] for r in main if r["round"] == k}
        if len(set(digests.values())) > 1:
            differ.append(f"round {k}: " + ", ".join(f"{p} {d}" for p, d in sorted(digests.items())))
    for k in rounds:  # the MLP programs train the same weights on the same batches: the same last loss
        losses = {r["program"]: r["last_loss"] for r in mlp if r["round"] == k}
        if losses and max(losses.values()) - min(losses.values()) > 1e-4 * max(1.0, abs(max(losses.values()))):
            differ.append(f"round {k} (MLP last loss): " + ", ".join(f"{p} {v}" for p, v in sorted(losses.items())))
    if mlp and not any("MLP" in d for d in differ):
        md.append("MLP: the same last loss in every program and round.")
    if main:
        md.append("Final weights bitwise equal across the programs in every round."
                  if not any("MLP" not in d for d in differ) else
                  "Final weights differ within a round: " + "; ".join(d for d in differ if "MLP" not in d))
    if differ:
        md.append("Differences: " + "; ".join(differ))
    text = "\n".join(md) + "\n"
    with open(os.path.join(out_dir, "peers_main_job.md" if main else "peers_mlp.md"), "w") as f:
        f.write(text)
    if main and mlp:  # the MLP part also on its own, for docs that show one table
        with open(os.path.join(out_dir, "peers_mlp.md"), "w") as f:
            f.write(text[text.index("## MLP step"):])
    print(text, end="")
    if differ and strict:
        sys.exit(3)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tag", nargs=3, metavar=("LINE", "ROUND", "PROGRAM"))
    p.add_argument("--training-csv")
    p.add_argument("--runs")
    p.add_argument("--out-dir", default=".")
    p.add_argument("--strict", action="store_true")
    a = p.parse_args(argv)
    if a.tag:
        d = json.loads(a.tag[0])
        d["source"] = d.get("program", "fashion_mnist")
        d["round"], d["program"] = int(a.tag[1]), a.tag[2]
        print(json.dumps(d))
    elif a.training_csv:
        print(training_csv_line(a.training_csv))
    elif a.runs:
        summarize(a.runs, a.out_dir, a.strict)
    else:
        p.error("one of --tag, --training-csv, --runs")


if __name__ == "__main__":
    main(sys.argv[1:])
