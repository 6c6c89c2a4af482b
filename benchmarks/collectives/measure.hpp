#pragma once
// One row of the collectives benchmark: an operation at one message size, through idist and through
// the raw backend call, timed in alternating blocks and checked afterwards.
#include <cstddef>
#include <string>
#include <vector>

#include "common/raw_backend.hpp"
#include "common/stats.hpp"

namespace idist_bench {

/// A way of running the operation: idist's public call or a raw backend.
struct Variant {
  std::string name;           ///< "idist", "raw", "raw_nb"
  RawBackend* raw = nullptr;  ///< null for idist
};

/// How many iterations to run.
struct Schedule {
  int warmup = 0;  ///< per variant, untimed
  int iters = 1;   ///< per variant, timed
  int blocks = 1;  ///< the variants alternate in this many blocks
  /// > 0: every timed call starts from a barrier, with rank 0 calling this many microseconds after the
  /// others; each rank's time counts from rank 0's start (the ranks arriving apart, as after uneven work).
  int skew_us = 0;
};

/// Result of one (op, size): per variant, the summary of per-iteration times (maximum over ranks,
/// microseconds) and the number of wrong elements found by the check, summed over ranks.
struct Measurement {
  std::string op;
  std::size_t bytes = 0;  ///< message size as nccl-tests counts it (all_gather: the gathered output)
  std::size_t count = 0;  ///< elements per rank's input
  std::vector<Summary> times;
  std::vector<long long> wrong;
};

/// Runs `op` ("all_reduce", "all_gather", "broadcast", "barrier", "reduce_scatter", "all_to_all") on
/// float32 buffers of `bytes` bytes (reduce_scatter, all_to_all: the input, rounded down to world
/// size equal blocks) with every variant. Collective: every rank calls it with the same arguments. Returns
/// count 0 (nothing measured) when `bytes` is too small for one element per rank.
Measurement measure(const std::string& op, std::size_t bytes, const std::vector<Variant>& variants,
                    const Schedule& schedule);

/// nccl-tests' bus-bandwidth factor of `op` on `n` ranks: all_reduce 2(n-1)/n, all_gather (n-1)/n,
/// broadcast 1, reduce_scatter and all_to_all (n-1)/n, barrier 0.
double bus_factor(const std::string& op, int n);

}  // namespace idist_bench
