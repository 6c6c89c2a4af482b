#!/usr/bin/env bash
# idist under the real torchrun (Debian's /usr/bin/torchrun, torch 1.13), one case per call:
#   torchrun_test.sh <case> <torchrun_worker> <fashion_mnist>
# Cases: {static,standalone,c10d}_{worker,example}, error_file, example_error_file, restart. Each runs torchrun with 2 workers on
# free ports and checks its exit code and output. Exit 0: passed; 1: failed; 77: skipped (no torchrun, and not
# in CI: under CI=true a missing torchrun fails).
# Debian's torchrun under Python 3.11 needs -r 1 -t 1 (its default redirects crash) and so a --log_dir.
set -uo pipefail

case_name=$1
worker=$2
example=$3
torchrun=${IDIST_TEST_TORCHRUN:-/usr/bin/torchrun}
python=${IDIST_TEST_TORCH_PYTHON:-/usr/bin/python3}

if [[ ! -x $torchrun ]]; then
  if [[ ${CI:-} == true ]]; then
    echo "FAIL: $torchrun is missing (install python3-torch: scripts/install-deps.sh)"
    exit 1
  fi
  echo "SKIP: $torchrun is missing (install python3-torch)"
  exit 77
fi

work=$(mktemp -d /tmp/idist-torchrun-XXXXXX)
trap 'rm -rf "$work"' EXIT
out=$work/out.txt

free_port() {
  "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

fail() {
  echo "---- torchrun's output"
  cat "$out"
  for f in "$work"/logs/*/attempt_*/*/stdout.log; do
    [[ -f $f ]] && { echo "---- $f"; cat "$f"; }
  done
  echo "FAIL ($case_name): $*"
  exit 1
}

# run_torchrun <rendezvous flags...> -- <program and arguments...>: torchrun with 2 workers, bounded.
run_torchrun() {
  local flags=()
  while [[ $1 != -- ]]; do flags+=("$1"); shift; done
  shift
  local start=$(date +%s%N)
  timeout -k 10 240 "$torchrun" -r 1 -t 1 --log_dir "$work/logs" --nproc_per_node 2 --monitor_interval 1 \
    "${flags[@]}" --no_python "$@" >"$out" 2>&1
  rc=$?
  echo "torchrun exited with $rc after $(( ($(date +%s%N) - start) / 1000000 )) ms"
}

expect_in_output() {
  grep -qF -- "$1" "$out" || fail "the output lacks '$1'"
}

# The store under each rendezvous mode: the agent's (static), idist's own at a free MASTER_PORT (standalone
# and c10d in torch 1.13). c10d with --nnodes 1:2 waits last_call_timeout (30 s by default) for a second node.
mode_flags() {
  case $1 in
    static) echo "--master_port $(free_port)" ;;
    standalone) echo "--standalone" ;;
    c10d) echo "--rdzv_backend c10d --rdzv_endpoint 127.0.0.1:$(free_port) --rdzv_conf last_call_timeout=1 --nnodes 1:2" ;;
  esac
}

store_words() {
  case $1 in
    static) echo "agent store" ;;
    *) echo "idist's store at MASTER_PORT" ;;
  esac
}

case $case_name in
  static_worker | standalone_worker | c10d_worker)
    mode=${case_name%_worker}
    mkdir -p "$work/ranks"
    # shellcheck disable=SC2046
    run_torchrun $(mode_flags "$mode") -- "$worker" ok "$work/ranks"
    [[ $rc == 0 ]] || fail "torchrun exited with $rc"
    for r in 0 1; do
      line=$(cat "$work/ranks/rank$r.txt" 2>/dev/null) || fail "rank $r wrote no report"
      [[ $line == "rank $r world 2 local $r nproc 2 node 0 nnodes 1 restart 0" ]] || fail "rank $r reported '$line'"
    done
    expect_in_output "launcher: torchrun (run id "
    expect_in_output "restart 0 of 0, $(store_words "$mode"))"
    ;;
  static_example | standalone_example | c10d_example)
    mode=${case_name%_example}
    # shellcheck disable=SC2046
    run_torchrun $(mode_flags "$mode") -- "$example" --backend gloo --limit 256 --timeout 120
    [[ $rc == 0 ]] || fail "torchrun exited with $rc"
    expect_in_output '"world_size": 2'
    expect_in_output '"train_images": 256'
    expect_in_output "launcher: torchrun"
    ;;
  error_file)
    run_torchrun --master_port "$(free_port)" -- "$worker" fail 1
    [[ $rc != 0 ]] || fail "torchrun exited with 0 although rank 1 failed"
    # The summary's root cause is rank 1, with its error file and idist's message as the traceback.
    root=$(sed -n '/Root Cause (first observed failure):/,/^=====/p' "$out")
    [[ -n $root ]] || fail "no failure summary"
    grep -qE 'rank +: 1 \(local_rank: 1\)' <<<"$root" || fail "the root cause is not rank 1: $root"
    grep -qE 'error_file: /.*/attempt_0/1/error.json' <<<"$root" || fail "the root cause has no error file: $root"
    grep -qF 'traceback : idist::ValueError: broadcast' <<<"$root" || fail "the root cause lacks idist's message: $root"
    grep -qF '(raised on rank 1, local rank 1,' <<<"$root" || fail "the root cause does not name the rank: $root"
    if grep -qF '<N/A>' <<<"$root"; then fail "the root cause still says <N/A>: $root"; fi
    ;;
  example_error_file)
    # The example records its error too: torchrun's summary shows it instead of `error_file: <N/A>`.
    run_torchrun --master_port "$(free_port)" -- "$example" --backend gloo --data-dir /nonexistent
    [[ $rc != 0 ]] || fail "torchrun exited with 0 although the data is missing"
    root=$(sed -n '/Root Cause (first observed failure):/,/^=====/p' "$out")
    grep -qE 'error_file: /.*/attempt_0/[01]/error.json' <<<"$root" || fail "the root cause has no error file: $root"
    grep -qF '/nonexistent/train-images-idx3-ubyte.gz: no such file' <<<"$root" || fail "the root cause lacks the example's message: $root"
    ;;
  restart)
    mkdir -p "$work/ranks"
    run_torchrun --master_port "$(free_port)" --max_restarts 1 -- "$worker" restart "$work/ranks"
    [[ $rc == 0 ]] || fail "torchrun exited with $rc (the restarted attempt should succeed)"
    for r in 0 1; do
      line=$(cat "$work/ranks/rank$r.txt" 2>/dev/null) || fail "rank $r wrote no report"
      [[ $line == "rank $r world 2 local $r nproc 2 node 0 nnodes 1 restart 1" ]] || fail "rank $r reported '$line'"
    done
    expect_in_output "launcher: torchrun (run id none, restart 1 of 1, agent store)"
    expect_in_output "attempt prefixes: attempt_0 and attempt_1 both joined"
    ls "$work"/logs/*/attempt_1 >/dev/null 2>&1 || fail "torchrun made no attempt_1"
    ;;
  *)
    echo "unknown case '$case_name'"
    exit 1
    ;;
esac
echo "PASS ($case_name)"
