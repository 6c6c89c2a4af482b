#pragma once
// The worker side of spawn(): what a forked child does.
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace idist::launcher {

/// What one worker needs to know about its place in the world.
struct WorkerPlan {
  std::string backend;
  int local_rank = 0;
  int rank = 0;
  int world_size = 1;
  int nproc_per_node = 1;
  int node_rank = 0;
  std::string master_addr;
  int master_port = 0;
  std::string init_method;
  std::chrono::milliseconds timeout{0};
  std::string store_token;  ///< exported as IDIST_STORE_TOKEN when not empty
  bool bind_cores = false;  ///< pin the worker to its share of the CPUs (SpawnOptions::bind_cores)
  int threads = 1;          ///< exported as OMP_NUM_THREADS unless set: thread_budget() of the launcher
};

/// Largest failure report a worker writes to its pipe: written once, before exiting, and below
/// PIPE_BUF so that the write into the empty pipe neither blocks nor splits.
inline constexpr std::size_t kMaxReportBytes = 4000;

/// Runs in the forked child and never returns: dies with the parent (PR_SET_PDEATHSIG), exports
/// RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (and OMP_NUM_THREADS
/// unless set, IDIST_STORE_TOKEN when the plan has one), initializes the backend, runs task(local_rank), finalizes,
/// flushes stdio and _exit()s with 0. On an exception it writes "<type>: <what>" to `report_fd` and _exit()s with 1.
[[noreturn]] void run_worker(const WorkerPlan& plan, const std::function<void(int)>& task, int report_fd, pid_t parent);

/// The TCP store token of a launch: IDIST_STORE_TOKEN when set; else, for a launch on one node, 32 random
/// hex digits from /dev/urandom (every worker of the job is forked from this process, so all get it);
/// else (several nodes, each launched separately, which could not agree on a random value) empty: the
/// store then requires no token unless the user sets IDIST_STORE_TOKEN on every node.
std::string store_token(int nnodes);

/// The CPUs this process may run on (sched_getaffinity), ascending; every hardware thread when the
/// mask cannot be read.
std::vector<int> allowed_cpus();

/// max(1, allowed_cpus() / nproc_per_node): the OpenMP / LibTorch intra-op threads of one worker,
/// computed in the launching process (a pinned worker's own mask holds only its share).
int thread_budget(int nproc_per_node);

/// The CPUs worker `local_rank` of `nproc_per_node` is pinned to, given the CPUs the launching
/// process may run on (ascending): share `local_rank` of nproc_per_node equal contiguous shares;
/// empty (no pinning) when there are fewer CPUs than workers.
std::vector<int> cpu_share(const std::vector<int>& allowed, int local_rank, int nproc_per_node);

/// Whether spawn pins its workers: `requested` (SpawnOptions::bind_cores) unless IDIST_SPAWN_BIND is "0".
/// @throws ValueError when IDIST_SPAWN_BIND is set to anything but "0" or "1".
bool binds_cores(bool requested);

}  // namespace idist::launcher
