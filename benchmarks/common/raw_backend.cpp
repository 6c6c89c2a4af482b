#include "common/raw_backend.hpp"

#include "idist/config.hpp"

namespace idist_bench {

#if IDIST_HAVE_MPI
std::unique_ptr<RawBackend> make_raw_mpi(RawKind kind);
#endif
#if IDIST_HAVE_GLOO
std::unique_ptr<RawBackend> make_raw_gloo(idist::ComputationModel& model, RawKind kind);
#endif

std::unique_ptr<RawBackend> make_raw_backend(idist::ComputationModel& model, RawKind kind) {
  const auto backend = model.backend();
  if (!backend) return nullptr;
#if IDIST_HAVE_MPI
  if (*backend == "mpi") return make_raw_mpi(kind);
#endif
#if IDIST_HAVE_GLOO
  if (*backend == "gloo") return make_raw_gloo(model, kind);
#endif
  (void)kind;
  return nullptr;
}

}  // namespace idist_bench
