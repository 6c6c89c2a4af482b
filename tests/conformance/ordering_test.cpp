// Ordering guarantees: barrier (ignite's _test_distrib_barrier), one_rank_only with and without a
// barrier (_test_distrib_one_rank_only), one_rank_first in its world and local forms, its range
// check and its exception safety. Effects are observed through files in a shared temporary
// directory, checked only by ranks on the same host as the writer.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "conformance/conformance.hpp"

namespace idist::conformance {
namespace {

// Fixtures: every test reports, on every rank, the ranks where it failed.
class Barrier : public Conformance {};
class OneRankOnly : public Conformance {};
class OneRankFirst : public Conformance {};

using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_F(Barrier, IgnitesValueThenAllReduce) {
  float t = float(rank());
  if (rank() == 0) t += 10.0f;
  idist::barrier();
  float expected = 10.0f;
  for (int q = 0; q < world(); ++q) expected += float(q);
  EXPECT_EQ(idist::all_reduce(t), expected);
}

TEST_F(Barrier, NoRankPassesBeforeTheLastOneArrives) {
  const SharedTempDir dir;
  const std::vector<std::string> hosts = hostnames();
  const fs::path marker = dir.path() / "rank0-was-here";
  if (rank() == 0) {
    std::this_thread::sleep_for(200ms);  // the others reach the barrier long before rank 0
    write_marker(marker);
  }
  idist::barrier();
  if (hosts[std::size_t(rank())] == hosts[0]) {
    EXPECT_TRUE(fs::exists(marker)) << "rank " << rank() << " passed the barrier before rank 0 arrived";
  }
  // The non-blocking barrier, the other way round: the last rank is late.
  const fs::path marker2 = dir.path() / "last-rank-was-here";
  if (rank() == world() - 1) {
    std::this_thread::sleep_for(100ms);
    write_marker(marker2);
  }
  idist::Work w = idist::barrier_async();
  w.wait();
  EXPECT_TRUE(w.is_completed());
  if (hosts[std::size_t(rank())] == hosts.back()) {
    EXPECT_TRUE(fs::exists(marker2)) << "rank " << rank() << " passed barrier_async before the last rank arrived";
  }
}

TEST_F(Barrier, ManyInARow) {
  for (int i = 0; i < 50; ++i) idist::barrier();
  EXPECT_EQ(idist::all_reduce(1), world());
}

// ignite: the last rank sets a value to 100, then all_gather shows it only there.
TEST_F(OneRankOnly, OnlyTheChosenRankRuns) {
  for (bool with_barrier : {true, false}) {
    const int chosen = world() - 1;
    int value = 0;
    auto init = idist::one_rank_only([&] { value = 100; }, chosen, with_barrier);
    init();
    const std::vector<int> values = idist::all_gather(value);
    for (int q = 0; q < world(); ++q) EXPECT_EQ(values[std::size_t(q)], q == chosen ? 100 : 0) << "rank " << q;

    auto answer = idist::one_rank_only([] { return 42; }, chosen, with_barrier);
    const std::optional<int> got = answer();
    EXPECT_EQ(got, rank() == chosen ? std::optional<int>(42) : std::nullopt);
  }
}

TEST_F(OneRankOnly, WithBarrierTheEffectIsVisibleToAllAfterTheCall) {
  const SharedTempDir dir;
  const std::vector<std::string> hosts = hostnames();
  for (int chosen = 0; chosen < world(); ++chosen) {
    const fs::path marker = dir.path() / ("only-" + std::to_string(chosen));
    auto write = idist::one_rank_only(
        [&] {
          std::this_thread::sleep_for(50ms);
          write_marker(marker, std::to_string(chosen));
          return chosen;
        },
        chosen, /*with_barrier=*/true);
    const std::optional<int> r = write();
    EXPECT_EQ(r.has_value(), rank() == chosen);
    if (hosts[std::size_t(rank())] == hosts[std::size_t(chosen)]) {
      EXPECT_TRUE(fs::exists(marker)) << "rank " << rank() << " returned before rank " << chosen << " had run";
      EXPECT_EQ(read_file(marker), std::to_string(chosen));
    }
  }
}

// Inside the guard, the designated rank's effect is visible to every other rank of its host.
TEST_F(OneRankFirst, DesignatedRankRunsFirstWorldForm) {
  const SharedTempDir dir;
  const std::vector<std::string> hosts = hostnames();
  for (int first = 0; first < world(); ++first) {
    const fs::path marker = dir.path() / ("first-" + std::to_string(first));
    {
      idist::OneRankFirst guard(first);
      if (rank() == first) {
        std::this_thread::sleep_for(50ms);
        write_marker(marker, "downloaded");
      } else if (hosts[std::size_t(rank())] == hosts[std::size_t(first)]) {
        EXPECT_TRUE(fs::exists(marker)) << "rank " << rank() << " entered before rank " << first << " had finished";
      }
    }
    // Function form, returning a value.
    const fs::path marker2 = dir.path() / ("first-fn-" + std::to_string(first));
    const std::string seen = idist::one_rank_first(
        [&] {
          if (rank() == first) {
            std::this_thread::sleep_for(20ms);
            write_marker(marker2, "v" + std::to_string(first));
          }
          return hosts[std::size_t(rank())] == hosts[std::size_t(first)] ? read_file(marker2)
                                                                         : "v" + std::to_string(first);
        },
        first);
    EXPECT_EQ(seen, "v" + std::to_string(first));
  }
}

// Local form: on every host, local rank `first` runs first (one marker per host).
TEST_F(OneRankFirst, DesignatedLocalRankRunsFirstOnEachHost) {
  const SharedTempDir dir;
  for (int first = 0; first < idist::get_nproc_per_node(); ++first) {
    const fs::path marker = dir.path() / ("local-first-" + std::to_string(first) + "-" + idist::hostname());
    {
      idist::OneRankFirst guard(first, /*local=*/true);
      if (idist::get_local_rank() == first) {
        std::this_thread::sleep_for(50ms);
        write_marker(marker);
      } else {
        EXPECT_TRUE(fs::exists(marker)) << "local rank " << idist::get_local_rank() << " entered before local rank "
                                        << first;
      }
    }
    EXPECT_EQ(idist::one_rank_first([] { return idist::get_local_rank(); }, first, true), idist::get_local_rank());
  }
}

TEST_F(OneRankFirst, OutOfRangeRankOnEveryRank) {
  const int ws = world(), nproc = idist::get_nproc_per_node();
  const auto message = [](int size, int given) {
    return "rank should be between 0 and " + std::to_string(size - 1) + ", but given " + std::to_string(given);
  };
  for (int bad : {ws, ws + 1, -1}) {
    expect_value_error_on_every_rank([&] { idist::OneRankFirst guard(bad); }, message(ws, bad));
    expect_value_error_on_every_rank([&] { idist::one_rank_first([] { return 1; }, bad); }, message(ws, bad));
  }
  for (int bad : {nproc, -3}) {
    expect_value_error_on_every_rank([&] { idist::OneRankFirst guard(bad, true); }, message(nproc, bad));
    expect_value_error_on_every_rank([&] { idist::one_rank_first([] {}, bad, true); }, message(nproc, bad));
  }
}

// The designated rank throws inside the block: it still releases the others, which get through
// (long before the 60 s timeout) and stay in step for the next collective.
TEST_F(OneRankFirst, ExceptionOnTheDesignatedRankDoesNotBlockTheOthers) {
  for (int first = 0; first < world(); ++first) {
    bool threw = false;
    try {
      idist::OneRankFirst guard(first);
      if (rank() == first) throw std::runtime_error("download failed");
    } catch (const std::runtime_error& e) {
      threw = true;
      EXPECT_STREQ(e.what(), "download failed");
    }
    EXPECT_EQ(threw, rank() == first);
    EXPECT_EQ(idist::all_reduce(1), world());

    // Function form.
    bool fn_threw = false;
    try {
      idist::one_rank_first(
          [&] {
            if (rank() == first) throw std::logic_error("bad");
            return 0;
          },
          first);
    } catch (const std::logic_error&) {
      fn_threw = true;
    }
    EXPECT_EQ(fn_threw, rank() == first);
    EXPECT_EQ(idist::all_gather(int(fn_threw)).at(std::size_t(first)), 1);
  }
}

}  // namespace
}  // namespace idist::conformance
