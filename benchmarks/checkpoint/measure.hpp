#pragma once
// One size of the checkpoint benchmark: how long idist::Checkpoint::save blocks the training thread,
// against writing the same number of bytes to the page cache with one write() call.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace idist_bench {

/// What to save: a model of `model_mib` MiB of float parameters in tensors of `tensor_mib` MiB, with
/// an optimizer whose state adds one (SGD with momentum) or two (Adam) copies of it.
struct CheckpointCase {
  double model_mib = 64;
  double tensor_mib = 4;
  std::string optimizer = "sgd";  ///< "sgd" or "adam"
  bool background_write = true;   ///< CheckpointOptions::background_write
};

/// Per repetition, in microseconds, and the checkpoint file's size.
struct CheckpointSamples {
  std::uint64_t file_bytes = 0;
  std::vector<double> save_us;        ///< Checkpoint::save (what training waits for)
  std::vector<double> finish_us;      ///< Checkpoint::wait right after it (the write still in flight, fsync)
  std::vector<double> page_cache_us;  ///< write() of file_bytes into a new file of the directory, no fsync
  std::vector<double> fsync_us;       ///< fsync of that file afterwards
};

/// Saves `reps` checkpoints of `c` into `dir` (after one untimed save), each followed by the plain
/// write of as many bytes. Collective (every rank saves); the plain write runs on rank 0, whose
/// samples are returned (other ranks' write vectors stay empty).
/// @throws std::runtime_error when a file cannot be written.
CheckpointSamples measure_checkpoint(const CheckpointCase& c, const std::filesystem::path& dir, int reps);

}  // namespace idist_bench
