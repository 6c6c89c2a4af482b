#pragma once
// Wall-clock bounds in tests, scaled for slow runs. IDIST_TEST_TIME_SCALE (default 1) multiplies every
// UPPER bound a test puts on how long something may take ("returns within 2 s", "raised at most 1 s
// after the timeout"); scripts/run-sanitizers.sh raises it for the instrumented builds. Lower bounds
// ("did not give up before the timeout") are the product's promises and are never scaled, and at
// scale 1 every bound is exactly as written. A value that is not a number in [1, 100] ends the test
// program at once with the reason: a typo must not silently run the suite unscaled.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace idist::test {

/// The factor from IDIST_TEST_TIME_SCALE: 1 when unset or empty; aborts on anything but a number in [1, 100].
inline double time_scale() {
  static const double scale = [] {
    const char* s = std::getenv("IDIST_TEST_TIME_SCALE");
    if (!s || !*s) return 1.0;
    char* end = nullptr;
    const double v = std::strtod(s, &end);
    if (*end != '\0' || !std::isfinite(v) || v < 1.0 || v > 100.0) {
      std::fprintf(stderr, "IDIST_TEST_TIME_SCALE should be a number from 1 to 100, but given '%s'\n", s);
      std::fflush(stderr);
      std::abort();
    }
    return v;
  }();
  return scale;
}

/// An upper bound on a duration, times time_scale() (rounded up to the bound's unit).
template <class Rep, class Period>
std::chrono::duration<Rep, Period> scaled(std::chrono::duration<Rep, Period> bound) {
  return std::chrono::duration<Rep, Period>(static_cast<Rep>(std::ceil(double(bound.count()) * time_scale())));
}

/// An upper bound in seconds or milliseconds given as a plain number, times time_scale().
inline double scaled(double bound) { return bound * time_scale(); }

}  // namespace idist::test
