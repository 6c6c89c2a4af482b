// Node layout from a shared-memory split of the world communicator.
#include "mpi/mpi_topology.hpp"

#include "mpi/mpi_error.hpp"

namespace idist::mpi_backend {

NodeLayout measure_node_layout(MPI_Comm world, int rank) {
  NodeLayout layout;
  MpiCallGuard guard;

  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node), "MPI_Comm_split_type", rank);
  MPI_Comm leaders = MPI_COMM_NULL;
  int rc = MPI_Comm_rank(node, &layout.local_rank);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_size(node, &layout.nproc_per_node);
  // Key = world rank, so leaders (and therefore nodes) are ordered by their lowest world rank.
  if (rc == MPI_SUCCESS) rc = MPI_Comm_split(world, layout.local_rank == 0 ? 0 : MPI_UNDEFINED, rank, &leaders);
  int ids[2] = {0, 1};  // node rank, node count
  if (rc == MPI_SUCCESS && leaders != MPI_COMM_NULL) {
    rc = MPI_Comm_rank(leaders, &ids[0]);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_size(leaders, &ids[1]);
  }
  if (rc == MPI_SUCCESS) rc = MPI_Bcast(ids, 2, MPI_INT, 0, node);
  if (leaders != MPI_COMM_NULL) MPI_Comm_free(&leaders);
  MPI_Comm_free(&node);
  check_mpi(rc, "measuring the node layout (MPI_Comm_split / MPI_Bcast)", rank);
  layout.node_rank = ids[0];
  layout.nnodes = ids[1];
  return layout;
}

}  // namespace idist::mpi_backend
