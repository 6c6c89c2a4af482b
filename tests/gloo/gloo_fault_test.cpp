// Failures in a gloo world started by spawn: a worker killed by SIGKILL before a collective, a peer
// that never joins a collective, a worker that throws, a worker that exits non-zero, a worker that
// fails to initialize. The survivors must raise an idist::Error within the timeout (plus a margin)
// instead of hanging; spawn() must name the failed rank and the reason, and leave no child behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>
#include <typeinfo>

#include "idist/idist.hpp"
#include "launcher/process_helpers.hpp"
#include "support/time_scale.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using idist::test::free_tcp_port;
using idist::test::read_text;
using idist::test::ScratchDir;
using idist::test::write_text;

idist::SpawnOptions options(int nproc, std::chrono::milliseconds timeout) {
  idist::SpawnOptions o;
  o.nproc_per_node = nproc;
  o.master_port = free_tcp_port();
  o.timeout = timeout;
  return o;
}

// Runs `fn`, expecting spawn() to throw SpawnError; returns it.
template <class Fn>
idist::SpawnError expect_spawn_error(Fn&& fn) {
  try {
    fn();
  } catch (const idist::SpawnError& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a SpawnError: " << e.what();
    return idist::SpawnError("wrong exception", -1, -1);
  }
  ADD_FAILURE() << "spawn did not throw";
  return idist::SpawnError("no exception", -1, -1);
}

// A survivor's record: "<exception type>|<elapsed ms>|<message>" or "no error".
std::string attempt_all_reduce() {
  const auto start = Clock::now();
  try {
    std::vector<float> v(1024, 1.0f);
    idist::all_reduce(v);
    return "no error";
  } catch (const idist::Error& e) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    const char* kind = dynamic_cast<const idist::TimeoutError*>(&e)   ? "TimeoutError"
                       : dynamic_cast<const idist::BackendError*>(&e) ? "BackendError"
                                                                      : "Error";
    return std::string(kind) + "|" + std::to_string(ms) + "|" + e.what();
  }
}

long elapsed_ms(const std::string& record) {
  const auto a = record.find('|'), b = record.find('|', a + 1);
  return a == std::string::npos ? -1 : std::stol(record.substr(a + 1, b - a - 1));
}

TEST(GlooFaults, PeerKilledBeforeACollective) {
  constexpr auto kTimeout = std::chrono::seconds(4);
  ScratchDir dir;
  idist::SpawnOptions o = options(3, kTimeout);
  o.kill_grace = std::chrono::seconds(20);  // survivors ignore SIGTERM to report what they saw
  const auto start = Clock::now();
  const idist::SpawnError e = expect_spawn_error([&] {
    idist::spawn(
        "gloo",
        [](int, const std::string& out) {
          std::signal(SIGTERM, SIG_IGN);
          idist::barrier();
          if (idist::get_rank() == 1) raise(SIGKILL);
          write_text(out + "/survivor" + std::to_string(idist::get_rank()), attempt_all_reduce());
        },
        dir.path(), o);
  });
  EXPECT_EQ(e.rank(), 1) << e.what();
  EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("signal 9"), std::string::npos) << e.what();
  for (int r : {0, 2}) {
    const std::string rec = read_text(dir.file("survivor" + std::to_string(r)));
    EXPECT_TRUE(rec.rfind("TimeoutError|", 0) == 0 || rec.rfind("BackendError|", 0) == 0)
        << "rank " << r << ": " << rec;
    EXPECT_GE(elapsed_ms(rec), 0) << rec;
    EXPECT_LE(elapsed_ms(rec), 4000 + idist::test::scaled(3000.0)) << "rank " << r << " raised too late: " << rec;
    EXPECT_NE(rec.find("all_reduce on rank " + std::to_string(r)), std::string::npos) << rec;
  }
  EXPECT_LT(Clock::now() - start, idist::test::scaled(std::chrono::seconds(20)));
  EXPECT_TRUE(idist::test::no_children_left());
}

