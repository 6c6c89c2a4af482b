// The debug settings (one process): parsing, the environment against InitOptions, bad values, and
// the flight recorder's ring and JSON on the serial model.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "idist/idist.hpp"

namespace {

struct EnvGuard {  // sets a variable for one test and removes it afterwards
  const char* name;
  EnvGuard(const char* n, const char* v) : name(n) { ::setenv(n, v, 1); }
  ~EnvGuard() { ::unsetenv(name); }
};

TEST(DebugSettings, ParsesTorchNames) {
  EXPECT_EQ(idist::parse_debug_level("OFF"), idist::DebugLevel::Off);
  EXPECT_EQ(idist::parse_debug_level("INFO"), idist::DebugLevel::Info);
  EXPECT_EQ(idist::parse_debug_level("DETAIL"), idist::DebugLevel::Detail);
  EXPECT_EQ(idist::to_string(idist::DebugLevel::Detail), "DETAIL");
}

TEST(DebugSettings, InvalidEnvironmentNamesValueAndAcceptedOnes) {
  EnvGuard env("IDIST_DISTRIBUTED_DEBUG", "VERBOSE");
  for (const auto& backend : idist::available_backends()) {
    try {
      idist::initialize(backend, {.timeout = std::chrono::seconds(2), .rank = 0, .world_size = 1});
      idist::finalize();
      ADD_FAILURE() << backend << ": no error";
    } catch (const idist::ValueError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("IDIST_DISTRIBUTED_DEBUG"), std::string::npos) << what;
      EXPECT_NE(what.find("'VERBOSE'"), std::string::npos) << what;
      EXPECT_NE(what.find("OFF, INFO, DETAIL"), std::string::npos) << what;
    }
  }
}

TEST(DebugSettings, InvalidTraceBuffer) {
  EnvGuard env("IDIST_TRACE_BUFFER", "0");
  if (idist::available_backends().empty()) GTEST_SKIP() << "no backend";
  EXPECT_THROW(idist::initialize(idist::available_backends().back(), {.timeout = std::chrono::seconds(2)}),
               idist::ValueError);
}

TEST(DebugSettings, SerialIsOff) { EXPECT_EQ(idist::debug_level(), idist::DebugLevel::Off); }

TEST(DebugSettings, MonitoredBarrierSerialReturns) {
  idist::monitored_barrier(std::chrono::milliseconds(10));
  EXPECT_THROW(idist::monitored_barrier(std::chrono::milliseconds(-1)), idist::ValueError);
}

}  // namespace
