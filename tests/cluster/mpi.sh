#!/usr/bin/env bash
# mpi on 2 emulated hosts: mpirun --host with a launcher agent (Open MPI's plm_rsh_agent) that runs
# each daemon on its host, Open MPI's TCP transport between the hosts. The layout test and the
# conformance suite on 2 x 2 ranks (with reduce, gather, scatter, reduce_scatter(_v), all_to_all(_v) and
# send / recv, required to have run), the mpi backend's own tests on 2 x 1 (its all-gathers across
# nodes as a direct exchange), the LibTorch suite on 2 x 1 (a build without it skips, or fails under
# CI=true).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
: "${MPIEXEC:=mpirun}"

cluster_up 2
h1="$(host_name 1)"
h2="$(host_name 2)"

# mpirun_on_cluster NAME SLOTS_PER_HOST BINARY: mpirun runs on host 1 and reaches host 2 through the agent.
mpirun_on_cluster() {
  local name="$1" slots="$2" bin="$3"
  start_on 1 "$LOGS/$name.mpirun" 600 env IDIST_TEST_BACKEND=mpi OMP_NUM_THREADS=1 \
    IDIST_TEST_EXPECT_NNODES=2 IDIST_TEST_EXPECT_NPROC="$slots" IDIST_TEST_HOST_PREFIX="$IDIST_CLUSTER" \
    "$MPIEXEC" $("$IDIST_SOURCE_DIR/scripts/cluster-agent.sh" --mpirun-flags) \
    --host "$h1:$slots,$h2:$slots" -np $((2 * slots)) \
    -x IDIST_TEST_BACKEND -x OMP_NUM_THREADS -x IDIST_TEST_EXPECT_NNODES -x IDIST_TEST_EXPECT_NPROC \
    -x IDIST_TEST_HOST_PREFIX "$bin"
  wait_all "$name" "$LAST_PID"
}

mpirun_on_cluster layout 2 "$IDIST_BUILD_DIR/tests/cluster/idist_cluster_layout_test"
mpirun_on_cluster conformance 2 "$IDIST_BUILD_DIR/tests/conformance/idist_conformance"
expect_suites conformance "${BEYOND_IGNITE_SUITES[@]}"
mpirun_on_cluster mpi_backend 1 "$IDIST_BUILD_DIR/tests/mpi/idist_mpi_backend_test"
if [ -x "$IDIST_BUILD_DIR/tests/torch/idist_torch_tests" ]; then
  mpirun_on_cluster torch 1 "$IDIST_BUILD_DIR/tests/torch/idist_torch_tests"
elif [ "$failures" -eq 0 ]; then
  # Not a pass: a part of the test did not run. Skipped with the reason, a failure under CI=true.
  log "layout and conformance passed; the LibTorch suite is not built"
  skip_test "the LibTorch suite (tests/torch/idist_torch_tests) is not built (IDIST_WITH_TORCH=OFF), so its cross-host run did not happen"
fi
finish
