// gtest main for multi-rank tests: initializes the backend named by IDIST_TEST_BACKEND with a short
// timeout (so a broken test fails instead of hanging), runs the tests on every rank, finalizes.
// Rank 0 prints the full report; other ranks print only their failures, prefixed with their rank.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "idist/idist.hpp"
#include "support/multirank.hpp"

namespace idist::test {

std::string backend_under_test() {
  const char* b = std::getenv("IDIST_TEST_BACKEND");
  return b && *b ? b : "serial";
}

namespace {

// Prints failed assertions of a non-zero rank, so that they are not lost when only rank 0 reports.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] FAILURE %s:%d\n%s\n", rank_, r.file_name() ? r.file_name() : "?", r.line_number(),
                   r.summary());
  }

 private:
  int rank_;
};

}  // namespace

}  // namespace idist::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const std::string backend = idist::test::backend_under_test();
  if (backend != "serial") {
    idist::InitOptions opts;
    opts.timeout = std::chrono::seconds(60);
    idist::initialize(backend, opts);
  }
  const int rank = idist::get_rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new idist::test::RankFailurePrinter(rank));
  }
  const int rc = RUN_ALL_TESTS();
  idist::finalize();
  return rc;
}
