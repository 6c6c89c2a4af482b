#pragma once
// How the communication layer (comm.hpp) hands tensors to a backend: a tensor that is not contiguous,
// or not where the backend reads, is staged in a contiguous copy on the communication device and
// written back after the operation. Private to idist_torch: the staging is the layer's;
// checked_dtype and shape_str also serve the callers' argument checks and messages.
#include <string>
#include <string_view>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "idist/detail/format.hpp"
#include "idist/error.hpp"
#include "idist/torch/dtype.hpp"
#include "idist/work.hpp"
#include "torch/cuda_streams.hpp"

namespace idist::detail {

/// "[2, 3, 4]", for messages (c10's own printing of a size list).
inline std::string shape_str(c10::IntArrayRef sizes) { return c10::str(sizes); }

/// Throws ValueError unless `t` is defined and has a supported dtype. `fn` names the collective.
inline DType checked_dtype(const at::Tensor& t, std::string_view fn) {
  if (!t.defined()) throw ValueError(format_message("{}: tensor is undefined; expected a defined tensor", fn));
  return to_dtype(t.scalar_type());
}

/// A tensor's data as the backend wants it: `buffer` is contiguous on the communication device;
/// `copied` says whether it is a staging copy that has to be written back into the user's tensor.
struct Staged {
  at::Tensor buffer;
  bool copied = false;
};

/// Stages `t` for a collective on device `dev` (no copy when it already qualifies).
/// A buffer on a GPU is held until the collective it is staged for completed there.
inline Staged stage(const at::Tensor& t, c10::Device dev) {
  at::Tensor d = t.detach();  // shares storage; keeps the staging copy out of the autograd graph
  Staged s = d.device() == dev && d.is_contiguous() ? Staged{d, false} : Staged{d.to(dev).contiguous(), true};
  hold_until_collective_done(s.buffer);
  return s;
}

/// Adds to `w` the continuation that writes a staging copy back into `t` (or only keeps the
/// tensor alive until the Work completes when no copy was made).
inline Work& finish_into(Work& w, const at::Tensor& t, const Staged& s) {
  if (s.copied) {
    w.then([dst = t.detach(), src = s.buffer]() mutable {
      at::NoGradGuard no_grad;
      dst.copy_(src);
    });
  } else {
    w.then([keep = s.buffer] { (void)keep; });
  }
  return w;
}

/// Writes a staging copy back into the user's tensor after a blocking collective.
inline void copy_back(const at::Tensor& t, const Staged& s) {
  if (!s.copied) return;
  at::NoGradGuard no_grad;
  t.detach().copy_(s.buffer);
}

}  // namespace idist::detail
