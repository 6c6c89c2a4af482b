// Work's stream-ordered completion (the nccl backend's contract, checked here with a fake operation):
// wait() without a timeout ends on a stream when the operation allows it, with a timeout or
// synchronize() the host waits, and continuations run exactly once either way.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "core/work_impl.hpp"
#include "idist/error.hpp"

namespace {

using namespace std::chrono_literals;
using idist::Work;

// An operation that finishes when the test says so and may be completed on a stream.
class FakeStreamOp final : public idist::core::WorkImpl {
 public:
  explicit FakeStreamOp(bool stream_ok) : stream_ok_(stream_ok) {}
  bool test() override { return done_; }
  bool wait_until(std::chrono::steady_clock::time_point deadline) override {
    ++host_waits_;
    while (!done_) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(1ms);
    }
    return true;
  }
  bool wait_on_stream() override {
    ++stream_waits_;
    return stream_ok_;
  }
  std::atomic<bool> done_{false};
  std::atomic<int> host_waits_{0};
  std::atomic<int> stream_waits_{0};

 private:
  bool stream_ok_;
};

Work make(const std::shared_ptr<FakeStreamOp>& op) { return Work(op, idist::OpType::AllReduce, 0, 5s); }

TEST(WorkStream, WaitWithoutTimeoutOrdersTheStreamAndDoesNotBlock) {
  auto op = std::make_shared<FakeStreamOp>(true);
  Work w = make(op);
  int runs = 0;
  w.then([&] { ++runs; });
  w.wait();  // the operation has not finished: only a stream wait can return here
  EXPECT_EQ(op->stream_waits_, 1);
  EXPECT_EQ(op->host_waits_, 0);
  EXPECT_EQ(runs, 1);
  EXPECT_FALSE(w.is_completed()) << "the GPU is not past the operation yet";
  w.wait();  // waited already: nothing more
  EXPECT_EQ(op->stream_waits_, 1);
  EXPECT_EQ(runs, 1);
  op->done_ = true;
  EXPECT_TRUE(w.is_completed());
  w.synchronize();  // the host waits now, continuations do not run again
  EXPECT_EQ(op->host_waits_, 1);
  EXPECT_EQ(runs, 1);
}

TEST(WorkStream, SynchronizeBlocksTheHostUntilTheOperationFinished) {
  auto op = std::make_shared<FakeStreamOp>(true);
  Work w = make(op);
  w.wait();
  std::thread finisher([&] {
    std::this_thread::sleep_for(50ms);
    op->done_ = true;
  });
  w.synchronize();
  EXPECT_TRUE(op->done_);
  finisher.join();
}

TEST(WorkStream, SynchronizePastItsTimeoutThrows) {
  auto op = std::make_shared<FakeStreamOp>(true);
  Work w = make(op);
  w.wait();
  EXPECT_THROW(w.synchronize(20ms), idist::TimeoutError);
}

TEST(WorkStream, AnExplicitTimeoutMakesTheHostWait) {
  auto op = std::make_shared<FakeStreamOp>(true);
  Work w = make(op);
  EXPECT_THROW(w.wait(20ms), idist::TimeoutError);  // as torch's work.wait(timeout) on NCCL
  EXPECT_EQ(op->stream_waits_, 0);
  op->done_ = true;
  w.wait(1s);
  EXPECT_TRUE(w.is_completed());
}

TEST(WorkStream, AnOperationThatNeedsTheHostIsWaitedForOnTheHost) {
  auto op = std::make_shared<FakeStreamOp>(false);  // host results, say
  Work w = make(op);
  int runs = 0;
  w.then([&] { ++runs; });
  std::thread finisher([&] {
    std::this_thread::sleep_for(30ms);
    op->done_ = true;
  });
  w.wait();
  EXPECT_TRUE(op->done_);
  EXPECT_EQ(op->host_waits_, 1);
  EXPECT_EQ(runs, 1);
  finisher.join();
}

TEST(WorkStream, AFinishedOperationIsNotOrderedOnAStream) {
  auto op = std::make_shared<FakeStreamOp>(true);
  op->done_ = true;
  Work w = make(op);
  w.wait();
  EXPECT_EQ(op->stream_waits_, 0);
  EXPECT_TRUE(w.is_completed());
}

TEST(WorkStream, SynchronizeAloneRunsTheContinuationsOnce) {
  auto op = std::make_shared<FakeStreamOp>(true);
  op->done_ = true;
  Work w = make(op);
  int runs = 0;
  w.then([&] { ++runs; });
  w.synchronize();
  w.wait();
  w.synchronize();
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(op->stream_waits_, 0);
}

}  // namespace
