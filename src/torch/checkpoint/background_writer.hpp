#pragma once
// The saving rank's writer thread: at most one checkpoint write in flight, so that a save returns
// once its state is copied and the file reaches the disk while training goes on.
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace idist::checkpoint {

/// How a write ended.
struct Outcome {
  std::string error;                  ///< empty when the file was written
  std::vector<std::string> warnings;  ///< what went wrong without failing it (an old file not removed)
};

/// Runs one write at a time on its own thread.
class BackgroundWriter {
 public:
  /// A write: fills the outcome's warnings; an exception it throws becomes the outcome's error.
  using Job = std::function<void(Outcome&)>;

  BackgroundWriter() = default;
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;
  /// Waits for the write in flight (its outcome is lost: call wait() first to see it).
  ~BackgroundWriter();

  /// Starts `job` on a new thread; waits for the previous one first (its outcome is then kept for
  /// the next wait()).
  void start(Job job);
  /// Waits for the write in flight and returns the outcomes gathered since the last call.
  Outcome wait();

 private:
  std::thread thread_;
  Outcome outcome_;  // written by the thread, read after join
  Outcome pending_;  // outcomes of joined jobs not yet returned by wait()
  void join();
};

/// Runs `job` on the calling thread and returns its outcome.
Outcome run_now(const BackgroundWriter::Job& job);

}  // namespace idist::checkpoint
