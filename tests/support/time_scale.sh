# Sourced by test scripts: the shell side of tests/support/time_scale.hpp. IDIST_TEST_TIME_SCALE
# (default 1, a number from 1 to 100) multiplies the UPPER bounds a script puts on durations (a job's
# budget, "raised within N ms"); lower bounds and the timeouts given to idist are never scaled. A bad
# value ends the script at once with the reason (exit 2).

# time_scale: prints the validated factor.
time_scale() {
  local s=${IDIST_TEST_TIME_SCALE:-1}
  if ! awk -v s="$s" 'BEGIN { exit !(s ~ /^[0-9]+(\.[0-9]+)?$/ && s + 0 >= 1 && s + 0 <= 100) }'; then
    echo "IDIST_TEST_TIME_SCALE should be a number from 1 to 100, but given '$s'" >&2
    exit 2
  fi
  echo "$s"
}

# scaled <bound>: the integer bound (seconds or milliseconds, as given) times the factor, rounded up.
scaled() {
  local s
  s=$(time_scale) || exit 2
  awk -v b="$1" -v s="$s" 'BEGIN { v = b * s; r = int(v); if (r < v) r++; print r }'
}

time_scale >/dev/null  # a bad value ends the sourcing script here, not in a later $(scaled ...)
