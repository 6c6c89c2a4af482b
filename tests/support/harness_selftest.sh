#!/usr/bin/env bash
# The test harness's own rules, checked: expect_exit.sh passes only on the expected exit status AND
# pattern with no failure reported by any rank; the multi-rank fail pattern of tests/CMakeLists.txt
# matches every rank's failure line; skip.sh skips outside CI and fails under CI=true; time_scale.sh
# scales and validates; a mpi job rerun by mpi_launcher.sh is logged.
#   harness_selftest.sh <IDIST_TEST_FAIL_REGEX>
set -u
here="$(cd "$(dirname "$0")" && pwd)"
fail_regex=$1
failed=0
check() {  # check <description> <expected status> <command...>
  local what=$1 want=$2 got
  shift 2
  "$@" >/dev/null 2>&1
  got=$?
  if [ "$got" -ne "$want" ]; then
    echo "FAIL: $what: exit status $got, expected $want"
    failed=1
  else
    echo "ok: $what"
  fi
}
ee="$here/expect_exit.sh"
check "expect_exit: status and pattern as expected" 0 bash "$ee" 3 '^done$' bash -c 'echo done; exit 3'
check "expect_exit: the wrong exit status fails" 1 bash "$ee" 3 '^done$' bash -c 'echo done; exit 0'
check "expect_exit: a missing pattern fails" 1 bash "$ee" 3 '^done$' bash -c 'echo other; exit 3'
check "expect_exit: a non-zero rank's failure fails" 1 bash "$ee" 3 '^done$' \
  bash -c 'echo done; echo "[rank 2] FAILURE /src/x_test.cpp:12"; exit 3'
check "expect_exit: rank 0's gtest failure fails" 1 bash "$ee" 3 '^done$' \
  bash -c 'echo done; echo "[  FAILED  ] Suite.Case (3 ms)"; exit 3'
check "expect_exit: a rank killed by a signal fails" 1 bash "$ee" 3 '^done$' \
  bash -c 'echo done; echo "[host:123] Signal: Segmentation fault (11)"; exit 3'

for line in "[rank 1] FAILURE /work/tests/torch/join_test.cpp:88" "[  FAILED  ] Join.UnevenInputs (12 ms)"; do
  check "the multi-rank fail pattern matches '$line'" 0 grep -Eq -- "$fail_regex" <<<"$line"
done
check "the multi-rank fail pattern leaves '[       OK ] Join.X' alone" 1 grep -Eq -- "$fail_regex" <<<"[       OK ] Join.X (3 ms)"

sk="$here/skip.sh"
check "skip.sh outside CI: Skipped (77)" 77 env -u CI bash "$sk" --unless-file /nonexistent/x "no x" -- true
check "skip.sh under CI=true: failed" 1 env CI=true bash "$sk" --unless-file /nonexistent/x "no x" -- true
check "skip.sh: runs the command when the file is there" 5 env CI=true bash "$sk" --unless-file "$sk" "no x" -- bash -c 'exit 5'

ts="$here/time_scale.sh"
check "time_scale.sh: unset leaves 30 as 30" 0 test "$(env -u IDIST_TEST_TIME_SCALE bash -c ". '$ts'; scaled 30")" = 30
check "time_scale.sh: 2.5 makes 30 into 75" 0 test "$(IDIST_TEST_TIME_SCALE=2.5 bash -c ". '$ts'; scaled 30")" = 75
check "time_scale.sh: a bad value ends the sourcing script" 2 env IDIST_TEST_TIME_SCALE=fast bash -c ". '$ts'; exit 0"
check "time_scale.sh: below 1 is refused" 2 env IDIST_TEST_TIME_SCALE=0.5 bash -c ". '$ts'; exit 0"

# mpi_launcher.sh: a launcher that "crashes" (a fake mpirun printing an mpirun backtrace and dying by
# SIGSEGV) is rerun once and the rerun logged; the second fault is the job's outcome.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/mpirun" <<'FAKE'
#!/usr/bin/env bash
echo "[host:1] [ 6] mpirun(+0x13ea)[0x5561424c63ea]"
kill -SEGV $$
FAKE
chmod +x "$tmp/mpirun"
(
  . "$here/mpi_launcher.sh"
  IDIST_TEST_NAME=selftest IDIST_TEST_RERUN_LOG="$tmp/reruns.log" run_job_retried 10 /bin/true "fake case" "$tmp/mpirun"
  [ "$rc" -eq 139 ]
) >/dev/null 2>&1
check "mpi_launcher.sh: a launcher crash leaves the second attempt's status" 0 test $? -eq 0
check "mpi_launcher.sh: exactly one rerun, logged" 0 test "$(wc -l <"$tmp/reruns.log" 2>/dev/null)" = 1
check "mpi_launcher.sh: the log names the test and the case" 0 grep -q "test=selftest case=fake case reason=mpiexec crashed" "$tmp/reruns.log"

[ $failed -eq 0 ] && echo "test harness: every rule holds"
exit $failed
