#!/usr/bin/env bash
# Prints the condensed Markdown tables of docs/performance.md from the CSV files that
# run_collectives.sh / run_training.sh wrote (the full tables are the .md files beside the CSVs).
# Usage: [SIZES="8 1024 ..."] benchmarks/tables.sh <results-dir>
#   SIZES: keep only these message sizes (bytes) in the collectives tables.
set -euo pipefail
in=${1:?results directory}

# table <csv> <header-names...>: the named columns of <csv> as a Markdown table ("-" when absent).
table() {
  local f=$1
  shift
  awk -F, -v want="$*" -v sizes="${KEEP_SIZES:-}" '
    NR == 1 { n = split(want, w, " "); for (i = 1; i <= NF; i++) col[$i] = i
              line = "|"; rule = "|"
              for (j = 1; j <= n; j++) { line = line " " w[j] " |"; rule = rule "---:|" }
              print line; print rule; next }
    sizes != "" && ("size_B" in col) && $(col["size_B"]) != "0" && index(" " sizes " ", " " $(col["size_B"]) " ") == 0 { next }
    { line = "|"; for (j = 1; j <= n; j++) line = line " " ((w[j] in col) ? $(col[w[j]]) : "-") " |"; print line }' "$f"
}

for b in mpi mpi_polled gloo; do
  for op in all_reduce all_gather broadcast barrier; do
    f=$in/collectives_${b}_$op.csv
    [ -f "$f" ] || continue
    echo "#### $b $op"
    echo
    export KEEP_SIZES=${SIZES:-}
    if [[ $b == mpi* ]]; then
      table "$f" size_B p50_us raw_p50_us ratio_raw raw_nb_p50_us ratio_raw_nb p99_us raw_p99_us busbw_GBps raw_busbw_GBps wrong target
    else
      table "$f" size_B p50_us raw_p50_us ratio_raw p99_us raw_p99_us busbw_GBps raw_busbw_GBps wrong target
    fi
    echo
  done
done

export KEEP_SIZES=
for b in serial mpi gloo; do
  for m in cnn mlp32x512 mlp200x64; do
    f=$in/training_${b}_$m.csv
    [ -f "$f" ] || continue
    echo "#### $b $m"
    echo
    table "$f" config buckets p50_ms p90_ms p95_ms samples_per_s speedup_sq_idist speedup_sq_raw exposed_ms target
    echo
  done
done

if [ -f "$in/training_memory.csv" ]; then
  echo "#### peak resident memory"
  echo
  table "$in/training_memory.csv" backend model config peak_rss_MiB_per_rank peak_private_MiB_per_rank grad_MiB bucket_buffers_MiB peak_of
  echo
fi
