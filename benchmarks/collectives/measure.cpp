#include "collectives/measure.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <numeric>
#include <span>
#include <thread>

#include "common/timing.hpp"
#include "idist/collectives.hpp"
#include "idist/context.hpp"

namespace idist_bench {

namespace {

/// The buffers of one (op, size) and the operation on them through each variant.
class Case {
 public:
  Case(std::string op, std::size_t bytes) : op_(std::move(op)), n_(idist::get_world_size()), rank_(idist::get_rank()) {
    if (op_ == "barrier") return;
    count_ = op_ == "all_gather" ? bytes / sizeof(float) / std::size_t(n_) : bytes / sizeof(float);
    // reduce_scatter and all_to_all: `bytes` is the input, world size blocks of equal length.
    if (blocked()) count_ -= count_ % std::size_t(n_);
    in_.assign(count_, 0.0f);
    if (op_ == "all_gather") out_.assign(count_ * std::size_t(n_), 0.0f);
    if (op_ == "reduce_scatter") out_.assign(count_ / std::size_t(n_), 0.0f);
    if (op_ == "all_to_all") out_.assign(count_, 0.0f);
  }
  bool blocked() const { return op_ == "reduce_scatter" || op_ == "all_to_all"; }
  std::size_t count() const { return count_; }
  std::size_t bytes() const {
    return op_ == "all_gather" ? count_ * std::size_t(n_) * sizeof(float) : count_ * sizeof(float);
  }

  /// One operation through `v`.
  void run(const Variant& v) {
    if (!v.raw) {
      if (op_ == "all_reduce") {
        idist::all_reduce(std::span<float>(in_), idist::ReduceOp::Sum);
      } else if (op_ == "all_gather") {
        idist::all_gather_into(std::span<const float>(in_), std::span<float>(out_));
      } else if (op_ == "broadcast") {
        idist::broadcast(std::span<float>(in_), 0);
      } else if (op_ == "reduce_scatter") {
        // No span form: the front door every tensor form goes through, blocking.
        idist::current_model().reduce_scatter(idist::ConstBuffer(in_.data(), in_.size(), idist::DType::Float32),
                                              idist::Buffer{out_.data(), out_.size(), idist::DType::Float32},
                                              idist::ReduceOp::Sum, {}, idist::Completion::Blocking);
      } else if (op_ == "all_to_all") {
        idist::current_model().all_to_all(idist::ConstBuffer(in_.data(), in_.size(), idist::DType::Float32),
                                          idist::Buffer{out_.data(), out_.size(), idist::DType::Float32}, {},
                                          idist::Completion::Blocking);
      } else {
        idist::barrier();
      }
    } else {
      if (op_ == "all_reduce") {
        v.raw->all_reduce_sum(in_.data(), count_);
      } else if (op_ == "all_gather") {
        v.raw->all_gather(in_.data(), out_.data(), count_);
      } else if (op_ == "broadcast") {
        v.raw->broadcast(in_.data(), count_, 0);
      } else if (op_ == "reduce_scatter") {
        v.raw->reduce_scatter_sum(in_.data(), out_.data(), count_ / std::size_t(n_));
      } else if (op_ == "all_to_all") {
        v.raw->all_to_all(in_.data(), out_.data(), count_ / std::size_t(n_));
      } else {
        v.raw->barrier();
      }
    }
  }

  /// Fills the buffers with rank-dependent values, runs the op once through `v` and returns the
  /// number of wrong elements on this rank. Every value involved is an exact float.
  long long check(const Variant& v) {
    if (op_ == "barrier") {
      run(v);
      return 0;
    }
    for (std::size_t i = 0; i < count_; ++i) {
      if (op_ == "all_reduce" || op_ == "reduce_scatter") in_[i] = float(rank_ + 1 + int(i % 5));
      if (op_ == "all_to_all") in_[i] = float(rank_ * 4096 + int(i % 4096));
      if (op_ == "all_gather") in_[i] = float(rank_ * 4096 + int(i % 4096));
      if (op_ == "broadcast") in_[i] = rank_ == 0 ? float(i % 4099) + 0.5f : -1.0f;
    }
    std::fill(out_.begin(), out_.end(), -1.0f);
    run(v);
    long long wrong = 0;
    if (op_ == "all_reduce") {
      for (std::size_t i = 0; i < count_; ++i) wrong += in_[i] != float(n_ * (n_ + 1) / 2 + n_ * int(i % 5));
    } else if (op_ == "reduce_scatter") {
      const std::size_t k = out_.size();
      for (std::size_t j = 0; j < k; ++j)
        wrong += out_[j] != float(n_ * (n_ + 1) / 2 + n_ * int((std::size_t(rank_) * k + j) % 5));
    } else if (op_ == "all_to_all") {
      const std::size_t k = count_ / std::size_t(n_);
      for (int r = 0; r < n_; ++r)
        for (std::size_t q = 0; q < k; ++q)
          wrong += out_[std::size_t(r) * k + q] != float(r * 4096 + int((std::size_t(rank_) * k + q) % 4096));
    } else if (op_ == "all_gather") {
      for (int r = 0; r < n_; ++r)
        for (std::size_t i = 0; i < count_; ++i)
          wrong += out_[std::size_t(r) * count_ + i] != float(r * 4096 + int(i % 4096));
    } else {
      for (std::size_t i = 0; i < count_; ++i) wrong += in_[i] != float(i % 4099) + 0.5f;
    }
    std::fill(in_.begin(), in_.end(), 0.0f);  // timed runs reduce zeros: no overflow, no denormals
    return wrong;
  }

