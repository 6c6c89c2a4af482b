#pragma once
// Whether Open MPI's shared-memory transport copies large messages once, read from the MPI tools
// interface.

namespace idist::mpi_backend {

/// True when Open MPI's shared-memory transport (vader) moves large messages with a single copy
/// (CMA, XPMEM, KNEM): the control variable btl_vader_single_copy_mechanism names a mechanism other
/// than "none". False when it is "none", when the variable does not exist (another MPI, another
/// transport) or cannot be read. Call between MPI_Init and MPI_Finalize; it opens and closes its own
/// MPI_T session.
bool shared_memory_single_copy();

}  // namespace idist::mpi_backend
