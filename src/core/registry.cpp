#include "core/registry.hpp"

#include <array>

#include "core/backend_factories.hpp"

namespace idist::core {

namespace {
constexpr std::array kBackends = {
#if IDIST_HAVE_NCCL
    BackendEntry{"nccl", &nccl_backend::create, nullptr, nullptr},
#endif
#if IDIST_HAVE_GLOO
    BackendEntry{"gloo", &gloo_backend::create, nullptr, nullptr},
#endif
#if IDIST_HAVE_MPI
    BackendEntry{"mpi", &mpi_backend::create, &mpi_backend::adopt, &mpi_backend::has_context},
#endif
    BackendEntry{"", nullptr, nullptr, nullptr},  // sentinel keeps the array non-empty in a serial-only build
};

constexpr BackendEntry kSerial{"serial", &serial_backend::create, nullptr};
}  // namespace

std::span<const BackendEntry> backends() { return std::span(kBackends).first(kBackends.size() - 1); }

const BackendEntry& serial() { return kSerial; }

}  // namespace idist::core
