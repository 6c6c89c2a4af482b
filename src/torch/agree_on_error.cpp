#include "torch/agree_on_error.hpp"

#include <cstdint>

#include "idist/collectives.hpp"
#include "idist/context.hpp"
#include "idist/error.hpp"
#include "torch/comm/comm.hpp"

namespace idist::detail {

void agree_on_error(const std::string& error, const Group& group, const std::function<std::string(int)>& blame) {
  const int me = comm::process_group(group).rank();
  const std::int32_t failed = all_reduce(std::int32_t(error.empty() ? -1 : me), ReduceOp::Max, group);
  if (!error.empty()) throw ValueError(error);
  if (failed >= 0) throw ValueError(blame(failed));
}

}  // namespace idist::detail