 private:
  std::string op_;
  int n_;
  int rank_;
  std::size_t count_ = 0;
  std::vector<float> in_;
  std::vector<float> out_;
};

}  // namespace

double bus_factor(const std::string& op, int n) {
  if (op == "all_reduce") return 2.0 * (n - 1) / n;
  if (op == "all_gather") return double(n - 1) / n;
  if (op == "broadcast") return 1.0;
  if (op == "reduce_scatter" || op == "all_to_all") return double(n - 1) / n;
  return 0.0;
}

Measurement measure(const std::string& op, std::size_t bytes, const std::vector<Variant>& variants,
                    const Schedule& schedule) {
  Case c(op, bytes);
  Measurement m;
  m.op = op;
  m.count = c.count();
  m.bytes = c.bytes();
  if (op != "barrier" && c.count() == 0) return m;

  // Something to synchronise the start of each block with: the first raw backend, else idist.
  RawBackend* sync = nullptr;
  for (const auto& v : variants)
    if (v.raw && !sync) sync = v.raw;
  const auto align = [&] {
    if (sync)
      sync->barrier();
    else
      idist::barrier();
  };

  const std::size_t nv = variants.size();
  for (std::size_t k = 0; k < nv; ++k)
    for (int i = 0; i < schedule.warmup; ++i) c.run(variants[k]);

  std::vector<std::vector<double>> samples(nv);
  for (auto& s : samples) s.reserve(std::size_t(schedule.iters));
  // The order of the variants within a block cycles through every permutation (up to 4 variants;
  // beyond, a rotation), so that each variant follows each other one equally often. A plain rotation
  // of three variants puts one variant after the same predecessor in two blocks of three, and the
  // state a call leaves behind (caches, the single-copy path) then biases that variant's times.
  std::vector<std::vector<std::size_t>> orders;
  std::vector<std::size_t> order(nv);
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (nv <= 4) {
    do orders.push_back(order);
    while (std::next_permutation(order.begin(), order.end()));
  } else {
    for (std::size_t r = 0; r < nv; ++r, std::rotate(order.begin(), order.begin() + 1, order.end()))
      orders.push_back(order);
  }
  const int blocks = std::min(schedule.blocks, schedule.iters);
  for (int b = 0; b < blocks; ++b) {
    // Block b has iters/blocks iterations (the first iters%blocks blocks one more).
    const int len = schedule.iters / blocks + (b < schedule.iters % blocks ? 1 : 0);
    for (std::size_t j = 0; j < nv; ++j) {
      const std::size_t k = orders[std::size_t(b) % orders.size()][j];
      align();
      for (int i = 0; i < len; ++i) {
        if (schedule.skew_us > 0) align();
        // With a skew, every rank times from rank 0's (late) start; the others call at once.
        const auto t0 = Clock::now() + std::chrono::microseconds(schedule.skew_us);
        if (schedule.skew_us > 0 && idist::get_rank() == 0) std::this_thread::sleep_until(t0);
        c.run(variants[k]);
        const auto t1 = Clock::now();
        samples[k].push_back(micros(t0, t1));
      }
    }
  }

  for (std::size_t k = 0; k < nv; ++k) {
    max_over_ranks(samples[k]);
    m.times.push_back(summarize(samples[k]));
    const long long wrong = c.check(variants[k]);
    m.wrong.push_back(idist::get_world_size() > 1 ? idist::all_reduce(wrong, idist::ReduceOp::Sum) : wrong);
  }
  return m;
}

}  // namespace idist_bench
