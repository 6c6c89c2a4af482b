#pragma once
// The mark of a built-in communication hook whose result does not depend on how the parameters are
// grouped into buckets (it works element by element and keeps no per-bucket state), so that the
// Reducer may keep tuning the bucket cap after it is registered.
#include <functional>
#include <utility>

#include "idist/torch/comm_hook.hpp"
#include "torch/allreduce_hook.hpp"

namespace idist::detail {

/// A CommHook wrapped so that `hook.target<LayoutFreeHook>()` finds it.
struct LayoutFreeHook {
  std::function<Work(GradBucket&)> run;
  Work operator()(GradBucket& bucket) const { return run(bucket); }
};

/// Whether `hook` is a LayoutFreeHook or comm_hooks::allreduce()'s AllreduceHook.
inline bool is_layout_free(const CommHook& hook) {
  return hook.target<LayoutFreeHook>() != nullptr || as_allreduce_hook(hook) != nullptr;
}

}  // namespace idist::detail
