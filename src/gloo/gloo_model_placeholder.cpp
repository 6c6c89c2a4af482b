// Placeholder replaced by the GlooModel implementation.
#include "core/backend_factories.hpp"
#include "idist/error.hpp"
namespace idist::gloo_backend {
std::unique_ptr<ComputationModel> create(const InitOptions&) { throw BackendError("gloo backend not implemented yet"); }
}  // namespace idist::gloo_backend
