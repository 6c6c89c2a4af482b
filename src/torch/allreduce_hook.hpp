#pragma once
// comm_hooks::allreduce()'s callable, which the Reducer recognises: while it is the Reducer's hook
// (the default, or registered), each gradient is divided by the world size as it is copied into its
// bucket (one pass over the gradient) and the bucket goes to launch(); called as a plain hook (wrapped
// by the user) it divides the bucket itself, a second pass.
#include <ATen/core/Tensor.h>

#include "idist/op_type.hpp"
#include "idist/torch/comm_hook.hpp"
#include "idist/work.hpp"
#include "torch/comm/comm.hpp"

namespace idist::detail {

struct AllreduceHook {
  /// Sum all-reduce of `bucket` over the world, whose gradients are already divided; `how` is
  /// comm::bucket_completion() for the Reducer.
  static Work launch(const at::Tensor& bucket, Completion how) {
    return comm::all_reduce(bucket, ReduceOp::Sum, Group{}, how);
  }
  /// Divides the bucket by the world size, then launch() (asynchronous).
  Work operator()(GradBucket& bucket) const;
};

/// `hook`'s AllreduceHook when it is comm_hooks::allreduce()'s, else null.
inline const AllreduceHook* as_allreduce_hook(const CommHook& hook) { return hook.target<AllreduceHook>(); }

}  // namespace idist::detail
