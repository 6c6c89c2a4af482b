// The table of the environment variables idist reads. A new variable is added here, read through
// launch::read(), and documented in docs/launching.md's table (the docs test compares them).
#include "launch/variables.hpp"

#include <array>

namespace idist::launch {

namespace {

constexpr std::array kVariables = {
    // idist's own settings (launch/settings.hpp parses each).
    Variable{"IDIST_LOG_LEVEL", "DEBUG, INFO, WARNING, OFF (any case)", "INFO", "logging"},
    Variable{"IDIST_DISTRIBUTED_DEBUG", "OFF, INFO, DETAIL", "OFF", "debug layer"},
    Variable{"IDIST_TRACE_DIR", "a directory", "none: summaries on stderr", "debug layer"},
    Variable{"IDIST_TRACE_BUFFER", "1 to 10000000 collectives", "2000", "debug layer"},
    Variable{"IDIST_GLOO_ALLREDUCE", "auto, ring, bcube, posted", "auto", "gloo"},
    Variable{"IDIST_GLOO_LOOP_NICE", "1 to 19, off (or 0)", "19 on one node, else the rank's priority", "gloo"},
    Variable{"IDIST_GLOO_LOOP_BATCH", "0, 1", "1 on one CPU, else 0", "gloo"},
    Variable{"IDIST_GLOO_PEER_WATCH", "on (or 1), off (or 0), DELAY_MS,PROBE_MS,ROUNDS", "200,600,2", "gloo"},
    Variable{"IDIST_MPI_BLOCKING", "0, 1", "1", "mpi"},
    Variable{"IDIST_MPI_PROGRESS_THREAD", "0, 1, auto", "auto: on across nodes", "mpi"},
    Variable{"IDIST_MPI_PROGRESS_CHUNK_BYTES", "an integer >= 0 (0: whole)", "4194304 (4 MiB)", "mpi"},
    Variable{"IDIST_MPI_PROGRESS_INTERVAL_US", "an integer >= 1", "500", "mpi"},
    Variable{"IDIST_MPI_BLOCKING_CHUNK_BYTES", "an integer >= 0 (0: whole)", "1 MiB calls where they are faster",
             "mpi"},
    Variable{"IDIST_MPI_MAX_COUNT", "an integer >= 1", "2147483647", "mpi"},
    Variable{"IDIST_NCCL_BLOCKING_WAIT", "1 (anything else: off)", "off", "nccl"},
    Variable{"IDIST_NCCL_NO_SPLIT", "1 (anything else: off)", "off", "nccl"},
    Variable{"IDIST_C10D_STORE_PROTOCOL", "1, 2", "detected by a probe", "torchrun's agent store"},
    Variable{"IDIST_STORE_TOKEN", "any text", "none (spawn makes one on one node)", "TCP store, spawn"},
    Variable{"IDIST_SPAWN_BIND", "0, 1", "1", "spawn, Parallel"},
    Variable{"IDIST_BUCKET_AUTOTUNE", "0 (anything else: on)", "on", "auto_model"},
    // The launchers' variables (rank discovery, launch/launcher_info.hpp, spawn, the error file).
    Variable{"RANK", "an integer", "none", "discovery, error file"},
    Variable{"LOCAL_RANK", "an integer", "none", "discovery, error file"},
    Variable{"WORLD_SIZE", "an integer", "none", "discovery"},
    Variable{"LOCAL_WORLD_SIZE", "an integer", "none", "discovery"},
    Variable{"MASTER_ADDR", "a host name or address", "127.0.0.1", "discovery, spawn"},
    Variable{"MASTER_PORT", "1 to 65535", "15000 (spawn, Parallel: 2222)", "discovery, spawn"},
    Variable{"GROUP_RANK", "an integer >= 0", "none", "torchrun"},
    Variable{"GROUP_WORLD_SIZE", "an integer >= 0", "none", "torchrun"},
    Variable{"TORCHELASTIC_RUN_ID", "any text", "none", "torchrun"},
    Variable{"TORCHELASTIC_RESTART_COUNT", "an integer >= 0", "0", "torchrun"},
    Variable{"TORCHELASTIC_MAX_RESTARTS", "an integer >= 0", "0", "torchrun"},
    Variable{"TORCHELASTIC_USE_AGENT_STORE", "True (anything else: false)", "false", "torchrun"},
    Variable{"TORCHELASTIC_ERROR_FILE", "a file path", "none: nothing written", "error file"},
    Variable{"SLURM_JOB_ID", "an integer", "none", "discovery"},
    Variable{"SLURM_STEP_ID", "an integer", "none", "launcher line"},
    Variable{"SLURM_PROCID", "an integer", "none", "discovery"},
    Variable{"SLURM_LOCALID", "an integer", "none", "discovery"},
    Variable{"SLURM_NTASKS", "an integer", "none", "discovery"},
    Variable{"SLURM_JOB_NODELIST", "a SLURM host list", "none", "discovery"},
    Variable{"SLURM_JOB_NUM_NODES", "an integer", "none", "discovery"},
    Variable{"SLURM_STEP_NUM_TASKS", "an integer", "none", "mpi"},
    Variable{"OMPI_COMM_WORLD_RANK", "an integer", "none", "discovery"},
    Variable{"OMPI_COMM_WORLD_SIZE", "an integer", "none", "discovery, mpi"},
    Variable{"OMPI_COMM_WORLD_LOCAL_RANK", "an integer", "none", "discovery"},
    Variable{"OMPI_COMM_WORLD_LOCAL_SIZE", "an integer", "none", "discovery"},
    Variable{"PMI_RANK", "an integer", "none", "discovery"},
    Variable{"PMI_SIZE", "an integer", "none", "discovery, mpi"},
    Variable{"MPI_LOCALRANKID", "an integer", "none", "discovery"},
    Variable{"MPI_LOCALNRANKS", "an integer", "none", "discovery"},
    // The libraries' variables idist looks at.
    Variable{"GLOO_SOCKET_IFNAME", "an interface name", "the interface that routes to MASTER_ADDR", "gloo"},
    Variable{"NCCL_SOCKET_IFNAME", "an interface name", "the interface that routes to MASTER_ADDR", "nccl"},
    Variable{"CUDA_VISIBLE_DEVICES", "device indices", "none", "nccl, error messages"},
    Variable{"OMP_NUM_THREADS", "an integer", "the CPUs / nproc_per_node", "spawn, Parallel"},
};

}  // namespace

std::span<const Variable> variables() { return kVariables; }

const Variable* find_variable(std::string_view name) {
  for (const auto& v : kVariables)
    if (v.name == name) return &v;
  return nullptr;
}

}  // namespace idist::launch
