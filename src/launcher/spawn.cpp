// The launching side of spawn(): fork the workers, watch them, stop the others when one fails, reap
// every one of them, and report the failure with the worker's rank and reason.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "idist/launcher.hpp"
#include "launcher/worker.hpp"

namespace idist::detail {

namespace {

using Clock = std::chrono::steady_clock;

struct Child {
  pid_t pid = -1;
  int local_rank = 0;
  int rank = 0;
  int report_fd = -1;  // read end of the worker's report pipe
  std::string report;
  bool exited = false;
  int status = 0;
  bool stopped_by_us = false;  // received our SIGTERM / SIGKILL while still running
  Clock::time_point exit_seen{};
};

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Reads what the worker wrote so far (non-blocking); closes the pipe at end of file.
void drain(Child& c) {
  char buf[1024];
  while (c.report_fd >= 0) {
    const ssize_t n = ::read(c.report_fd, buf, sizeof buf);
    if (n > 0) {
      if (c.report.size() < launcher::kMaxReportBytes) c.report.append(buf, std::size_t(n));
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      close_fd(c.report_fd);
    } else if (errno == EAGAIN) {
      return;
    }
  }
}

bool failed(const Child& c) { return c.exited && !(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0); }

std::string reason(const Child& c) {
  if (!c.report.empty()) return fmt::format("failed with {}", c.report);
  if (WIFSIGNALED(c.status)) {
    const int sig = WTERMSIG(c.status);
    const char* name = ::sigabbrev_np(sig);
    return name ? fmt::format("was killed by signal {} (SIG{})", sig, name)
                : fmt::format("was killed by signal {}", sig);
  }
  if (WIFEXITED(c.status)) return fmt::format("exited with status {}", WEXITSTATUS(c.status));
  return "ended abnormally";
}

// How likely a failure is the root cause rather than a consequence: a worker that died (signal, or
// exit without an exception) first, then one that threw anything but a communication error, then
// one whose collective failed or timed out (usually a survivor noticing the dead peer).
int consequence_level(const Child& c) {
  if (c.report.empty()) return 0;
  if (c.report.rfind("idist::BackendError", 0) == 0 || c.report.rfind("idist::TimeoutError", 0) == 0) return 2;
  return 1;
}

// Which failure to blame: the first one seen; among those seen in the same round, the likeliest
// root cause, then the lowest rank.
bool blame_before(const Child& a, const Child& b) {
  if (a.exit_seen != b.exit_seen) return a.exit_seen < b.exit_seen;
  if (consequence_level(a) != consequence_level(b)) return consequence_level(a) < consequence_level(b);
  return a.rank < b.rank;
}

void signal_running(std::vector<Child>& children, int sig) {
  for (auto& c : children)
    if (!c.exited) {
      ::kill(c.pid, sig);
      c.stopped_by_us = true;
    }
}

// Reaps every exited worker without blocking; returns how many are still running.
int reap(std::vector<Child>& children, Clock::time_point now) {
  int running = 0;
  for (auto& c : children) {
    if (c.exited) continue;
    int status = 0;
    const pid_t r = ::waitpid(c.pid, &status, WNOHANG);
    if (r == c.pid || (r < 0 && errno == ECHILD)) {
      c.exited = true;
      c.status = r == c.pid ? status : 0;
      c.exit_seen = now;
      drain(c);
    } else {
      ++running;
    }
  }
  return running;
}

std::string describe(const Child& c, int nproc) {
  return fmt::format("rank {} (local rank {} of {})", c.rank, c.local_rank, nproc);
}

}  // namespace

void spawn_workers(std::string_view backend, const std::function<void(int)>& task, const SpawnOptions& given) {
  check_spawn_options(backend, given);
  const SpawnOptions opts = with_master_defaults(given);
  if (idist::backend())
    throw ValueError(
        fmt::format("spawn: the {} backend is already initialized in this process; spawn workers from a serial process "
                    "(call idist::finalize() first, or use idist::Parallel without nproc_per_node)",
                    *idist::backend()));

  launcher::WorkerPlan plan;
  plan.backend = std::string(backend);
  plan.world_size = opts.nnodes * opts.nproc_per_node;
  plan.nproc_per_node = opts.nproc_per_node;
  plan.node_rank = opts.node_rank;
  plan.master_addr = *opts.master_addr;
  plan.master_port = *opts.master_port;
  plan.init_method = opts.init_method;
  plan.bind_cores = launcher::binds_cores(opts.bind_cores);
  plan.threads = launcher::thread_budget(opts.nproc_per_node);
  plan.timeout = opts.timeout;
  plan.store_token = launcher::store_token(opts.nnodes);

  // Buffered output would otherwise be written once by the parent and once by every worker.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);

  const pid_t parent = ::getpid();
  std::vector<Child> children(std::size_t(opts.nproc_per_node));
  for (int i = 0; i < opts.nproc_per_node; ++i) {
    Child& c = children[std::size_t(i)];
    c.local_rank = i;
    c.rank = opts.node_rank * opts.nproc_per_node + i;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0 || (c.pid = ::fork()) < 0) {
      const std::string err = ::strerrordesc_np(errno);
      signal_running(children, SIGKILL);
      for (auto& k : children)
        if (k.pid > 0 && !k.exited) ::waitpid(k.pid, nullptr, 0), close_fd(k.report_fd);
      throw BackendError(fmt::format("spawn: cannot start worker {}: {}", i, err));
    }
    if (c.pid == 0) {
      ::close(fds[0]);
      for (int j = 0; j < i; ++j) ::close(children[std::size_t(j)].report_fd);  // siblings' pipes
      plan.local_rank = i;
      plan.rank = c.rank;
      launcher::run_worker(plan, task, fds[1], parent);
    }
    ::close(fds[1]);
    c.report_fd = fds[0];
    ::fcntl(c.report_fd, F_SETFL, O_NONBLOCK);
  }

