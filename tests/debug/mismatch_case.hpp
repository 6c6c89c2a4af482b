#pragma once
// What one case of the mismatch matrix gives a rank (mismatch_case.cpp runs a case and reports it).
#include <optional>
#include <string>
#include <vector>

namespace idist::test {

/// The first 4 values of the buffer this rank got, and those the agreed collective (the one ranks
/// 0 .. n-2 issue) would have given it.
struct Outcome {
  std::vector<double> got, agreed;
};

/// Runs case `name` when it is one of the cases of the collectives ignite does not have (reduce,
/// gather, scatter, reduce_scatter(_v), all_to_all(_v); mismatch_beyond_ignite.cpp); std::nullopt for
/// any other name.
std::optional<Outcome> run_beyond_ignite_case(const std::string& name);

}  // namespace idist::test
