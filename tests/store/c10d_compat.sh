#!/usr/bin/env bash
# idist's c10d TCPStore client against the TCPStore of whatever torch a python3 has: torch 1.x / 2.0
# (protocol 1, e.g. Debian's python3-torch 1.13 here) or torch 2.1 and later (protocol 2, e.g. the GPU
# machine's). Self-contained: needs only the built test binary and that python3.
#
#   tests/store/c10d_compat.sh <idist_store_c10d_store binary> [python3 with torch]
#
# Runs the binary's torch-server tests (set / get / add / check / wait / timeouts against torch's own
# server, a Python client of that server reading what idist wrote and writing what idist reads, torch's
# PrefixStore, the protocol override) once per server backend the torch has: the threaded one, and for
# torch 2.2 and later also the libuv one (torch 2.4 made it the default). Prints PASS or FAIL per
# backend and exits non-zero when one failed.
set -uo pipefail

binary=${1:?usage: c10d_compat.sh <idist_store_c10d_store binary> [python3 with torch]}
python=${2:-/usr/bin/python3}
[[ -x $binary ]] || { echo "FAIL: $binary is not an executable"; exit 1; }

version=$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null) || {
  echo "FAIL: $python cannot import torch"
  exit 1
}
echo "torch $version ($python)"
read -r major minor < <("$python" -c 'import torch; v = torch.__version__.split("."); print(v[0], v[1])')
if (( major < 2 || (major == 2 && minor < 1) )); then protocol=1; else protocol=2; fi
echo "expected protocol: $protocol"

# Server backends: each one explicitly where TCPStore takes use_libuv (torch 2.2 and later), else the one.
backends=("default")
if "$python" - <<'EOF' 2>/dev/null; then backends=("--libuv 0" "--libuv 1"); fi
import sys, torch.distributed as dist
try:
    dist.TCPStore("127.0.0.1", 0, None, True, use_libuv=False, wait_for_workers=False)
except TypeError:
    sys.exit(1)
EOF

failed=0
for backend in "${backends[@]}"; do
  args=""
  [[ $backend != default ]] && args=$backend
  log=$(mktemp /tmp/idist-c10d-compat-XXXXXX.log)
  if IDIST_TEST_TORCH_PYTHON=$python IDIST_TEST_C10D_SERVER_ARGS=$args CI=true \
      timeout -k 10 600 "$binary" --gtest_filter='C10dStoreTorch.*:C10dStore.*' >"$log" 2>&1; then
    echo "PASS: torch $version, server backend '$backend' ($(grep -c '^\[       OK \]' "$log") tests)"
  else
    echo "FAIL: torch $version, server backend '$backend'"
    grep -E '^\[  FAILED  \]|Failure|Expected|Which is|error' "$log" | head -40
    failed=1
  fi
  rm -f "$log"
done
exit $failed
