// The worker side of spawn(): environment, initialize, run, finalize, report, _exit.
#include "launcher/worker.hpp"

#include <dlfcn.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <string_view>
#include <thread>
#include <typeinfo>
#include <vector>

#include <fmt/format.h>

#include "idist/context.hpp"
#include "idist/error.hpp"
#include "idist/launcher.hpp"
#include "launch/launcher_env.hpp"
#include "launch/settings.hpp"

namespace idist::launcher {

namespace {

void write_report(int fd, const std::string& text) {
  const std::string clipped = text.size() > kMaxReportBytes ? text.substr(0, kMaxReportBytes) : text;
  std::size_t done = 0;
  while (done < clipped.size()) {
    const ssize_t n = ::write(fd, clipped.data() + done, clipped.size() - done);
    if (n <= 0) break;
    done += std::size_t(n);
  }
}

void flush_all() {
  std::cout.flush();
  std::cerr.flush();
  std::clog.flush();
  std::fflush(nullptr);
}

// The OpenMP runtime read OMP_NUM_THREADS when it was loaded, before the fork: setting the variable
// is not enough for this process, so also call omp_set_num_threads when an OpenMP runtime is present
// (LibTorch's CPU kernels use its default team size).
void limit_threads(int n) {
  if (launch::omp_num_threads_set()) return;  // the user's choice wins
  ::setenv("OMP_NUM_THREADS", std::to_string(n).c_str(), 1);
  using SetNumThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetNumThreads>(::dlsym(RTLD_DEFAULT, "omp_set_num_threads"))) set(n);
}

// Pins this process (its only thread: the fork just happened, so every thread made later inherits
// the mask) to its share of the CPUs, so that the workers do not migrate onto each other's cores.
void bind_to_share(int local_rank, int nproc_per_node) {
  const std::vector<int> mine = cpu_share(allowed_cpus(), local_rank, nproc_per_node);
  if (mine.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : mine) CPU_SET(c, &set);
  (void)::sched_setaffinity(0, sizeof set, &set);  // a refused mask leaves the worker unpinned
}

}  // namespace

std::vector<int> allowed_cpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  } else {
    for (int c = 0; c < int(std::thread::hardware_concurrency()); ++c) cpus.push_back(c);
  }
  return cpus;
}

std::vector<int> cpu_share(const std::vector<int>& allowed, int local_rank, int nproc_per_node) {
  if (nproc_per_node < 1 || local_rank < 0 || local_rank >= nproc_per_node) return {};
  const std::size_t per = allowed.size() / std::size_t(nproc_per_node);
  if (per == 0) return {};
  const auto first = allowed.begin() + std::ptrdiff_t(per * std::size_t(local_rank));
  return std::vector<int>(first, first + std::ptrdiff_t(per));
}

bool binds_cores(bool requested) {
  const std::optional<bool> bind = launch::spawn_bind();
  return requested && bind.value_or(true);
}

std::string store_token(int nnodes) {
  if (auto set = launch::store_token(); set && !set->empty()) return *set;
  if (nnodes > 1) return {};
  unsigned char raw[16] = {};
  std::FILE* f = std::fopen("/dev/urandom", "rb");
  const bool ok = f && std::fread(raw, 1, sizeof raw, f) == sizeof raw;
  if (f) std::fclose(f);
  if (!ok) throw BackendError("spawn: cannot read /dev/urandom for the store token");
  std::string out;
  for (unsigned char b : raw) out += fmt::format("{:02x}", b);
  return out;
}

int thread_budget(int nproc_per_node) {
  const int cores = int(allowed_cpus().size());
  return std::max(1, cores / std::max(1, nproc_per_node));
}

void run_worker(const WorkerPlan& plan, const std::function<void(int)>& task, int report_fd, pid_t parent) {
  // Die with the launching process, so that no worker is ever orphaned; close the race where the
  // parent died before prctl took effect.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);
  if (plan.bind_cores) bind_to_share(plan.local_rank, plan.nproc_per_node);

  int code = 0;
  try {
    ::setenv("RANK", std::to_string(plan.rank).c_str(), 1);
    ::setenv("LOCAL_RANK", std::to_string(plan.local_rank).c_str(), 1);
    ::setenv("WORLD_SIZE", std::to_string(plan.world_size).c_str(), 1);
    ::setenv("LOCAL_WORLD_SIZE", std::to_string(plan.nproc_per_node).c_str(), 1);
    ::setenv("GROUP_RANK", std::to_string(plan.node_rank).c_str(), 1);
    ::setenv("MASTER_ADDR", plan.master_addr.c_str(), 1);
    ::setenv("MASTER_PORT", std::to_string(plan.master_port).c_str(), 1);
    if (!plan.store_token.empty()) ::setenv("IDIST_STORE_TOKEN", plan.store_token.c_str(), 1);
    limit_threads(plan.threads);

    InitOptions opts;
    opts.timeout = plan.timeout;
    opts.init_method = plan.init_method;
    opts.rank = plan.rank;
    opts.world_size = plan.world_size;
    opts.local_rank = plan.local_rank;
    initialize(plan.backend, opts);
    task(plan.local_rank);
    finalize();
  } catch (const std::exception& e) {
    write_report(report_fd, fmt::format("{}: {}", detail::demangled_name(typeid(e)), e.what()));
    code = 1;
  } catch (...) {
    write_report(report_fd, "an exception that is not a std::exception");
    code = 1;
  }
  flush_all();
  ::_exit(code);
}

}  // namespace idist::launcher
