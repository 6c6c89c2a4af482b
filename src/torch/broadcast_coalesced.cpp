// One broadcast per dtype and device (see idist/torch/broadcast_coalesced.hpp).
#include "torch/broadcast_coalesced.hpp"

#include <cstdint>
#include <map>
#include <string>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "idist/torch/collectives.hpp"

namespace idist::detail {

void broadcast_coalesced(const std::vector<at::Tensor>& tensors, int src) {
  std::map<std::string, std::vector<at::Tensor>> groups;  // ordered: the same order on every rank
  for (const auto& t : tensors)
    if (t.defined() && t.numel() > 0)
      groups[std::string(c10::toString(t.scalar_type())) + "@" + t.device().str()].push_back(t.detach());
  at::NoGradGuard no_grad;
  for (auto& [key, group] : groups) {
    std::vector<at::Tensor> parts;
    for (const auto& t : group) parts.push_back(t.reshape({-1}));
    at::Tensor flat = at::cat(parts);
    idist::broadcast(flat, src);
    std::int64_t offset = 0;
    for (auto& t : group) {
      t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
}

}  // namespace idist::detail
