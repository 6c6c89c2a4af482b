// Work handles: completion from another thread, deadline-bounded waits, continuations, errors.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/work_impl.hpp"
#include "idist/error.hpp"

namespace {

using namespace std::chrono_literals;
using idist::Work;
using idist::core::AsyncWorkImpl;

Work make_work(const std::shared_ptr<AsyncWorkImpl>& impl, idist::OpType op = idist::OpType::AllReduce, int rank = 3,
               std::chrono::milliseconds timeout = 60s) {
  return Work(impl, op, rank, timeout);
}

TEST(Work, DefaultConstructedIsCompleted) {
  Work w;
  EXPECT_TRUE(w.is_completed());
  w.wait();  // returns at once
  w.wait(0ms);
  int runs = 0;
  w.then([&] { ++runs; });  // already complete: runs immediately
  EXPECT_EQ(runs, 1);
  w.wait();
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(w.op(), "");  // it names no operation
  Work copy = w;          // copies of a finished Work are finished too
  EXPECT_TRUE(copy.is_completed());
  copy.then([&] { ++runs; });
  EXPECT_EQ(runs, 2);
}

TEST(Work, FinishedFromAnotherThread) {
  auto impl = std::make_shared<AsyncWorkImpl>();
  Work w = make_work(impl);
  EXPECT_EQ(w.op(), "all_reduce");
  EXPECT_FALSE(w.is_completed());
  std::atomic<bool> finished{false};
  std::thread worker([&] {
    std::this_thread::sleep_for(50ms);
    finished = true;
    impl->finish();
  });
  w.wait();
  EXPECT_TRUE(finished.load());  // wait() did not return before finish()
  EXPECT_TRUE(w.is_completed());
  worker.join();
}

TEST(Work, IsCompletedTurnsTrueWithoutWait) {
  auto impl = std::make_shared<AsyncWorkImpl>();
  Work w = make_work(impl);
  std::thread worker([&] { impl->finish(); });
  worker.join();
  EXPECT_TRUE(impl->test());
  EXPECT_TRUE(w.is_completed());
  w.wait();
}

TEST(Work, ShortTimeoutThrowsTimeoutErrorNamingOpAndRank) {
  auto impl = std::make_shared<AsyncWorkImpl>();
  Work w = make_work(impl, idist::OpType::Broadcast, 5);
  const auto start = std::chrono::steady_clock::now();
  try {
    w.wait(30ms);
    FAIL() << "wait() returned on an unfinished operation";
  } catch (const idist::TimeoutError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("broadcast"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank 5"), std::string::npos) << msg;
    EXPECT_NE(msg.find("30 ms"), std::string::npos) << msg;
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, 30ms);  // it did wait
  EXPECT_FALSE(w.is_completed());
  // The operation can still complete afterwards.
  impl->finish();
  w.wait(1s);
  EXPECT_TRUE(w.is_completed());
}

TEST(Work, TimeoutErrorIsAnIdistError) {
  auto impl = std::make_shared<AsyncWorkImpl>();
  Work w = make_work(impl);
  EXPECT_THROW(w.wait(1ms), idist::Error);
  impl->finish();
}

TEST(Work, DefaultWaitUsesTheTimeoutGivenAtCreation) {
  auto impl = std::make_shared<AsyncWorkImpl>();
  Work w = make_work(impl, idist::OpType::Barrier, 0, 40ms);
  const auto start = std::chrono::steady_clock::now();
  try {
    w.wait();
    FAIL() << "wait() returned on an unfinished operation";
  } catch (const idist::TimeoutError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("barrier"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank 0"), std::string::npos) << msg;
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, 40ms);
  impl->finish();
}

TEST(Work, ContinuationsRunExactlyOnceInOrder) {
  auto impl = std::make_shared<AsyncWorkImpl>();
  Work w = make_work(impl);
  std::string trace;
  auto kept = std::make_shared<int>(7);
  std::weak_ptr<int> watch = kept;
  w.then([&] { trace += "a"; }, kept).then([&] { trace += "b"; });
  kept.reset();
  EXPECT_FALSE(watch.expired()) << "keep_alive released before completion";
  EXPECT_EQ(trace, "");
  Work copy = w;  // copies share the state
  impl->finish();
  EXPECT_EQ(trace, "") << "continuations run in wait(), not in finish()";
  copy.wait();
  EXPECT_EQ(trace, "ab");
  EXPECT_TRUE(watch.expired()) << "keep_alive held after completion";
  w.wait();
  copy.wait();
  EXPECT_TRUE(w.is_completed());
  EXPECT_EQ(trace, "ab");
  w.then([&] { trace += "c"; });  // added after completion: runs at once, once
  w.wait();
  EXPECT_EQ(trace, "abc");
}

TEST(Work, ConcurrentWaitersRunContinuationsOnce) {
  auto impl = std::make_shared<AsyncWorkImpl>();
  Work w = make_work(impl);
  std::atomic<int> runs{0};
  w.then([&] { ++runs; });
  std::thread a([w]() mutable { w.wait(); });
  std::thread b([w]() mutable { w.wait(); });
  std::this_thread::sleep_for(10ms);
  impl->finish();
  a.join();
  b.join();
  w.wait();
  EXPECT_EQ(runs.load(), 1);
}

TEST(Work, ErrorPassedToFinishIsRethrownAndSkipsContinuations) {
  auto impl = std::make_shared<AsyncWorkImpl>();
  Work w = make_work(impl);
  bool ran = false;
  w.then([&] { ran = true; });
  std::thread worker([&] { impl->finish(std::make_exception_ptr(idist::BackendError("peer 2 disconnected"))); });
  worker.join();
  EXPECT_TRUE(w.is_completed());
  try {
    w.wait();
    FAIL() << "the error given to finish() was not rethrown";
  } catch (const idist::BackendError& e) {
    EXPECT_STREQ(e.what(), "peer 2 disconnected");
  }
  EXPECT_FALSE(ran);
  // Every later wait reports the failure too.
  EXPECT_THROW(w.wait(), idist::BackendError);
}

TEST(Work, NonIdistErrorsPassThroughUnchanged) {
  auto impl = std::make_shared<AsyncWorkImpl>();
  Work w = make_work(impl);
  impl->finish(std::make_exception_ptr(std::logic_error("custom")));
  EXPECT_THROW(w.wait(), std::logic_error);
}

TEST(Work, AContinuationReturningAValueGivesTheWorkThatValue) {
  auto impl = std::make_shared<AsyncWorkImpl>();
  Work w = make_work(impl);
  int runs = 0;
  w.then([&] { ++runs; }).then([&] { return runs * 10; });
  EXPECT_FALSE(w.has_value());  // nothing has run yet
  impl->finish();
  EXPECT_EQ(w.value<int>(), 10);  // value() waits, then reads
  EXPECT_EQ(runs, 1);
  // Asking for another type names the operation and both types.
  try {
    w.value<double>();
    ADD_FAILURE() << "an int was read as a double";
  } catch (const idist::ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("all_reduce"), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected a value of type"), std::string::npos) << msg;
  }
  // A Work without value says so.
  Work none;
  EXPECT_FALSE(none.has_value());
  EXPECT_THROW(none.value<int>(), idist::ValueError);
}

TEST(Work, ReadyHoldsAValueAndAValueContinuationOnACompletedWorkKeepsIt) {
  Work ready = Work::ready(std::string("bucket"));
  EXPECT_TRUE(ready.is_completed());
  EXPECT_EQ(ready.value<std::string>(), "bucket");
  Work done;  // completed, no state: the continuation runs at once and its value is kept
  done.then([] { return 7; });
  EXPECT_EQ(done.value<int>(), 7);
}

TEST(Work, AfterCompletesWithItsFirstWorkButKeepsItsOwnContinuations) {
  auto impl = std::make_shared<AsyncWorkImpl>();
  Work first = make_work(impl, idist::OpType::Broadcast);
  std::string trace;
  first.then([&] { trace += "first "; });
  Work next = Work::after(first);
  next.then([&] {
    trace += "next";
    return 1;
  });
  EXPECT_EQ(next.op(), "broadcast");
  EXPECT_FALSE(next.is_completed());
  impl->finish();
  EXPECT_TRUE(next.is_completed());
  first.wait();  // runs only first's continuation
  EXPECT_EQ(trace, "first ");
  EXPECT_FALSE(first.has_value());
  EXPECT_EQ(next.value<int>(), 1);
  EXPECT_EQ(trace, "first next");
  // A bounded wait on an unfinished first Work times out naming it.
  auto stuck = std::make_shared<AsyncWorkImpl>();
  Work later = Work::after(make_work(stuck, idist::OpType::Barrier));
  try {
    later.wait(20ms);
    ADD_FAILURE() << "an unfinished Work completed";
  } catch (const idist::TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("barrier"), std::string::npos) << e.what();
  }
  stuck->finish();
}

}  // namespace
