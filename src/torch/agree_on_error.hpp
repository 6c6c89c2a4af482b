#pragma once
// "All ranks agree on an error": a check that may fail on some ranks only (a bad argument, a model
// that differs) raises on every rank, so that none is left waiting in the next collective.
#include <functional>
#include <string>

#include "idist/group.hpp"

namespace idist::detail {

/// One all-reduce (MAX) over `group` of the highest position in the group whose `error` is not
/// empty. Returns when no rank failed; otherwise a rank with an error throws ValueError(`error`) and
/// the others throw ValueError(`blame(position)`), naming the failed rank. Collective over `group`.
void agree_on_error(const std::string& error, const Group& group, const std::function<std::string(int)>& blame);

}  // namespace idist::detail
