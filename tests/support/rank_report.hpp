#pragma once
// gtest reporting for multi-rank test binaries.

namespace idist::test {

/// On a rank other than 0, replaces gtest's report with one that prints only failed assertions,
/// prefixed with the rank, so that N ranks do not print N copies of the report and no failure is
/// lost. Call after InitGoogleTest and before RUN_ALL_TESTS. No-op on rank 0.
void report_only_failures_on_nonzero_rank(int rank);

}  // namespace idist::test
