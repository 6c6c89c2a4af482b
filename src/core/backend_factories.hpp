#pragma once
// Entry points each backend folder (src/serial, src/mpi, src/gloo, src/nccl) defines for the registry.
#include <memory>

#include "core/backend.hpp"
#include "idist/config.hpp"
#include "idist/context.hpp"

namespace idist {
namespace serial_backend {
std::unique_ptr<core::Backend> create(const InitOptions& opts);
}  // namespace serial_backend
#if IDIST_HAVE_MPI
namespace mpi_backend {
std::unique_ptr<core::Backend> create(const InitOptions& opts);
std::unique_ptr<core::Backend> adopt();
bool has_context();
}  // namespace mpi_backend
#endif
#if IDIST_HAVE_GLOO
namespace gloo_backend {
std::unique_ptr<core::Backend> create(const InitOptions& opts);
}  // namespace gloo_backend
#endif
#if IDIST_HAVE_NCCL
namespace nccl_backend {
std::unique_ptr<core::Backend> create(const InitOptions& opts);
}  // namespace nccl_backend
#endif
}  // namespace idist
