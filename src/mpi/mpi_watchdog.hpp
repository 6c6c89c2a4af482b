#pragma once
// The timeout of blocking MPI collectives. MPI offers no way to interrupt MPI_Allreduce and its
// kin, so when idist calls them (the default; see InitOptions::mpi_blocking_collectives) a watchdog
// thread watches the calls in flight and aborts the job once one has run past the timeout: the
// process never hangs forever, it just cannot recover with a TimeoutError as the polled path does.
// This is PyTorch's policy for hung NCCL collectives.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "backend_kit/watchdog.hpp"

namespace idist::mpi_backend {

class Watchdog {
 public:
  /// Starts the watchdog thread (backend_kit::Watchdog). `timeout` bounds every armed call; `rank` names
  /// this process in the message printed before the abort.
  Watchdog(std::chrono::milliseconds timeout, int rank);
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Marks one blocking call in flight until destroyed. `op` names the collective and `group` its
  /// group (e.g. "world (ranks 0-3)"); both must outlive the scope (string literals, or labels owned
  /// by the model). Arming costs one compare-and-swap and no clock read (the thread times the call
  /// from when it first sees it), so it fits the sub-microsecond budget of small messages.
  class Scope {
   public:
    Scope(Watchdog& w, const char* op, const char* group = nullptr) noexcept : w_(w), slot_(w.arm(op, group)) {}
    ~Scope() {
      if (slot_ >= 0) w_.disarm(slot_);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    /// False when every slot was taken (that many threads in blocking calls at once): the caller
    /// must then take the polled path, which has its own deadline.
    explicit operator bool() const noexcept { return slot_ >= 0; }

   private:
    Watchdog& w_;
    int slot_;
  };

  /// How often the thread looks at the armed calls: a twentieth of the timeout, within [1, 250] ms.
  /// A call is aborted between `timeout` and `timeout` + 2 periods after it started.
  std::chrono::milliseconds period() const noexcept { return thread_.period(); }

 private:
  // One armed call per slot. `word` = 2 * generation + busy: arming and disarming each bump it, so
  // the thread recognises one call across its visits by an unchanged odd word.
  struct alignas(64) Slot {
    std::atomic<std::uint64_t> word{0};
    std::atomic<const char*> op{nullptr};
    std::atomic<const char*> group{nullptr};
  };

  int arm(const char* op, const char* group) noexcept;
  void disarm(int slot) noexcept;
  // One visit of the watchdog thread: aborts the job when a call has run past the timeout.
  void scan(backend_kit::Watchdog::Clock::time_point now);
  [[noreturn]] void abort_job(const Slot& slot, std::chrono::milliseconds ran_for) const;

  std::chrono::milliseconds timeout_;
  int rank_;
  std::array<Slot, 16> slots_{};
  // What the thread saw in each slot at its last visit, and since when (the thread's alone).
  std::array<std::uint64_t, 16> seen_{};
  std::array<backend_kit::Watchdog::Clock::time_point, 16> since_{};
  backend_kit::Watchdog thread_;  // last: polls once the slots exist
};

}  // namespace idist::mpi_backend
