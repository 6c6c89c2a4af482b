#pragma once
// The consolidated optimizer state of ZeroRedundancyOptimizer, in torch::optim::Optimizer::save's
// layout for one parameter group over all the parameters: "pytorch_version"; "state" with one
// nested archive per parameter that has state, under the key "<global index>"; "param_groups" with
// the keys "0" .. "P-1" and the options. Plus "idist_zero_numels" (each parameter's element count),
// which plain optimizers ignore. A member's local optimizer travels as its own save() archive plus
// "idist_zero_order" (the global index of each of its parameters, in its parameter-group order).
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

namespace idist::detail {

/// `local`'s save() archive with `order` added, as bytes.
std::string member_archive(const torch::optim::Optimizer& local, const std::vector<std::int64_t>& order);

/// Writes the consolidated state of every member's member_archive() bytes, with `options` as the
/// options of the single parameter group and `numels` the parameters' element counts.
void write_consolidated(torch::serialize::OutputArchive& out, const std::vector<std::string>& members,
                        const torch::optim::OptimizerOptions& options, const std::vector<std::int64_t>& numels);

/// Writes the stub ZeroRedundancyOptimizer::save() leaves on the members that do not hold the state.
void write_stub(torch::serialize::OutputArchive& out, int holder);

/// From a consolidated (or plain torch::optim) archive, the archive `local` loads for its shard:
/// `order` gives the global index of each of local's parameters (parameter-group order), `params`
/// all the parameters (their counts are checked against idist_zero_numels, their devices receive
/// the state). Returns its bytes.
/// @throws ValueError when `full` is a stub, holds no optimizer state, or another number of
///         parameters or other element counts; c10::Error when an entry has an unexpected type.
std::string shard_archive(torch::serialize::InputArchive& full, const torch::optim::Optimizer& local,
                          const std::vector<std::int64_t>& order, const std::vector<at::Tensor>& params);

}  // namespace idist::detail
