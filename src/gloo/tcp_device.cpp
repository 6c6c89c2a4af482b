#include "gloo/tcp_device.hpp"

#include <gloo/transport/tcp/device.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <thread>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "launch/settings.hpp"

namespace idist::gloo_backend {

std::optional<int> loop_nice_from_env(int nnodes, int cpus) {
  const std::optional<int> nice = launch::gloo_loop_nice();
  if (!nice) {
    if (nnodes == 1) return kDefaultLoopNice;
    return cpus == 1 ? std::optional<int>(kPinnedCrossNodeLoopNice) : std::nullopt;
  }
  if (*nice == 0) return std::nullopt;  // "off"
  return nice;
}

int allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

std::shared_ptr<gloo::transport::Device> make_tcp_device(const rendezvous::InterfaceChoice& where,
                                                         std::optional<int> loop_nice) {
  gloo::transport::tcp::attr attr;
  attr.hostname = where.address;  // an address, never a name that might resolve to the loopback
  std::shared_ptr<gloo::transport::Device> device;
  std::exception_ptr failure;
  // The device starts its event-loop thread in its constructor, and a new thread inherits its
  // creator's nice value (and CPU affinity). Gloo's loop spins on a level-triggered socket while a
  // user thread holds the pair's lock; on a core shared with that user thread the spin takes the
  // CPU from the very thread it waits for. Constructing the device on a short-lived thread whose own
  // priority is lowered gives only the loop thread the low weight, without touching the caller's
  // (raising one's own nice value needs no privilege; lowering it back would).
  std::thread([&] {
    if (loop_nice) {
      const int own = (errno = 0, ::getpriority(PRIO_PROCESS, 0));
      if (errno == 0 && own < *loop_nice) ::setpriority(PRIO_PROCESS, ::gettid(), *loop_nice);
    }
    try {
      device = gloo::transport::tcp::CreateDevice(attr);
    } catch (...) {
      failure = std::current_exception();
    }
  }).join();
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      throw BackendError(
          fmt::format("gloo: cannot create the TCP transport on {}: {} (set GLOO_SOCKET_IFNAME to the "
                      "network interface to use)",
                      where.describe(), e.what()));
    }
  }
  return device;
}

}  // namespace idist::gloo_backend
