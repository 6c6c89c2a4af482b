#pragma once
/// @file
/// The options of PowerSGD gradient compression for auto_model (idist::comm_hooks::powersgd, in
/// idist/torch/comm_hooks.hpp): PyTorch's powerSGD_hook algorithm
/// (torch/distributed/algorithms/ddp_comm_hooks/powerSGD_hook.py) on idist's collectives, compiled into
/// idist_torch.
///
/// Per bucket and iteration, after start_powersgd_iter vanilla iterations:
/// 1. error feedback: the bucket gains the error left by the previous compression of this bucket;
/// 2. every gradient viewed as an n x m matrix M (n = first dimension) with (n + m) * r *
///    min_compression_rate < n * m is compressed (r = min(n, m, rank)); the others (1-D tensors
///    among them) are all-reduced uncompressed, concatenated behind the Ps (one all-reduce: on a
///    slow link a collective costs a round trip whatever its size);
/// 3. P = M Q (Q random and orthogonalised the first time, or always without warm_start; else last
///    iteration's Q, re-orthogonalised); all-reduce P (with the rest); orthogonalise P (Gram-Schmidt);
///    Q = M^T P; all-reduce Q; M = P Q^T / world size;
/// 4. the error is the bucket before compression minus after.
/// Costs per compressed matrix (n + m) * r elements on the wire instead of n * m.

#include <cstdint>

namespace idist {

/// Options of comm_hooks::powersgd, named and defaulted as PyTorch's PowerSGDState. comm_hooks::powersgd()
/// throws ValueError for matrix_approximation_rank < 1, start_powersgd_iter < 0,
/// min_compression_rate < 0, orthogonalization_epsilon < 0, or start_powersgd_iter <= 1 with
/// use_error_feedback or warm_start (PyTorch's rule: buckets settle after the first iteration).
struct PowerSGDOptions {
  /// Rank r of the approximation (PyTorch: matrix_approximation_rank). Higher: more accurate, more
  /// bytes ((n + m) * r per n x m gradient).
  int matrix_approximation_rank = 1;
  /// Iterations (backwards) of plain all-reduce before compression starts (start_powerSGD_iter).
  /// Must be > 1 with error feedback or warm start.
  std::int64_t start_powersgd_iter = 1000;
  /// A matrix is compressed only when (n + m) * r * min_compression_rate < n * m.
  double min_compression_rate = 2.0;
  /// Adds each bucket's compression error to its next gradients (use_error_feedback).
  bool use_error_feedback = true;
  /// Starts each iteration's power iteration from the previous Q (warm_start).
  bool warm_start = true;
  /// Added to column norms in the orthogonalisation; 0 divides by the norm alone
  /// (orthogonalization_epsilon).
  double orthogonalization_epsilon = 0.0;
  /// Seed of the random initial Q matrices, the same on every rank (random_seed).
  std::uint64_t random_seed = 0;
};

}  // namespace idist
