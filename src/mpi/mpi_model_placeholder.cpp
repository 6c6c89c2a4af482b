// Placeholder replaced by the NativeMPIModel implementation.
#include "core/backend_factories.hpp"
#include "idist/error.hpp"
namespace idist::mpi_backend {
std::unique_ptr<ComputationModel> create(const InitOptions&) { throw BackendError("mpi backend not implemented yet"); }
std::unique_ptr<ComputationModel> adopt() { return nullptr; }
}  // namespace idist::mpi_backend
