// ZeroRedundancyOptimizer's argument checks (see checks.hpp).
#include "torch/zero/checks.hpp"

#include <cstddef>
#include <unordered_map>
#include <unordered_set>

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "idist/error.hpp"
#include "idist/torch/collectives.hpp"
#include "idist/torch/dtype.hpp"
#include "torch/comm/staging.hpp"

namespace idist::detail {

namespace {

constexpr const char* kWhat = "ZeroRedundancyOptimizer";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(text.substr(start, nl - start));
  return lines;
}

}  // namespace

std::string param_problem(const std::vector<at::Tensor>& params, bool has_factory) {
  if (!has_factory) return "the factory is empty; expected a callable that builds the local optimizer";
  if (params.empty()) return "the parameter list is empty; expected at least one tensor";
  std::unordered_map<const void*, std::size_t> seen;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    if (!p.defined()) return fmt::format("parameter {} is undefined; expected a defined tensor", i);
    if (p.is_sparse()) return fmt::format("parameter {} is sparse; expected dense tensors", i);
    if (!p.is_leaf())
      return fmt::format(
          "parameter {} is not a leaf tensor (it is computed from others); expected the model's parameters", i);
    try {
      to_dtype(p.scalar_type());
    } catch (const ValueError& e) {
      return fmt::format("parameter {}: {}", i, e.what());
    }
    const at::Tensor& p0 = params.front();
    if (p.scalar_type() != p0.scalar_type())
      return fmt::format("parameter {} has dtype {} but parameter 0 has {}; expected one dtype for all parameters", i,
                         c10::toString(p.scalar_type()), c10::toString(p0.scalar_type()));
    if (p.device() != p0.device())
      return fmt::format("parameter {} is on {} but parameter 0 is on {}; expected one device for all parameters", i,
                         p.device().str(), p0.device().str());
    const auto [it, fresh] = seen.emplace(p.unsafeGetTensorImpl(), i);
    if (!fresh)
      return fmt::format("parameter {} is the same tensor as parameter {}; expected distinct tensors", i, it->second);
  }
  return {};
}

std::string param_signature(const std::vector<at::Tensor>& params, const std::string& problem) {
  if (!problem.empty()) return "!" + problem;
  std::string text = fmt::format("{}\n", params.size());
  for (const at::Tensor& p : params)
    text += fmt::format("{} {}\n", c10::toString(p.scalar_type()), shape_str(p.sizes()));
  return text;
}

std::string signature_error(const std::vector<std::string>& signatures, int me) {
  std::vector<std::string> problems(signatures.size());
  for (std::size_t r = 0; r < signatures.size(); ++r)
    if (!signatures[r].empty() && signatures[r].front() == '!') problems[r] = signatures[r].substr(1);
  if (std::string e = first_problem(problems, me, kWhat); !e.empty()) return e;
  const std::vector<std::string> ref = lines_of(signatures.front());
  for (std::size_t r = 1; r < signatures.size(); ++r) {
    const std::vector<std::string> mine = lines_of(signatures[r]);
    if (mine.front() != ref.front())
      return fmt::format(
          "{}: the parameters differ across the group: group rank {} has {} parameters but group rank 0 has {}", kWhat,
          r, mine.front(), ref.front());
    for (std::size_t k = 1; k < mine.size(); ++k)
      if (mine[k] != ref[k])
        return fmt::format(
            "{}: the parameters differ across the group: parameter {} is {} on group rank {} but {} on group rank 0",
            kWhat, k - 1, mine[k], r, ref[k]);
  }
  return {};
}

std::string local_optimizer_problem(const torch::optim::Optimizer* optimizer, const std::vector<at::Tensor>& shard) {
  if (!optimizer) return "the factory returned a null optimizer; expected one over the shard it was given";
  if (optimizer->param_groups().empty() || !optimizer->param_groups().front().has_options())
    return "the factory's optimizer has no parameter group with options; expected one holding the shard it was given";
  std::unordered_set<const void*> in_shard;
  for (const at::Tensor& p : shard) in_shard.insert(p.unsafeGetTensorImpl());
  std::unordered_set<const void*> held;
  std::size_t foreign = 0;
  for (const auto& group : optimizer->param_groups())
    for (const at::Tensor& p : group.params()) {
      held.insert(p.unsafeGetTensorImpl());
      if (!in_shard.count(p.unsafeGetTensorImpl())) ++foreign;
    }
  if (foreign > 0 || held.size() != in_shard.size())
    return fmt::format(
        "the factory's optimizer holds {} distinct tensors, {} of them outside the shard of {} parameters it was "
        "given; "
        "expected exactly the shard's tensors (not copies)",
        held.size(), foreign, shard.size());
  return {};
}

std::string first_problem(const std::vector<std::string>& problems, int me, const std::string& what) {
  if (!problems[std::size_t(me)].empty()) return fmt::format("{}: {}", what, problems[std::size_t(me)]);
  for (std::size_t r = 0; r < problems.size(); ++r)
    if (!problems[r].empty()) return fmt::format("{}: group rank {}: {}", what, r, problems[r]);
  return {};
}

}  // namespace idist::detail
