#include "core/debug/desync_check.hpp"

#include <fmt/format.h>

#include <vector>

#include "idist/error.hpp"

namespace idist::core::debug {

void check_same_call(ComputationModel& model, const Fingerprint& call, const Group& group, const std::string& name) {
  const std::size_t n = std::size_t(model.group_size(group));
  std::vector<Fingerprint> all(n);
  model.all_gather_blocking(ConstBuffer{&call, Fingerprint::kWords, DType::Int64},
                            Buffer{all.data(), n * Fingerprint::kWords, DType::Int64}, group);
  const std::string diff = compare(all, name);
  if (!diff.empty())
    throw DesyncError(fmt::format("{} on rank {}: {}; nothing was executed (IDIST_DISTRIBUTED_DEBUG=DETAIL)",
                                  to_string(Collective(call.collective)), call.rank, diff));
}

}  // namespace idist::core::debug
