#pragma once
// Reads the flight recorder dumps idist writes (IDIST_TRACE_DIR/idist_trace_rank<R>.json): the subset
// of JSON they use, one entry per line.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace idist_trace {

/// One recorded collective of one rank.
struct Entry {
  std::int64_t seq = 0;
  std::string group;  ///< "world" or "[0, 2]"
  std::string call;   ///< "all_reduce float32[4] SUM seq 12"
  std::string state;  ///< started, completed, failed, timed_out, desync
};

/// One rank's dump.
struct RankTrace {
  int rank = -1;
  int world_size = 0;
  std::string reason;          ///< the error that made the rank write it
  std::vector<Entry> entries;  ///< oldest first
};

/// Parses one dump. @throws std::runtime_error naming the file and what is malformed.
RankTrace read_trace(const std::filesystem::path& file);

/// Every idist_trace_rank*.json in `dir`, by rank. @throws std::runtime_error when there is none.
std::vector<RankTrace> read_dir(const std::filesystem::path& dir);

}  // namespace idist_trace
