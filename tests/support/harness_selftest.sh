#!/usr/bin/env bash
# The test harness's own rules, checked: expect_exit.sh passes only on the expected exit status AND
# pattern with no failure reported by any rank; the multi-rank fail pattern of tests/CMakeLists.txt
# matches every rank's failure line; skip.sh skips outside CI and fails under CI=true; time_scale.sh
# scales and validates; a launcher fault in mpi_launcher.sh fails the job and is logged (rerun only with
# IDIST_TEST_RERUN=1 outside CI); check_skips.py allows a gtest skip only when listed with a
# registration whose record shows the test passed; expect_accuracy.sh checks status and accuracy.
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
check "skip.sh --because: Skipped outside CI (77)" 77 env -u CI bash "$sk" --because "no x"
check "skip.sh --because: failed under CI=true" 1 env CI=true bash "$sk" --because "no x"
check "skip.sh: runs the command when the file is there" 5 env CI=true bash "$sk" --unless-file "$sk" "no x" -- bash -c 'exit 5'

ts="$here/time_scale.sh"
check "time_scale.sh: unset leaves 30 as 30" 0 test "$(env -u IDIST_TEST_TIME_SCALE bash -c ". '$ts'; scaled 30")" = 30
check "time_scale.sh: 2.5 makes 30 into 75" 0 test "$(IDIST_TEST_TIME_SCALE=2.5 bash -c ". '$ts'; scaled 30")" = 75
check "time_scale.sh: a bad value ends the sourcing script" 2 env IDIST_TEST_TIME_SCALE=fast bash -c ". '$ts'; exit 0"
check "time_scale.sh: below 1 is refused" 2 env IDIST_TEST_TIME_SCALE=0.5 bash -c ". '$ts'; exit 0"

# mpi_launcher.sh: a launcher that "crashes" (a fake mpirun printing an mpirun backtrace and dying by
# SIGSEGV, counting its starts) fails the job with the launcher's status and is logged; it runs again
# only with IDIST_TEST_RERUN=1 outside CI.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/mpirun" <<'FAKE'
#!/usr/bin/env bash
echo start >>"$(dirname "$0")/starts"
echo "[host:1] [ 6] mpirun(+0x13ea)[0x5561424c63ea]"
kill -SEGV $$
FAKE
chmod +x "$tmp/mpirun"
launch() {  # launch <env...>: one job through run_job_retried; prints "<rc> <starts> <log lines>"
  rm -f "$tmp/starts" "$tmp/reruns.log"
  (
    . "$here/mpi_launcher.sh"
    export IDIST_TEST_NAME=selftest IDIST_TEST_RERUN_LOG="$tmp/reruns.log"
    for v in "$@"; do export "${v?}"; done
    run_job_retried 10 /bin/true "fake case" "$tmp/mpirun" >/dev/null 2>&1
    echo "$rc"
  ) | tr -d '\n'
  echo " $(wc -l <"$tmp/starts" 2>/dev/null || echo 0) $(wc -l <"$tmp/reruns.log" 2>/dev/null || echo 0)"
}
check "mpi_launcher.sh: a launcher crash fails the job (status 250), started once, logged once" 0 \
  test "$(launch CI= IDIST_TEST_RERUN=0)" = "250 1 1"
check "mpi_launcher.sh: IDIST_TEST_RERUN=1 runs it once more, both faults logged" 0 \
  test "$(launch CI= IDIST_TEST_RERUN=1)" = "250 2 2"
check "mpi_launcher.sh: under CI=true IDIST_TEST_RERUN=1 reruns nothing" 0 \
  test "$(launch CI=true IDIST_TEST_RERUN=1)" = "250 1 1"
launch CI= IDIST_TEST_RERUN=0 >/dev/null
check "mpi_launcher.sh: the log names the test, the case, the reason and the action" 0 \
  grep -q "test=selftest case=fake case reason=mpiexec crashed (exit 139) while ending the job action=failed" "$tmp/reruns.log"

# check_skips.py against a fake build: registrations in a CTestTestfile.cmake, records as the listener
# writes them.
fake="$tmp/build"
mkdir -p "$fake/test-records/reg_small" "$fake/test-records/reg_big" "$fake/test-records/reg_quiet"
printf 'add_test(reg_small /bin/true)\nadd_test(reg_big /bin/true)\nadd_test(reg_quiet /bin/true)\n' >"$fake/CTestTestfile.cmake"
printf 'PASSED\tS.A\t\nSKIPPED\tS.B\tneeds 3 ranks\n' >"$fake/test-records/reg_small/1.rec"
printf 'PASSED\tS.A\t\nPASSED\tS.B\t\n' >"$fake/test-records/reg_big/2.rec"
printf 'PASSED\tS.B\t\n' >"$fake/test-records/reg_big/3.rec"
printf 'PASSED\tS.A\t\n' >"$fake/test-records/reg_quiet/4.rec"
cs="$here/check_skips.py"
echo "S.B | reg_small | needs 3 ranks | reg_big" >"$tmp/allowed"
check "check_skips.py: a listed skip whose runner passed the test" 0 python3 "$cs" --ci "$tmp/allowed" "$fake"
: >"$tmp/empty"
check "check_skips.py: an unlisted skip fails under --ci" 1 python3 "$cs" --ci "$tmp/empty" "$fake"
check "check_skips.py: an unlisted skip only warns without --ci" 0 python3 "$cs" "$tmp/empty" "$fake"
echo "S.B | reg_small | needs 3 ranks | reg_quiet" >"$tmp/allowed"
check "check_skips.py: a runner that did not run the test fails" 1 python3 "$cs" --ci "$tmp/allowed" "$fake"
echo "S.B | reg_small | needs 2 ranks | reg_big" >"$tmp/allowed"
check "check_skips.py: another reason than the listed one fails" 1 python3 "$cs" --ci "$tmp/allowed" "$fake"
echo "S.B | reg_small | needs 3 ranks | reg_gone" >"$tmp/allowed"
check "check_skips.py: a runner that is not registered fails" 1 python3 "$cs" --ci "$tmp/allowed" "$fake"
printf 'SKIPPED\tS.B\tneeds 3 ranks\n' >>"$fake/test-records/reg_big/3.rec"
echo "S.B | reg_small | needs 3 ranks | reg_big" >"$tmp/allowed"
check "check_skips.py: a runner where some rank skipped the test fails" 1 python3 "$cs" --ci "$tmp/allowed" "$fake"

ea="$here/expect_accuracy.sh"
check "expect_accuracy.sh: status 0 and accuracy above the bound" 0 bash "$ea" 0.7 echo '{"test_accuracy": 0.81}'
check "expect_accuracy.sh: accuracy below the bound fails" 1 bash "$ea" 0.7 echo '{"test_accuracy": 0.69}'
check "expect_accuracy.sh: a non-zero status fails despite the accuracy" 1 \
  bash "$ea" 0.7 bash -c 'echo "{\"test_accuracy\": 0.9}"; exit 3'
check "expect_accuracy.sh: no accuracy in the output fails" 1 bash "$ea" 0.7 echo "no report"

[ $failed -eq 0 ] && echo "test harness: every rule holds"
exit $failed
