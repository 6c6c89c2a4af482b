// Placeholder replaced by the NCCLModel implementation.
#include "core/backend_factories.hpp"
#include "idist/error.hpp"
namespace idist::nccl_backend {
std::unique_ptr<ComputationModel> create(const InitOptions&) { throw BackendError("nccl backend not implemented yet"); }
}  // namespace idist::nccl_backend
