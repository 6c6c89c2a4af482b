#pragma once
// Whether a CUDA device is usable, without requiring CUDA headers or a GPU.

namespace idist::backend_kit {

/// Number of CUDA devices visible to this process (0 when idist was built without CUDA, when no
/// driver is installed, or when CUDA_VISIBLE_DEVICES hides them all). Cached after the first call.
int cuda_device_count() noexcept;

}  // namespace idist::backend_kit
