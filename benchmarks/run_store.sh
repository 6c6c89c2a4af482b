#!/usr/bin/env bash
# A rendezvous round on the TCPStore (docs/performance.md, "Rendezvous store"): idist's server and client
# (benchmarks/store/server.cpp, client.cpp) against PyTorch's own TCPStore (benchmarks/store/torch_store.py,
# Debian's python3-torch), each server alone in its process on 127.0.0.1. For every size, clients are
# processes x threads (64 = 2 x 32, 256 = 4 x 64, 1024 = 8 x 128); each round every client SETs its key,
# WAITs for all, GETs three others and ADDs a counter (an untimed start line first). Prints the median
# round time and the server's peak memory (VmHWM) per implementation with their ratios, and writes
# store_runs.jsonl, store.csv, store.md and env.txt under OUT_DIR.
#
#   BUILD_DIR=build benchmarks/run_store.sh                        # 64, 256, 1024 clients; 3 rounds + 1 warm-up
#   SIZES=64 ROUNDS=1 WARMUP=0 OUT_DIR=/tmp/s benchmarks/run_store.sh   # the smoke run
#
# Environment: BUILD_DIR (./build), OUT_DIR (benchmarks/results/store/<date>), SIZES ("64 256 1024"),
# ROUNDS (3, timed), WARMUP (1, untimed rounds before them), IMPLS ("idist torch"), PEER_PYTHON
# (/usr/bin/python3), RUN_TIMEOUT (seconds per client process, 600). Builds nothing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
out=${OUT_DIR:-$root/benchmarks/results/store/$(date +%F)}
sizes=${SIZES:-64 256 1024}
rounds=${ROUNDS:-3}
warmup=${WARMUP:-1}
impls=${IMPLS:-idist torch}
python=${PEER_PYTHON:-/usr/bin/python3}
run_timeout=${RUN_TIMEOUT:-600}
here=$root/benchmarks/store
server_bin=$build/benchmarks/store/idist_bench_store_server
client_bin=$build/benchmarks/store/idist_bench_store_client

for v in "$rounds" "$warmup" "$run_timeout"; do
  [[ $v =~ ^[0-9]+$ ]] || { echo "run_store: ROUNDS, WARMUP and RUN_TIMEOUT should be integers, got '$v'" >&2; exit 1; }
done
[[ $rounds -ge 1 && $rounds -le 100 && $warmup -le 10 ]] || { echo "run_store: ROUNDS in 1..100, WARMUP <= 10" >&2; exit 1; }
for impl in $impls; do
  case $impl in
    idist) [ -x "$server_bin" ] && [ -x "$client_bin" ] ||
      { echo "run_store: build the targets idist_bench_store_server and idist_bench_store_client" >&2; exit 1; } ;;
    torch) "$python" -c 'import torch.distributed' ||
      { echo "run_store: $python cannot import torch.distributed (Debian: apt install python3-torch)" >&2; exit 1; } ;;
    *) echo "run_store: unknown implementation '$impl' (expected idist, torch)" >&2; exit 1 ;;
  esac
done
mkdir -p "$out"
runs=$out/store_runs.jsonl
rm -f "$runs"
scratch=$(mktemp -d)
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$scratch"
}
trap cleanup EXIT

# layout <clients>: sets procs and threads (at most 128 clients per process).
layout() {
  local n=$1
  case $n in
    64) procs=2 ;;
    256) procs=4 ;;
    1024) procs=8 ;;
    *) procs=$(((n + 127) / 128)) ;;
  esac
  threads=$(((n + procs - 1) / procs))
}

status_kib() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"; }

