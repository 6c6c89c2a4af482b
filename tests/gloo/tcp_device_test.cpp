// Gloo's TCP device as idist creates it (an internal: the test sees src/): its event-loop thread runs
// at the nice value IDIST_GLOO_LOOP_NICE asks for (by default 19 on one node; across nodes 10 for a
// rank on one CPU, else the caller's) with the caller's CPU affinity, while the calling thread keeps its own priority;
// "off" leaves the loop at the caller's priority; anything else is refused by name.
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

using idist::gloo_backend::loop_nice_from_env;
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

// Creates a device whose loop runs at `nice` and returns the nice value of the one thread it started.
int loop_thread_nice(std::optional<int> nice) {
  // A sanitizer's runtime starts its own background thread at the process's first thread creation:
  // let that happen before counting.
  std::thread([] {}).join();
  const std::set<pid_t> before = threads_of_this_process();
  auto device = make_tcp_device(kLoopback, nice);
  std::set<pid_t> started;
  for (pid_t t : threads_of_this_process())
    if (!before.count(t)) started.insert(t);
  EXPECT_EQ(started.size(), 1u) << "the device starts exactly one thread (its event loop); the helper "
                                   "thread that created it has ended";
  if (started.empty()) return -100;
  const pid_t loop = *started.begin();
  cpu_set_t mine, theirs;
  EXPECT_EQ(::sched_getaffinity(0, sizeof mine, &mine), 0);
  EXPECT_EQ(::sched_getaffinity(loop, sizeof theirs, &theirs), 0);
  EXPECT_TRUE(CPU_EQUAL(&mine, &theirs)) << "the loop thread keeps the caller's CPU affinity";
  return nice_of(loop);
}

TEST(GlooTcpDevice, OnOneNodeTheLoopThreadRunsAtNice19AndTheCallerKeepsItsPriority) {
  ScopedEnv env;
  env.unset("IDIST_GLOO_LOOP_NICE");
  const int own = nice_of(::gettid());
  EXPECT_EQ(loop_thread_nice(loop_nice_from_env(1, 2)), std::max(own, 19)) << "never below the caller's own priority";
  EXPECT_EQ(nice_of(::gettid()), own) << "the calling thread's priority is untouched";
}

TEST(GlooTcpDevice, LoopNiceFollowsTheVariable) {
  const int own = nice_of(::gettid());
  {
    ScopedEnv env;
    env.set("IDIST_GLOO_LOOP_NICE", "off");
    EXPECT_EQ(loop_thread_nice(loop_nice_from_env(1, 2)), own);
  }
  {
    ScopedEnv env;
    env.set("IDIST_GLOO_LOOP_NICE", "12");
    EXPECT_EQ(loop_thread_nice(loop_nice_from_env(2, 2)), std::max(own, 12));
  }
  {
    ScopedEnv env;
    env.unset("IDIST_GLOO_LOOP_NICE");
    EXPECT_EQ(loop_thread_nice(loop_nice_from_env(2, 2)), own) << "across nodes the loop keeps the caller's priority";
    EXPECT_EQ(loop_thread_nice(loop_nice_from_env(2, 1)), std::max(own, 10))
        << "across nodes on one CPU the loop shares the training thread's core";
  }
}

TEST(GlooTcpDevice, LoopNiceVariableIsParsedOrRefusedByName) {
  {
    ScopedEnv env;
    env.set("IDIST_GLOO_LOOP_NICE", "");
    EXPECT_EQ(loop_nice_from_env(1, 2), std::optional<int>(idist::gloo_backend::kDefaultLoopNice));
    EXPECT_EQ(loop_nice_from_env(1, 1), std::optional<int>(idist::gloo_backend::kDefaultLoopNice));
    EXPECT_EQ(loop_nice_from_env(3, 2), std::nullopt);
    EXPECT_EQ(loop_nice_from_env(3, 1), std::optional<int>(idist::gloo_backend::kPinnedCrossNodeLoopNice));
  }
  for (const char* off : {"off", "0"}) {
    ScopedEnv env;
    env.set("IDIST_GLOO_LOOP_NICE", off);
    EXPECT_EQ(loop_nice_from_env(1, 2), std::nullopt) << off;
    EXPECT_EQ(loop_nice_from_env(2, 1), std::nullopt) << off;
  }
  {
    ScopedEnv env;
    env.set("IDIST_GLOO_LOOP_NICE", "7");
    EXPECT_EQ(loop_nice_from_env(1, 2), std::optional<int>(7));
    EXPECT_EQ(loop_nice_from_env(2, 1), std::optional<int>(7));
  }
  for (const char* bad : {"20", "-5", "high", "1.5", " 3"}) {
    ScopedEnv env;
    env.set("IDIST_GLOO_LOOP_NICE", bad);
    const std::string what = message_of([] { (void)loop_nice_from_env(1, 2); });
    EXPECT_NE(what, "") << "IDIST_GLOO_LOOP_NICE='" << bad << "' was accepted";
    EXPECT_NE(what.find("IDIST_GLOO_LOOP_NICE"), std::string::npos) << what;
    EXPECT_NE(what.find(std::string("'") + bad + "'"), std::string::npos) << what;
    EXPECT_NE(what.find("1 to 19"), std::string::npos) << what;
    EXPECT_THROW((void)loop_nice_from_env(2, 1), idist::ValueError) << bad;
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
