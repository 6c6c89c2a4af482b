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

LoopScheduling loop_scheduling_from_env(int nnodes, int cpus) {
  LoopScheduling loop;
  const std::optional<int> nice = launch::gloo_loop_nice();
  if (!nice) {
    if (nnodes == 1) loop.nice = kDefaultLoopNice;
  } else if (*nice != 0) {  // 0: "off"
    loop.nice = nice;
  }
  loop.batch = launch::gloo_loop_batch().value_or(cpus == 1);
  return loop;
}

int allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

std::shared_ptr<gloo::transport::Device> make_tcp_device(const rendezvous::InterfaceChoice& where,
                                                         const LoopScheduling& loop) {
  gloo::transport::tcp::attr attr;
  attr.hostname = where.address;  // an address, never a name that might resolve to the loopback
  std::shared_ptr<gloo::transport::Device> device;
  std::exception_ptr failure;
  // The device starts its event-loop thread in its constructor, and a new thread inherits its
  // creator's nice value, policy and CPU affinity. Gloo's loop spins on a level-triggered socket while
  // a user thread holds the pair's lock; on a core shared with that user thread the spin takes the
  // CPU from the very thread it waits for, until the next tick. A lower weight shortens that; under
  // SCHED_BATCH the loop, woken by incoming data, does not preempt the lock holder at all. Setting
  // both on a short-lived thread that constructs the device gives them to the loop thread only,
  // without touching the caller (raising one's own nice value needs no privilege; lowering it back
  // would).
  std::thread([&] {
    if (loop.nice) {
      const int own = (errno = 0, ::getpriority(PRIO_PROCESS, 0));
      if (errno == 0 && own < *loop.nice) ::setpriority(PRIO_PROCESS, ::gettid(), *loop.nice);
    }
    if (loop.batch) {
      const sched_param none{};
      (void)::sched_setscheduler(0, SCHED_BATCH, &none);  // if refused, the creator's policy stays
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