  // Watch: poll the report pipes (a worker's pipe reaches end of file when it exits) and reap.
  bool stopping = false;
  Clock::time_point kill_at{};
  for (;;) {
    std::vector<pollfd> fds;
    for (auto& c : children)
      if (c.report_fd >= 0) fds.push_back(pollfd{c.report_fd, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 50);
    for (auto& c : children) drain(c);
    const auto now = Clock::now();
    const int running = reap(children, now);
    if (!stopping) {
      for (const auto& c : children)
        if (failed(c)) stopping = true;
      if (stopping && running > 0) {
        signal_running(children, SIGTERM);
        kill_at = now + opts.kill_grace;
      }
    } else if (running > 0 && now >= kill_at) {
      signal_running(children, SIGKILL);
      kill_at = now + std::chrono::hours(1);
    }
    if (running == 0) break;
  }
  for (auto& c : children) {
    drain(c);
    close_fd(c.report_fd);
  }

  // Blame the first failure; list the others that failed on their own (not by our signal).
  const Child* first = nullptr;
  for (const auto& c : children)
    if (failed(c) && !c.stopped_by_us && (!first || blame_before(c, *first))) first = &c;
  if (!first)
    for (const auto& c : children)
      if (failed(c)) first = first ? first : &c;
  if (!first) return;
  std::string msg = fmt::format("spawn: worker {} {}", describe(*first, opts.nproc_per_node), reason(*first));
  std::string others;
  for (const auto& c : children)
    if (&c != first && failed(c) && !c.stopped_by_us)
      others += fmt::format("{}{} {}", others.empty() ? "" : "; ", describe(c, opts.nproc_per_node), reason(c));
  msg += "; the other workers were stopped";
  if (!others.empty()) msg += fmt::format(". Also failed: {}", others);
  throw SpawnError(msg, first->rank, first->local_rank);
}

}  // namespace idist::detail
