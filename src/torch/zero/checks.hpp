#pragma once
// ZeroRedundancyOptimizer's argument checks. Each rank describes what it sees as text; the members
// exchange the texts once, and every member derives the same error from all of them.
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

namespace idist::detail {

/// What this rank alone can see wrong with its parameter list (or its factory, when `has_factory`
/// is false); empty when nothing.
std::string param_problem(const std::vector<at::Tensor>& params, bool has_factory);

/// The text a member contributes to the exchange: "!" + `problem` when there is one, else the
/// parameter count and one "dtype [sizes]" line per parameter.
std::string param_signature(const std::vector<at::Tensor>& params, const std::string& problem);

/// The error every member raises given every member's param_signature() (group rank order; `me`
/// is this rank's): this rank's own problem, else the first member's problem, else the first
/// difference from group rank 0's parameters. Empty when all agree.
std::string signature_error(const std::vector<std::string>& signatures, int me);

/// What is wrong with the optimizer the factory built for `shard` (null, no parameter group, other
/// tensors than the shard's); empty when nothing.
std::string local_optimizer_problem(const torch::optim::Optimizer* optimizer, const std::vector<at::Tensor>& shard);

/// The error every member raises given every member's problem (empty: none), in group rank order:
/// this rank's own, else the first member's named by its group rank. Empty when none has one.
/// `what` prefixes the message (e.g. "ZeroRedundancyOptimizer").
std::string first_problem(const std::vector<std::string>& problems, int me, const std::string& what);

}  // namespace idist::detail
