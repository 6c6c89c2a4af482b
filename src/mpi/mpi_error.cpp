// MPI error codes to exceptions.
#include "mpi/mpi_error.hpp"

#include <string>

#include <fmt/format.h>

#include "idist/error.hpp"

namespace idist::mpi_backend {

void throw_mpi_error(int rc, const char* fn, int rank) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  throw BackendError(len > 0
                         ? fmt::format("{} failed on rank {}: {}", fn, rank, std::string_view(text, std::size_t(len)))
                         : fmt::format("{} failed on rank {}: MPI error code {}", fn, rank, rc));
}

}  // namespace idist::mpi_backend
