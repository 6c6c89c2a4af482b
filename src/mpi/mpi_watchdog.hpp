#pragma once
// The timeout of blocking MPI collectives. MPI offers no way to interrupt MPI_Allreduce and its
// kin, so when idist calls them (InitOptions::mpi_blocking_collectives) a watchdog thread watches
// the calls in flight and aborts the job once one has run past its deadline: the process never
// hangs forever, it just cannot recover with a TimeoutError as the polled path does.
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace idist::mpi_backend {

class Watchdog {
 public:
  /// Starts the watchdog thread. `timeout` bounds every armed call; `rank` names this process in
  /// the message printed before the abort.
  Watchdog(std::chrono::milliseconds timeout, int rank);
  /// Stops and joins the thread.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Marks one blocking call named `op` (a string literal) in flight until destroyed. Arming costs
  /// one clock read and one compare-and-swap, so it fits the microsecond budget of small messages.
  class Scope {
   public:
    Scope(Watchdog& w, const char* op) noexcept : w_(w), slot_(w.arm(op)) {}
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
  std::chrono::milliseconds period() const noexcept { return period_; }

 private:
  // Each armed call owns one slot: its deadline (steady-clock nanoseconds; 0 = free) and its name.
  struct alignas(64) Slot {
    std::atomic<std::int64_t> deadline_ns{0};
    std::atomic<const char*> op{nullptr};
  };

  int arm(const char* op) noexcept;
  void disarm(int slot) noexcept;
  void run();
  [[noreturn]] void abort_job(const char* op) const;

  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds period_;
  int rank_;
  std::array<Slot, 16> slots_{};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace idist::mpi_backend
