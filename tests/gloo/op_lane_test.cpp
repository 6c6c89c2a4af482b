// OpLane, the per-group executor of the gloo backend, in one process: issue order, who runs an
// operation (the waiting thread or the worker), background progress without a waiter, short waits
// that leave the operation running, error propagation and cancellation at stop().
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gloo/op_lane.hpp"
#include "idist/error.hpp"
#include "idist/work.hpp"

namespace {

using idist::gloo_backend::OpLane;
using Clock = std::chrono::steady_clock;
constexpr auto kLong = std::chrono::seconds(30);

idist::Work submit(OpLane& lane, OpLane::Op op, std::chrono::milliseconds timeout = kLong) {
  return idist::Work(lane.submit(std::move(op), Clock::now() + timeout), idist::OpType::AllReduce, 0, timeout);
}

TEST(OpLane, RunsOperationsInIssueOrderWhateverTheWaitOrder) {
  OpLane lane("test");
  std::mutex m;
  std::vector<int> order;
  std::vector<idist::Work> works;
  for (int i = 0; i < 50; ++i)
    works.push_back(submit(lane, [&, i] {
      std::lock_guard lock(m);
      order.push_back(i);
    }));
  for (int i = 49; i >= 0; --i) works[std::size_t(i)].wait();
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[std::size_t(i)], i);
}

TEST(OpLane, AWaitingCallerRunsItsOperationOnItsOwnThread) {
  OpLane lane("test");
  int inline_runs = 0;
  for (int i = 0; i < 100; ++i) {
    std::thread::id ran_on;
    idist::Work w = submit(lane, [&] { ran_on = std::this_thread::get_id(); });
    w.wait();
    inline_runs += ran_on == std::this_thread::get_id();
  }
  // The worker only takes operations nobody claimed within its grace period; a caller that waits
  // at once claims practically all of them (a few may go to the worker on a loaded machine).
  EXPECT_GE(inline_runs, 90);
}

TEST(OpLane, AnOperationNobodyWaitsForProgressesOnTheWorker) {
  OpLane lane("test");
  std::atomic<bool> ran{false};
  std::thread::id ran_on;
  idist::Work w = submit(lane, [&] {
    ran_on = std::this_thread::get_id();
    ran = true;
  });
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!ran && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(ran.load()) << "a non-blocking operation must start without a waiter";
  EXPECT_NE(ran_on, std::this_thread::get_id());
  w.wait();
  EXPECT_TRUE(w.is_completed());
}

TEST(OpLane, AShortWaitTimesOutAndLeavesTheOperationToTheWorker) {
  OpLane lane("test");
  std::atomic<bool> release{false};
  std::atomic<int> runs{0};
  // The first operation blocks until released; the second queues behind it.
  idist::Work first = submit(lane, [&] {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  idist::Work second = submit(lane, [&] { ++runs; });
  EXPECT_THROW(second.wait(std::chrono::milliseconds(20)), idist::TimeoutError);
  release = true;
  second.wait();
  first.wait();
  EXPECT_EQ(runs.load(), 1);
}

TEST(OpLane, AnOperationsExceptionReachesItsWaiterOnly) {
  OpLane lane("test");
  idist::Work bad = submit(lane, [] { throw idist::BackendError("the peer went away"); });
  idist::Work good = submit(lane, [] {});
  try {
    bad.wait();
    ADD_FAILURE() << "the operation's error was not rethrown";
  } catch (const idist::BackendError& e) {
    EXPECT_STREQ(e.what(), "the peer went away");
  }
  EXPECT_NO_THROW(good.wait());
}

TEST(OpLane, StopCancelsWhatHasNotStarted) {
  auto lane = std::make_unique<OpLane>("group [0, 2]");
  std::atomic<bool> started{false}, release{false};
  idist::Work running = submit(*lane, [&] {
    started = true;
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!started && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(started.load());
  bool queued_ran = false;
  idist::Work queued = submit(*lane, [&] { queued_ran = true; });
  std::thread stopper([&] { lane->stop("shutting down"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  release = true;  // stop() waits for the running operation
  stopper.join();
  EXPECT_NO_THROW(running.wait());
  try {
    queued.wait();
    ADD_FAILURE() << "a cancelled operation must fail";
  } catch (const idist::BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("shutting down"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("group [0, 2]"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(queued_ran);
  // After stop, submissions fail at once.
  EXPECT_THROW(submit(*lane, [] {}).wait(), idist::BackendError);
}

}  // namespace
