#pragma once
// What a communication hook's Work yields for its bucket: nothing (reduced in place) or a tensor to
// copy into the bucket. Read by the Reducer and by ZeRO's step hook, which waits the hook it wraps.
#include <cstddef>
#include <string_view>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include "idist/error.hpp"
#include "idist/work.hpp"

namespace idist::detail {

/// Waits `work`, then copies the tensor it yields (if any, and not `bucket` itself) into `bucket`.
/// `who` opens the error messages ("register_comm_hook").
/// @throws ValueError when the value is not a tensor, or not of the bucket's size and dtype.
inline void take_hook_result(Work& work, const at::Tensor& bucket, std::size_t index, std::string_view who) {
  work.wait();
  if (!work.has_value()) return;  // reduced in place
  at::Tensor out;
  try {
    out = work.value<at::Tensor>();
  } catch (const ValueError& e) {
    throw ValueError(fmt::format("{}: bucket {}: {}", who, index, e.what()));
  }
  if (!out.defined() || out.is_same(bucket)) return;
  if (out.numel() != bucket.numel() || out.scalar_type() != bucket.scalar_type())
    throw ValueError(
        fmt::format("{}: the hook returned a {} tensor of {} elements for bucket {}, expected {} with {} elements (the "
                    "bucket's buffer)",
                    who, c10::toString(out.scalar_type()), out.numel(), index, c10::toString(bucket.scalar_type()),
                    bucket.numel()));
  at::NoGradGuard no_grad;
  bucket.copy_(out.reshape({-1}));
}

}  // namespace idist::detail
