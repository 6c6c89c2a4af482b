// Every gtest binary of the suite carries this listener (tests/CMakeLists.txt links it into
// GTest::gtest_main, the multi-rank main and the mpi tests' own mains). Where the ctest registration
// names a folder in IDIST_TEST_RECORD, each process appends one line per finished test to
// <folder>/<pid>.rec:  <PASSED|SKIPPED|FAILED> TAB <Suite.Name> TAB <skip reason>.
// scripts/run-tests.sh reads them: a skip is allowed only when tests/support/allowed_skips.txt lists
// it together with a registration whose record shows the test passed. A line is written as each test
// ends, so a process that dies later keeps what it ran.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace {

// One line: tabs and newlines in the reason become spaces, so that a line stays one record.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

class Recorder : public ::testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const ::testing::TestInfo& info) override {
    const char* dir = std::getenv("IDIST_TEST_RECORD");
    if (!dir || !*dir) return;
    const ::testing::TestResult& r = *info.result();
    const char* outcome = r.Skipped() ? "SKIPPED" : r.Failed() ? "FAILED" : "PASSED";
    std::string reason;
    for (int i = 0; i < r.total_part_count(); ++i)
      if (r.GetTestPartResult(i).skipped()) reason = r.GetTestPartResult(i).message();
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    const std::string path = std::string(dir) + "/" + std::to_string(::getpid()) + ".rec";
    if (FILE* f = std::fopen(path.c_str(), "a")) {
      std::fprintf(f, "%s\t%s.%s\t%s\n", outcome, info.test_suite_name(), info.name(), one_line(reason).c_str());
      std::fclose(f);
    } else {
      std::fprintf(stderr, "IDIST_TEST_RECORD: cannot write %s\n", path.c_str());
    }
  }
};

// Appended before main(); InitGoogleTest keeps listeners it did not create.
const bool registered = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new Recorder);
  return true;
}();

}  // namespace

// Named by the linker option that pulls this object out of its static library (nothing calls it).
extern "C" const bool* idist_test_record_anchor() { return &registered; }