TEST(GlooFaults, SpawnStopsTheOthersQuicklyWhenAWorkerIsKilled) {
  const auto start = Clock::now();
  const idist::SpawnError e = expect_spawn_error([&] {
    idist::spawn(
        "gloo",
        [](int) {
          idist::barrier();
          if (idist::get_rank() == 2) raise(SIGKILL);
          std::this_thread::sleep_for(std::chrono::seconds(60));  // stopped by spawn long before
        },
        options(3, std::chrono::seconds(30)));
  });
  EXPECT_EQ(e.rank(), 2) << e.what();
  EXPECT_NE(std::string(e.what()).find("SIGKILL"), std::string::npos) << e.what();
  EXPECT_LT(Clock::now() - start, idist::test::scaled(std::chrono::seconds(20)))
      << "the sleeping workers were not stopped";
  EXPECT_TRUE(idist::test::no_children_left());
}

TEST(GlooFaults, PeerThatNeverJoinsTimesOut) {
  constexpr auto kTimeout = std::chrono::seconds(2);
  ScratchDir dir;
  idist::spawn(
      "gloo",
      [](int, const std::string& out) {
        idist::barrier();
        if (idist::get_rank() == 1) {
          std::this_thread::sleep_for(std::chrono::seconds(5));  // never joins in time
          return;
        }
        write_text(out + "/r0", attempt_all_reduce());
      },
      dir.path(), options(2, kTimeout));
  const std::string rec = read_text(dir.file("r0"));
  EXPECT_TRUE(rec.rfind("TimeoutError|", 0) == 0) << rec;
  EXPECT_GE(elapsed_ms(rec), 1500) << "gave up before the timeout: " << rec;
  EXPECT_LE(elapsed_ms(rec), 2000 + idist::test::scaled(3000.0)) << "raised too late: " << rec;
  EXPECT_TRUE(idist::test::no_children_left());
}

TEST(GlooFaults, WorkerThatThrowsIsNamedWithItsMessage) {
  const idist::SpawnError e = expect_spawn_error([] {
    idist::spawn(
        "gloo",
        [](int local_rank) {
          if (local_rank == 1) throw std::runtime_error("boom from the second worker");
          idist::barrier();
        },
        options(2, std::chrono::seconds(10)));
  });
  const std::string what = e.what();
  EXPECT_EQ(e.rank(), 1) << what;
  EXPECT_NE(what.find("rank 1"), std::string::npos) << what;
  EXPECT_NE(what.find("std::runtime_error: boom from the second worker"), std::string::npos) << what;
  EXPECT_TRUE(idist::test::no_children_left());
}

TEST(GlooFaults, WorkerThatExitsNonZeroIsNamedWithItsStatus) {
  const idist::SpawnError e = expect_spawn_error([] {
    idist::spawn(
        "gloo",
        [](int local_rank) {
          if (local_rank == 0) {
            std::fflush(nullptr);
            _exit(3);
          }
          idist::barrier();
        },
        options(2, std::chrono::seconds(10)));
  });
  EXPECT_EQ(e.rank(), 0) << e.what();
  EXPECT_NE(std::string(e.what()).find("exited with status 3"), std::string::npos) << e.what();
  EXPECT_TRUE(idist::test::no_children_left());
}

TEST(GlooFaults, InitializationFailureIsReported) {
  idist::SpawnOptions o = options(2, std::chrono::seconds(10));
  o.init_method = "bogus://nowhere";
  const idist::SpawnError e = expect_spawn_error([&] {
    idist::spawn(
        "gloo", [](int) {}, o);
  });
  EXPECT_NE(std::string(e.what()).find("idist::ValueError"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("bogus://nowhere"), std::string::npos) << e.what();
  EXPECT_TRUE(idist::test::no_children_left());
}

TEST(GlooFaults, UnknownAllReduceAlgorithmIsReported) {
  setenv("IDIST_GLOO_ALLREDUCE", "tree", 1);
  const idist::SpawnError e = expect_spawn_error([] {
    idist::spawn(
        "gloo", [](int) {}, options(2, std::chrono::seconds(10)));
  });
  unsetenv("IDIST_GLOO_ALLREDUCE");
  EXPECT_NE(std::string(e.what()).find(
                "IDIST_GLOO_ALLREDUCE should be 'auto', 'ring', 'bcube' or 'posted', but given 'tree'"),
            std::string::npos)
      << e.what();
  EXPECT_TRUE(idist::test::no_children_left());
}

TEST(GlooFaults, SuccessfulSpawnLeavesNoChild) {
  idist::spawn(
      "gloo", [](int) { idist::barrier(); }, options(3, std::chrono::seconds(20)));
  EXPECT_TRUE(idist::test::no_children_left());
}

}  // namespace