# run_one <impl> <clients>: one server, its clients, one JSON line into $runs.
run_one() {
  local impl=$1 n=$2 port_file=$scratch/port fifo=$scratch/stdin
  layout "$n"
  rm -f "$port_file" "$fifo"
  mkfifo "$fifo"
  case $impl in
    idist) "$server_bin" --port-file "$port_file" <"$fifo" 2>"$scratch/server.err" & ;;
    torch) "$python" "$here/torch_store.py" server --port-file "$port_file" <"$fifo" 2>"$scratch/server.err" & ;;
  esac
  server_pid=$!
  exec 9>"$fifo"  # the server's stdin: closes, and stops the server, when this script exits
  for _ in $(seq 1200); do [ -s "$port_file" ] && break; sleep 0.1; done
  [ -s "$port_file" ] || { echo "run_store: the $impl server did not start" >&2; cat "$scratch/server.err" >&2; exit 1; }
  local port rss hwm
  port=$(cat "$port_file")
  rss=$(status_kib "$server_pid" VmRSS)
  local pids=() files=() first=0 p t
  for ((p = 0; p < procs; ++p)); do
    t=$((n - first < threads ? n - first : threads))
    local f=$scratch/${impl}_${n}_$p.txt
    files+=("$f")
    local args=(--port "$port" --world "$n" --first-rank "$first" --threads "$t" --rounds $((rounds + warmup)))
    case $impl in
      idist) timeout "$run_timeout" "$client_bin" "${args[@]}" >"$f" 9>&- & ;;
      torch) timeout "$run_timeout" "$python" "$here/torch_store.py" client "${args[@]}" >"$f" 9>&- & ;;
    esac
    pids+=($!)
    first=$((first + t))
  done
  local failed=0
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  hwm=$(status_kib "$server_pid" VmHWM)
  exec 9>&-
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=
  [ "$failed" = 0 ] || { echo "run_store: a $impl client process failed at $n clients" >&2; exit 1; }
  "$python" "$here/summarize.py" --impl "$impl" --world "$n" --layout "${procs}x$threads" --warmup "$warmup" \
    --server-rss-kib "$rss" --server-hwm-kib "$hwm" "${files[@]}" | tee -a "$runs"
}

{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(uname -srm), $(nproc) cores, $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo)"
  echo "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "torch: $("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); ninja running: $(pgrep -x ninja >/dev/null && echo yes || echo no)"
  echo "sizes: $sizes; rounds: $rounds timed + $warmup warm-up"
} >"$out/env.txt"

for n in $sizes; do
  [[ $n =~ ^[0-9]+$ && $n -ge 4 && $n -le 4096 ]] || { echo "run_store: size $n, expected 4..4096" >&2; exit 1; }
  for impl in $impls; do run_one "$impl" "$n"; done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); ninja running: $(pgrep -x ninja >/dev/null && echo yes || echo no)" >>"$out/env.txt"

"$python" - "$runs" "$out" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
by = {(r["impl"], r["clients"]): r for r in runs}
sizes = sorted({r["clients"] for r in runs})
mib = lambda kib: kib / 1024
head = ["clients", "layout", "idist round s", "torch round s", "torch / idist", "idist server MiB (peak)",
        "torch server MiB (peak)", "torch server MiB (growth)"]
rows = []
for n in sizes:
    i, t = by.get(("idist", n)), by.get(("torch", n))
    f = lambda r, k, fmt: fmt.format(r[k]) if r else "-"
    rows.append([str(n), (i or t)["layout"], f(i, "median_s", "{:.3f}"), f(t, "median_s", "{:.3f}"),
                 "{:.2f}".format(t["median_s"] / i["median_s"]) if i and t else "-",
                 "{:.1f}".format(mib(i["server_hwm_kib"])) if i else "-",
                 "{:.1f}".format(mib(t["server_hwm_kib"])) if t else "-",
                 "{:.1f}".format(mib(t["server_hwm_kib"] - t["server_rss_start_kib"])) if t else "-"])
with open(f"{sys.argv[2]}/store.csv", "w") as f:
    f.write(",".join(head) + "\n" + "".join(",".join(r) + "\n" for r in rows))
md = "| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n" + "".join("| " + " | ".join(r) + " |\n" for r in rows)
open(f"{sys.argv[2]}/store.md", "w").write(md)
print(md, end="")
PY
echo "run_store: results in $out"
