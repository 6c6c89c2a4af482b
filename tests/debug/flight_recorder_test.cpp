// The flight recorder's ring and JSON, read back by idist_trace's reader; idist_trace's analysis of a
// rank that never reached a collective (the real multi-rank dumps are in trace_tool.sh).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "analyze.hpp"
#include "core/debug/flight_recorder.hpp"
#include "trace_reader.hpp"

namespace {

using idist::core::debug::Fingerprint;
using idist::core::debug::FlightRecorder;
using idist::core::debug::TraceState;

Fingerprint all_reduce(std::int64_t seq, std::int64_t count) {
  Fingerprint f;
  f.seq = seq;
  f.collective = std::int64_t(idist::OpType::AllReduce);
  f.dtype = std::int64_t(idist::DType::Float32);
  f.count = count;
  f.op = std::int64_t(idist::ReduceOp::Sum);
  return f;
}

std::filesystem::path write(const FlightRecorder& r, const std::string& reason, const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("idist-fr-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name) << r.to_json(reason);
  return dir;
}

TEST(FlightRecorder, KeepsTheLastEntriesInOrder) {
  FlightRecorder r(3, 0, 2, "gloo");
  std::uint64_t ids[5];
  for (int i = 0; i < 5; ++i) ids[i] = r.start(all_reduce(i + 1, 4), "world");
  r.finish(ids[0], TraceState::Failed);  // overwritten: ignored
  r.finish(ids[4], TraceState::Completed);
  const auto e = r.entries();
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].call.seq, 3);
  EXPECT_EQ(e[2].call.seq, 5);
  EXPECT_EQ(e[2].state, TraceState::Completed);
  EXPECT_GT(e[2].end_us, 0);
  EXPECT_EQ(e[1].state, TraceState::Started);
}

TEST(FlightRecorder, JsonRoundTripsThroughTheTool) {
  FlightRecorder r(8, 1, 2, "gloo");
  r.finish(r.start(all_reduce(1, 4), "[0, 1]"), TraceState::TimedOut);
  const auto dir = write(r, "a \"quoted\"\nreason\\", "idist_trace_rank1.json");
  const auto t = idist_trace::read_trace(dir / "idist_trace_rank1.json");
  EXPECT_EQ(t.rank, 1);
  EXPECT_EQ(t.world_size, 2);
  EXPECT_EQ(t.reason, "a \"quoted\"\nreason\\");
  ASSERT_EQ(t.entries.size(), 1u);
  EXPECT_EQ(t.entries[0].group, "[0, 1]");
  EXPECT_EQ(t.entries[0].call, "all_reduce float32[4] SUM seq 1");
  EXPECT_EQ(t.entries[0].state, "timed_out");
  std::filesystem::remove_all(dir);
}

TEST(TraceTool, NamesTheRankThatNeverArrived) {
  FlightRecorder r0(8, 0, 2, "gloo"), r1(8, 1, 2, "gloo");
  for (int i = 1; i <= 3; ++i) r0.finish(r0.start(all_reduce(i, 4), "world"), TraceState::Completed);
  r0.finish(r0.start(all_reduce(4, 4), "world"), TraceState::TimedOut);
  for (int i = 1; i <= 3; ++i) r1.finish(r1.start(all_reduce(i, 4), "world"), TraceState::Completed);
  write(r0, "timeout", "idist_trace_rank0.json");
  const auto dir = write(r1, "timeout elsewhere", "idist_trace_rank1.json");
  const auto found = idist_trace::findings(idist_trace::read_dir(dir));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0],
            "group world: rank 1 never reached seq 4 (last recorded: 3); rank 0: all_reduce float32[4] SUM "
            "seq 4 [timed_out]");
  std::filesystem::remove_all(dir);
}

TEST(TraceTool, AgreeingDumpsHaveNoFinding) {
  FlightRecorder r0(8, 0, 1, "mpi");
  r0.finish(r0.start(all_reduce(1, 4), "world"), TraceState::Completed);
  const auto dir = write(r0, "x", "idist_trace_rank0.json");
  EXPECT_TRUE(idist_trace::findings(idist_trace::read_dir(dir)).empty());
  std::filesystem::remove_all(dir);
}

}  // namespace
