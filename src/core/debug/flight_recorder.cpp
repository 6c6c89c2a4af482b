#include "core/debug/flight_recorder.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace idist::core::debug {

const char* to_string(TraceState s) noexcept {
  switch (s) {
    case TraceState::Started: return "started";
    case TraceState::Completed: return "completed";
    case TraceState::Failed: return "failed";
    case TraceState::TimedOut: return "timed_out";
    case TraceState::Desync: return "desync";
  }
  return "unknown";
}

std::int64_t now_us() noexcept {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

FlightRecorder::FlightRecorder(std::size_t capacity, int rank, int world_size, std::string backend)
    : ring_(capacity < 1 ? 1 : capacity), rank_(rank), world_size_(world_size), backend_(std::move(backend)) {}

std::uint64_t FlightRecorder::start(const Fingerprint& call, const std::string& group) {
  const std::int64_t t = now_us();
  std::lock_guard lock(mutex_);
  TraceEntry& e = ring_[next_ % ring_.size()];
  e.call = call;
  e.group = group;
  e.start_us = t;
  e.end_us = 0;
  e.state = TraceState::Started;
  return next_++;
}

void FlightRecorder::finish(std::uint64_t id, TraceState state) {
  const std::int64_t t = now_us();
  std::lock_guard lock(mutex_);
  if (id >= next_ || next_ - id > ring_.size()) return;  // overwritten by newer entries
  TraceEntry& e = ring_[id % ring_.size()];
  e.end_us = t;
  e.state = state;
}

std::vector<TraceEntry> FlightRecorder::entries() const {
  std::lock_guard lock(mutex_);
  const std::uint64_t n = std::min<std::uint64_t>(next_, ring_.size());
  std::vector<TraceEntry> out;
  out.reserve(n);
  for (std::uint64_t id = next_ - n; id < next_; ++id) out.push_back(ring_[id % ring_.size()]);
  return out;
}

namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += {'\\', c};
    else if (static_cast<unsigned char>(c) < 0x20)
      out += fmt::format("\\u{:04x}", int(c));
    else
      out += c;
  }
  return out + "\"";
}

}  // namespace

std::string FlightRecorder::to_json(const std::string& reason) const {
  std::string out =
      fmt::format("{{\"rank\": {}, \"world_size\": {}, \"backend\": {}, \"reason\": {},\n\"entries\": [\n", rank_,
                  world_size_, json_string(backend_), json_string(reason));
  const std::vector<TraceEntry> all = entries();
  for (std::size_t i = 0; i < all.size(); ++i) {
    const TraceEntry& e = all[i];
    const Fingerprint& f = e.call;
    out += fmt::format(
        "{{\"seq\": {}, \"group\": {}, \"collective\": \"{}\", \"dtype\": \"{}\", \"count\": {}, \"op\": \"{}\", "
        "\"root\": {}, \"call\": {}, \"start_us\": {}, \"end_us\": {}, \"state\": \"{}\"}}{}\n",
        f.seq, json_string(e.group), f.name(), f.dtype >= 0 ? to_string(DType(f.dtype)) : std::string_view(""), f.count,
        f.op >= 0 ? to_string(ReduceOp(f.op)) : std::string_view(""), f.root, json_string(f.describe()), e.start_us,
        e.end_us, to_string(e.state), i + 1 < all.size() ? "," : "");
  }
  return out + "]}\n";
}

void FlightRecorder::dump(const std::string& reason, const std::string& dir) const noexcept {
  try {
    if (dir.empty()) {
      const std::vector<TraceEntry> all = entries();
      std::string s = fmt::format("idist flight recorder, rank {}: {} (last {} of {} recorded collectives):\n", rank_,
                                  reason, std::min<std::size_t>(all.size(), 5), all.size());
      for (std::size_t i = all.size() > 5 ? all.size() - 5 : 0; i < all.size(); ++i)
        s += fmt::format("  group {}: {} [{}]\n", all[i].group, all[i].call.describe(), to_string(all[i].state));
      s += "  (set IDIST_TRACE_DIR to write every rank's trace for idist_trace)\n";
      std::fputs(s.c_str(), stderr);
      return;
    }
    std::filesystem::create_directories(dir);
    const std::filesystem::path path = std::filesystem::path(dir) / fmt::format("idist_trace_rank{}.json", rank_);
    const std::filesystem::path tmp = path.string() + ".tmp";
    {
      std::ofstream f(tmp);
      f << to_json(reason);
      if (!f) throw std::runtime_error("cannot write " + tmp.string());
    }
    std::filesystem::rename(tmp, path);  // a reader never sees half a file
    std::fprintf(stderr, "idist: rank %d wrote its flight recorder to %s\n", rank_, path.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idist: rank %d could not write its flight recorder: %s\n", rank_, e.what());
  }
}

}  // namespace idist::core::debug
