// Gloo's TCP device as idist creates it (an internal: the test sees src/): its event-loop thread runs
// at the nice value IDIST_GLOO_LOOP_NICE asks for (by default 19 on one node, else the caller's) and
// under SCHED_BATCH as IDIST_GLOO_LOOP_BATCH asks (by default for a rank on one CPU), with
// the caller's CPU affinity, while the calling thread keeps its own priority and policy; anything else
// is refused by name.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "gloo/tcp_device.hpp"
#include "idist/error.hpp"
#include "support/error_message.hpp"
#include "support/scoped_env.hpp"

namespace {

using idist::gloo_backend::loop_scheduling_from_env;
using idist::gloo_backend::LoopScheduling;
using idist::gloo_backend::make_tcp_device;
using idist::test::message_of;
using idist::test::ScopedEnv;

std::set<pid_t> threads_of_this_process() {
  std::set<pid_t> tids;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task"))
    tids.insert(pid_t(std::stol(e.path().filename().string())));
  return tids;
}

int nice_of(pid_t tid) {
  errno = 0;
  const int n = ::getpriority(PRIO_PROCESS, id_t(tid));
  EXPECT_EQ(errno, 0) << "getpriority(" << tid << ")";
  return n;
}

const idist::rendezvous::InterfaceChoice kLoopback{"lo", "127.0.0.1", "test"};

// The nice value and policy of one thread.
struct Scheduled {
  int nice = -100;
  int policy = -1;
};

// Creates a device scheduled as `loop` and returns how the one thread it started is scheduled.
Scheduled loop_thread(const LoopScheduling& loop) {
  // A sanitizer's runtime starts its own background thread at the process's first thread creation:
  // let that happen before counting.
  std::thread([] {}).join();
  const std::set<pid_t> before = threads_of_this_process();
  auto device = make_tcp_device(kLoopback, loop);
  std::set<pid_t> started;
  for (pid_t t : threads_of_this_process())
    if (!before.count(t)) started.insert(t);
  EXPECT_EQ(started.size(), 1u) << "the device starts exactly one thread (its event loop); the helper "
                                   "thread that created it has ended";
  if (started.empty()) return {};
  const pid_t thread = *started.begin();
  cpu_set_t mine, theirs;
  EXPECT_EQ(::sched_getaffinity(0, sizeof mine, &mine), 0);
  EXPECT_EQ(::sched_getaffinity(thread, sizeof theirs, &theirs), 0);
  EXPECT_TRUE(CPU_EQUAL(&mine, &theirs)) << "the loop thread keeps the caller's CPU affinity";
  return {nice_of(thread), ::sched_getscheduler(thread)};
}

int loop_thread_nice(const LoopScheduling& loop) { return loop_thread(loop).nice; }

TEST(GlooTcpDevice, OnOneNodeTheLoopThreadRunsAtNice19AndTheCallerKeepsItsPriority) {
  ScopedEnv env;
  env.unset("IDIST_GLOO_LOOP_NICE");
  const int own = nice_of(::gettid());
  EXPECT_EQ(loop_thread_nice(loop_scheduling_from_env(1, 2)), std::max(own, 19))
      << "never below the caller's own priority";
  EXPECT_EQ(nice_of(::gettid()), own) << "the calling thread's priority is untouched";
}

TEST(GlooTcpDevice, LoopNiceFollowsTheVariable) {
  const int own = nice_of(::gettid());
  {
    ScopedEnv env;
    env.set("IDIST_GLOO_LOOP_NICE", "off");
    EXPECT_EQ(loop_thread_nice(loop_scheduling_from_env(1, 2)), own);
  }
  {
    ScopedEnv env;
    env.set("IDIST_GLOO_LOOP_NICE", "12");
    EXPECT_EQ(loop_thread_nice(loop_scheduling_from_env(2, 2)), std::max(own, 12));
  }
  {
    ScopedEnv env;
    env.unset("IDIST_GLOO_LOOP_NICE");
    EXPECT_EQ(loop_thread_nice(loop_scheduling_from_env(2, 2)), own)
        << "across nodes the loop keeps the caller's priority";
    EXPECT_EQ(loop_thread_nice(loop_scheduling_from_env(2, 1)), own)
        << "across nodes on one CPU the loop keeps the caller's priority too (and runs under SCHED_BATCH)";
  }
}

TEST(GlooTcpDevice, LoopPolicyIsBatchOnOneCpuAndTheCallerKeepsItsOwn) {
  const int own_policy = ::sched_getscheduler(0);
  ASSERT_EQ(own_policy, SCHED_OTHER) << "the test runs under the default policy";
  {
    ScopedEnv env;
    env.unset("IDIST_GLOO_LOOP_BATCH").unset("IDIST_GLOO_LOOP_NICE");
    EXPECT_EQ(loop_thread(loop_scheduling_from_env(2, 1)).policy, SCHED_BATCH) << "a pinned rank across nodes";
    EXPECT_EQ(loop_thread(loop_scheduling_from_env(2, 2)).policy, SCHED_OTHER) << "a rank with two CPUs";
    const Scheduled one_node = loop_thread(loop_scheduling_from_env(1, 1));
    EXPECT_EQ(one_node.policy, SCHED_BATCH) << "a pinned rank on one node";
    EXPECT_EQ(one_node.nice, std::max(nice_of(::gettid()), 19)) << "with the one-node nice value";
    EXPECT_EQ(loop_thread(loop_scheduling_from_env(1, 2)).policy, SCHED_OTHER) << "one node, two CPUs";
  }
  {
    ScopedEnv env;
    env.set("IDIST_GLOO_LOOP_BATCH", "1").set("IDIST_GLOO_LOOP_NICE", "5");
    const Scheduled s = loop_thread(loop_scheduling_from_env(1, 2));
    EXPECT_EQ(s.policy, SCHED_BATCH);
    EXPECT_EQ(s.nice, std::max(nice_of(::gettid()), 5)) << "the nice value and the policy are set together";
  }
  {
    ScopedEnv env;
    env.set("IDIST_GLOO_LOOP_BATCH", "0");
    EXPECT_EQ(loop_thread(loop_scheduling_from_env(2, 1)).policy, SCHED_OTHER);
  }
  EXPECT_EQ(::sched_getscheduler(0), own_policy) << "the calling thread's policy is untouched";
}

TEST(GlooTcpDevice, LoopVariablesAreParsedOrRefusedByName) {
  const LoopScheduling unchanged{std::nullopt, false};
  {
    ScopedEnv env;
    env.set("IDIST_GLOO_LOOP_NICE", "").set("IDIST_GLOO_LOOP_BATCH", "");
    EXPECT_EQ(loop_scheduling_from_env(1, 2), (LoopScheduling{idist::gloo_backend::kDefaultLoopNice, false}));
    EXPECT_EQ(loop_scheduling_from_env(1, 1), (LoopScheduling{idist::gloo_backend::kDefaultLoopNice, true}));
    EXPECT_EQ(loop_scheduling_from_env(3, 2), unchanged);
    EXPECT_EQ(loop_scheduling_from_env(3, 1), (LoopScheduling{std::nullopt, true}));
  }
  for (const char* off : {"off", "0"}) {
    ScopedEnv env;
    env.set("IDIST_GLOO_LOOP_NICE", off).set("IDIST_GLOO_LOOP_BATCH", "0");
    EXPECT_EQ(loop_scheduling_from_env(1, 2), unchanged) << off;
    EXPECT_EQ(loop_scheduling_from_env(2, 1), unchanged) << off;
  }
  {
    ScopedEnv env;
    env.set("IDIST_GLOO_LOOP_NICE", "7").unset("IDIST_GLOO_LOOP_BATCH");
    EXPECT_EQ(loop_scheduling_from_env(1, 2), (LoopScheduling{7, false}));
    EXPECT_EQ(loop_scheduling_from_env(1, 1), (LoopScheduling{7, true}));
    EXPECT_EQ(loop_scheduling_from_env(2, 1), (LoopScheduling{7, true}));
  }
  for (const char* bad : {"20", "-5", "high", "1.5", " 3"}) {
    ScopedEnv env;
    env.set("IDIST_GLOO_LOOP_NICE", bad);
    const std::string what = message_of([] { (void)loop_scheduling_from_env(1, 2); });
    EXPECT_NE(what, "") << "IDIST_GLOO_LOOP_NICE='" << bad << "' was accepted";
    EXPECT_NE(what.find("IDIST_GLOO_LOOP_NICE"), std::string::npos) << what;
    EXPECT_NE(what.find(std::string("'") + bad + "'"), std::string::npos) << what;
    EXPECT_NE(what.find("1 to 19"), std::string::npos) << what;
    EXPECT_THROW((void)loop_scheduling_from_env(2, 1), idist::ValueError) << bad;
  }
  for (const char* bad : {"yes", "2", "on"}) {
    ScopedEnv env;
    env.unset("IDIST_GLOO_LOOP_NICE").set("IDIST_GLOO_LOOP_BATCH", bad);
    const std::string what = message_of([] { (void)loop_scheduling_from_env(2, 1); });
    EXPECT_NE(what.find("IDIST_GLOO_LOOP_BATCH"), std::string::npos) << what;
    EXPECT_NE(what.find(std::string("'") + bad + "'"), std::string::npos) << what;
    EXPECT_NE(what.find("0 or 1"), std::string::npos) << what;
  }
}

}  // namespace

TEST(GlooTcpDevice, AllowedCpusCountsTheCallingThreadsAffinity) {
  cpu_set_t all;
  ASSERT_EQ(::sched_getaffinity(0, sizeof all, &all), 0);
  EXPECT_EQ(idist::gloo_backend::allowed_cpus(), CPU_COUNT(&all));
  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  int pinned = 0;
  std::thread([&] {  // a thread of its own: the test process keeps its affinity
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    if (::sched_setaffinity(0, sizeof one, &one) == 0) pinned = idist::gloo_backend::allowed_cpus();
  })
      .join();
  EXPECT_EQ(pinned, 1);
}
