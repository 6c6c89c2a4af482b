// MPI error codes to exceptions.
#include "mpi/error.hpp"

#include <string>

#include "idist/error.hpp"

namespace idist::mpi_backend {

void throw_mpi_error(int rc, const char* fn, int rank) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  std::string msg = std::string(fn) + " failed on rank " + std::to_string(rank) + ": ";
  msg += len > 0 ? std::string(text, std::size_t(len)) : "MPI error code " + std::to_string(rc);
  throw BackendError(msg);
}

}  // namespace idist::mpi_backend
