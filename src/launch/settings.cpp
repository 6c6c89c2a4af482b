// idist's own settings (IDIST_*): one parser per variable, with the message that names it.
#include "launch/settings.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <regex>
#include <string_view>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "launch/environment.hpp"
#include "launch/variables.hpp"

namespace idist::launch {

namespace {

// An integer of at least `min` (0 or 1), as strtoll reads it.
std::optional<long long> integer(const char* name, long long min) {
  const auto s = read_nonempty(name);
  if (!s) return std::nullopt;
  char* end = nullptr;
  const long long v = std::strtoll(s->c_str(), &end, 10);
  if (*end != '\0' || v < min)
    throw ValueError(
        fmt::format("{} should be a {} integer, but given '{}'", name, min > 0 ? "positive" : "non-negative", *s));
  return v;
}

// "0" or "1"; `expected` ends the message.
std::optional<bool> zero_or_one(const char* name, std::string_view expected) {
  const auto v = read_nonempty(name);
  if (!v) return std::nullopt;
  if (*v == "1") return true;
  if (*v == "0") return false;
  throw ValueError(fmt::format("{} should be {}, but given '{}'", name, expected, *v));
}

bool equals(const char* name, std::string_view value) {
  const auto v = read(name);
  return v && *v == value;
}

}  // namespace

std::optional<LogLevel> log_level() {
  const auto v = read_nonempty("IDIST_LOG_LEVEL");
  if (!v) return std::nullopt;
  try {
    return parse_log_level(*v);
  } catch (const ValueError&) {
    throw ValueError(fmt::format("IDIST_LOG_LEVEL should be one of {}, but given '{}'",
                                 find_variable("IDIST_LOG_LEVEL")->values, *v));
  }
}

std::optional<DebugLevel> distributed_debug() {
  const auto v = read_nonempty("IDIST_DISTRIBUTED_DEBUG");
  if (!v) return std::nullopt;
  return parse_debug_level(*v);  // its message names IDIST_DISTRIBUTED_DEBUG
}

std::optional<std::string> trace_dir() { return read_nonempty("IDIST_TRACE_DIR"); }

std::optional<std::size_t> trace_buffer() {
  const auto n = read_nonempty("IDIST_TRACE_BUFFER");
  if (!n) return std::nullopt;
  char* end = nullptr;
  const long long v = std::strtoll(n->c_str(), &end, 10);
  if (*end != '\0' || v < 1 || v > 10'000'000)
    throw ValueError(
        fmt::format("IDIST_TRACE_BUFFER should be a number of collectives in [1, 10000000], but given '{}'", *n));
  return std::size_t(v);
}

GlooAllReduce gloo_allreduce() {
  const auto v = read_nonempty("IDIST_GLOO_ALLREDUCE");
  if (!v || *v == "auto") return GlooAllReduce::Auto;
  if (*v == "ring") return GlooAllReduce::Ring;
  if (*v == "bcube") return GlooAllReduce::Bcube;
  if (*v == "posted") return GlooAllReduce::Posted;
  throw ValueError(
      fmt::format("IDIST_GLOO_ALLREDUCE should be 'auto', 'ring', 'bcube' or 'posted', but given '{}'", *v));
}

std::optional<int> gloo_loop_nice() {
  const auto v = read_nonempty("IDIST_GLOO_LOOP_NICE");
  if (!v) return std::nullopt;
  if (*v == "off" || *v == "0") return 0;
  static const std::regex form("[0-9]{1,2}");
  if (std::regex_match(*v, form)) {
    const int nice = std::atoi(v->c_str());
    if (nice >= 1 && nice <= 19) return nice;
  }
  throw ValueError(
      fmt::format("IDIST_GLOO_LOOP_NICE should be a nice value from 1 to 19, or 'off' (or 0) to leave Gloo's "
                  "transport thread at the caller's priority, but given '{}'",
                  *v));
}

std::optional<bool> gloo_loop_batch() { return zero_or_one("IDIST_GLOO_LOOP_BATCH", "0 or 1"); }

PeerWatchSetting gloo_peer_watch() {
  const auto v = read_nonempty("IDIST_GLOO_PEER_WATCH");
  if (!v || *v == "1" || *v == "on") return {};
  if (*v == "0" || *v == "off") return {false, std::nullopt};
  static const std::regex form(R"(([0-9]{1,6}),([0-9]{1,6}),([0-9]{1,3}))");
  std::smatch m;
  if (std::regex_match(*v, m, form)) {
    const PeerWatchTimes t{std::chrono::milliseconds(std::stol(m[1].str())),
                           std::chrono::milliseconds(std::stol(m[2].str())), std::stoi(m[3].str())};
    if (t.probe_timeout.count() > 0 && t.rounds > 0) return {true, t};
  }
  throw ValueError(
      fmt::format("IDIST_GLOO_PEER_WATCH should be 'on', 'off' or 'DELAY_MS,PROBE_MS,ROUNDS' (probe time and rounds "
                  "positive), but given '{}'",
                  *v));
}

std::optional<bool> mpi_blocking() { return zero_or_one("IDIST_MPI_BLOCKING", "0 or 1"); }

std::optional<bool> mpi_progress_thread() {
  if (read_nonempty("IDIST_MPI_PROGRESS_THREAD") == "auto") return std::nullopt;
  return zero_or_one("IDIST_MPI_PROGRESS_THREAD", "0, 1 or auto");
}

std::optional<std::size_t> mpi_progress_chunk_bytes() {
  const auto v = integer("IDIST_MPI_PROGRESS_CHUNK_BYTES", 0);
  return v ? std::optional<std::size_t>(std::size_t(*v)) : std::nullopt;
}

std::optional<std::size_t> mpi_blocking_chunk_bytes() {
  const auto v = integer("IDIST_MPI_BLOCKING_CHUNK_BYTES", 0);
  return v ? std::optional<std::size_t>(std::size_t(*v)) : std::nullopt;
}

std::optional<std::chrono::microseconds> mpi_progress_interval() {
  const auto v = integer("IDIST_MPI_PROGRESS_INTERVAL_US", 1);
  return v ? std::optional<std::chrono::microseconds>(*v) : std::nullopt;
}

std::optional<std::size_t> mpi_max_count() {
  const auto v = integer("IDIST_MPI_MAX_COUNT", 1);
  return v ? std::optional<std::size_t>(std::size_t(std::min<long long>(*v, INT_MAX))) : std::nullopt;
}

bool nccl_blocking_wait() { return equals("IDIST_NCCL_BLOCKING_WAIT", "1"); }

bool nccl_no_split() { return equals("IDIST_NCCL_NO_SPLIT", "1"); }

std::string c10d_store_protocol() { return read("IDIST_C10D_STORE_PROTOCOL").value_or(""); }

std::optional<std::string> store_token() { return read("IDIST_STORE_TOKEN"); }

std::optional<bool> spawn_bind() {
  const auto v = read_nonempty("IDIST_SPAWN_BIND");
  if (!v) return std::nullopt;
  if (*v == "1") return true;
  if (*v == "0") return false;
  throw ValueError(fmt::format("IDIST_SPAWN_BIND is '{}'; expected 0 (workers not pinned) or 1", *v));
}

bool bucket_autotune_disabled() { return equals("IDIST_BUCKET_AUTOTUNE", "0"); }

}  // namespace idist::launch
