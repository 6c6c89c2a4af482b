#pragma once
/// @file
/// The launchers' and libraries' variables that idist reads one at a time (rank discovery reads
/// the rest from launch::snapshot(); torchrun's are in launch/launcher_info.hpp).
#include <optional>
#include <string>
#include <string_view>

namespace idist::launch {

/// MASTER_ADDR for the workers of spawn / Parallel: its value when set and not empty, else "127.0.0.1"
/// (ignite's default). Never throws.
std::string spawn_master_addr();

/// MASTER_PORT for the workers of spawn / Parallel: its value when set and not empty, else 2222
/// (ignite's default).
/// @throws ValueError naming MASTER_PORT and its value when it is not a port in [1, 65535].
int spawn_master_port();

/// Whether OMP_NUM_THREADS is set (even empty): the user's choice, which spawn leaves alone. Never throws.
bool omp_num_threads_set();

/// CUDA_VISIBLE_DEVICES when set (possibly empty: every GPU hidden), for messages. Never throws.
std::optional<std::string> cuda_visible_devices();

/// The interface named by `variable` (GLOO_SOCKET_IFNAME or NCCL_SOCKET_IFNAME) when set and not empty.
/// Never throws for those two names.
std::optional<std::string> socket_ifname(std::string_view variable);

/// The world size a launcher announces before MPI_Init: OMPI_COMM_WORLD_SIZE (mpirun), else
/// SLURM_STEP_NUM_TASKS (srun), else PMI_SIZE (MPICH's PMI), the first that holds a positive int; 0 when
/// none does. Never throws.
int launcher_world_size();

/// TORCHELASTIC_ERROR_FILE when set and not empty: where torchrun's agent reads a worker's error.
/// Never throws.
std::optional<std::string> error_file();

}  // namespace idist::launch
