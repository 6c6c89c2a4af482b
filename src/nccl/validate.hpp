#pragma once
// The nccl collectives' buffer placement rule (pure, no device needed). The checks every backend
// shares (counts, roots) are in core/collective_checks.hpp.
#include <string_view>

#include "idist/types.hpp"

namespace idist::nccl_backend {

/// Throws ValueError when `buf` is marked as CUDA memory of a device other than `mine`, naming the
/// collective `op`, the argument `arg` and both devices. Host buffers (device cpu) are accepted:
/// the backend stages them through device memory.
void check_buffer_device(std::string_view op, std::string_view arg, const Device& buf, const Device& mine);

}  // namespace idist::nccl_backend
