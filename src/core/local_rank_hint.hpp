#pragma once
// The local-rank hint of set_local_rank(), for the backends that create a context later.
#include <optional>

namespace idist::core {

/// The last value given to idist::set_local_rank(), or std::nullopt. Rank discovery uses it where the
/// environment gives no local rank (before guessing from host names); adopted contexts take it as is.
std::optional<int> local_rank_hint();

}  // namespace idist::core
