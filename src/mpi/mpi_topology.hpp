#pragma once
// Where each rank sits: its node, its rank on the node, and the node count, measured exactly.
#include <mpi.h>

namespace idist::mpi_backend {

/// This rank's place in the machine layout.
struct NodeLayout {
  int local_rank = 0;      ///< rank among the processes sharing this node's memory
  int nproc_per_node = 1;  ///< number of processes on this node
  int node_rank = 0;       ///< index of this node, in [0, nnodes)
  int nnodes = 1;          ///< number of nodes
};

/// Measures the layout over `world` (collective over it): a shared-memory split
/// (MPI_COMM_TYPE_SHARED) gives the local rank and the processes per node; the local-rank-0
/// processes, split off and ranked, number the nodes, and each broadcasts its node's number to its
/// node. Nodes are numbered in the order of their lowest world rank.
/// @throws BackendError when an MPI call fails.
NodeLayout measure_node_layout(MPI_Comm world, int rank);

}  // namespace idist::mpi_backend
