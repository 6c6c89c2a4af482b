// Consolidating and re-sharding the optimizer state through archives (see state_archive.hpp).
#include "torch/zero/state_archive.hpp"

#include <algorithm>
#include <cstddef>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/types.h>

#include "idist/error.hpp"
#include "torch/zero/archive_io.hpp"

namespace idist::detail {

namespace {

using torch::serialize::InputArchive;
using torch::serialize::OutputArchive;

constexpr const char* kOrder = "idist_zero_order";
constexpr const char* kNumels = "idist_zero_numels";
constexpr const char* kStub = "idist_zero_stub";

std::vector<std::int64_t> int64s(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kCPU, at::kLong).contiguous();
  return {c.data_ptr<std::int64_t>(), c.data_ptr<std::int64_t>() + c.numel()};
}

at::Tensor int64_tensor(const std::vector<std::int64_t>& v) {
  return at::tensor(at::ArrayRef<std::int64_t>(v), at::kLong);
}

// The parameter keys of an optimizer archive's "param_groups", all groups in order.
std::vector<std::string> param_keys(InputArchive& groups) {
  at::Tensor size;
  groups.read("param_groups/size", size);
  std::vector<std::string> keys;
  for (std::int64_t g = 0; g < size.item<std::int64_t>(); ++g) {
    InputArchive group;
    groups.read(fmt::format("param_groups/{}", g), group);
    at::Tensor n;
    group.read("params/size", n);
    for (std::int64_t j = 0; j < n.item<std::int64_t>(); ++j) {
      c10::IValue key;
      group.read(fmt::format("params/{}", j), key);
      keys.push_back(key.toStringRef());
    }
  }
  return keys;
}

// The option names of the first parameter group of an optimizer archive's "param_groups" (they
// tell the optimizer's kind: SGD's momentum, Adam's betas ...).
std::vector<std::string> option_names(InputArchive& groups) {
  InputArchive group, options;
  if (!groups.try_read("param_groups/0", group) || !group.try_read("options", options)) return {};
  std::vector<std::string> names = options.keys();
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

std::string member_archive(const torch::optim::Optimizer& local, const std::vector<std::int64_t>& order) {
  OutputArchive out;
  local.save(out);
  out.write(kOrder, int64_tensor(order));
  return archive_bytes(out);
}

void write_consolidated(OutputArchive& out, const std::vector<std::string>& members,
                        const torch::optim::OptimizerOptions& options, const std::vector<std::int64_t>& numels) {
  c10::IValue version;
  OutputArchive state(out.compilation_unit());
  for (const std::string& bytes : members) {
    InputArchive member;
    load_archive(member, bytes, c10::Device(c10::kCPU));
    member.read("pytorch_version", version);
    at::Tensor order_tensor;
    member.read(kOrder, order_tensor);
    const std::vector<std::int64_t> order = int64s(order_tensor);
    InputArchive groups;
    member.read("param_groups", groups);
    const std::vector<std::string> keys = param_keys(groups);
    if (keys.size() != order.size())
      throw ValueError(fmt::format("ZeroRedundancyOptimizer: a local optimizer saved {} parameters but holds {}",
                                   keys.size(), order.size()));
    InputArchive member_state;
    member.read("state", member_state);
    for (std::size_t j = 0; j < keys.size(); ++j) {
      InputArchive param_state;
      if (!member_state.try_read(keys[j], param_state)) continue;  // no state yet (no step, or no gradient)
      OutputArchive copy(out.compilation_unit());
      copy_archive(param_state, copy);
      state.write(std::to_string(order[j]), copy);
    }
  }
  out.write("pytorch_version", version);
  out.write("state", state);

  OutputArchive groups(out.compilation_unit());
  groups.write("param_groups/size", torch::tensor(std::int64_t{1}));
  OutputArchive group(out.compilation_unit());
  group.write("params/size", torch::tensor(std::int64_t(numels.size())));
  for (std::size_t i = 0; i < numels.size(); ++i)
    group.write(fmt::format("params/{}", i), c10::IValue(std::to_string(i)));
  OutputArchive options_archive(out.compilation_unit());
  options.serialize(options_archive);
  group.write("options", options_archive);
  groups.write("param_groups/0", group);
  out.write("param_groups", groups);
  out.write(kNumels, int64_tensor(numels));
}

void write_stub(OutputArchive& out, int holder) { out.write(kStub, c10::IValue(std::int64_t(holder))); }

std::string shard_archive(InputArchive& full, const torch::optim::Optimizer& local,
                          const std::vector<std::int64_t>& order, const std::vector<at::Tensor>& params) {
  c10::IValue value;
  if (full.try_read(kStub, value))
    throw ValueError(fmt::format(
        "the archive is the stub ZeroRedundancyOptimizer::save() writes on the members that do not hold the state; "
        "load the archive of group rank {}",
        value.toInt()));
  c10::IValue version;
  InputArchive groups;
  InputArchive state;
  if (!full.try_read("pytorch_version", version) || !full.try_read("param_groups", groups) ||
      !full.try_read("state", state))
    throw ValueError(
        "the archive holds no optimizer state (expected the entries pytorch_version, state and "
        "param_groups of torch::optim::Optimizer::save)");
  const std::vector<std::string> keys = param_keys(groups);
  if (keys.size() != params.size())
    throw ValueError(fmt::format("the archive holds the state of {} parameters, but this optimizer has {}", keys.size(),
                                 params.size()));
  at::Tensor numels;
  if (full.try_read(kNumels, numels)) {
    const std::vector<std::int64_t> saved = int64s(numels);
    for (std::size_t i = 0; i < params.size() && i < saved.size(); ++i)
      if (saved[i] != params[i].numel())
        throw ValueError(
            fmt::format("parameter {} has {} elements in the archive but {} here", i, saved[i], params[i].numel()));
  }

  // The keys the local optimizer gives its own parameters, from its own archive.
  OutputArchive own;
  local.save(own);
  InputArchive own_in;
  load_archive(own_in, archive_bytes(own));
  InputArchive own_groups;
  own_in.read("param_groups", own_groups);
  const std::vector<std::string> local_keys = param_keys(own_groups);
  if (const auto saved = option_names(groups), mine = option_names(own_groups); saved != mine)
    throw ValueError(
        fmt::format("the archive is the state of another kind of optimizer (options {}; the local optimizer's are {})",
                    fmt::join(saved, ", "), fmt::join(mine, ", ")));

  OutputArchive out;
  out.write("pytorch_version", version);
  OutputArchive shard_state(out.compilation_unit());
  for (std::size_t j = 0; j < local_keys.size() && j < order.size(); ++j) {
    const auto g = std::size_t(order[j]);
    InputArchive param_state;
    if (!state.try_read(keys[g], param_state)) continue;
    OutputArchive copy(out.compilation_unit());
    copy_archive(param_state, copy, params[g].device());
    shard_state.write(local_keys[j], copy);
  }
  out.write("state", shard_state);
  OutputArchive groups_copy(out.compilation_unit());
  copy_archive(own_groups, groups_copy);
  out.write("param_groups", groups_copy);
  return archive_bytes(out);
}

}  // namespace idist::detail
