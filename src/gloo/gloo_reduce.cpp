// GlooBackend's reductions: all_reduce (gloo::allreduce, ring or bcube; across hosts the posted
// all-reduce of gloo_posted.cpp), the rooted reduce (gloo::reduce), reduce_scatter and
// reduce_scatter_v (ReduceScatterHalvingDoubling with equal blocks on groups whose size is a power of
// two, else the posted reduce-scatter of gloo_posted.cpp).
#include <gloo/allreduce.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstring>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "backend_kit/host_reduce.hpp"
#include "backend_kit/op_family.hpp"
#include "gloo/call_tag.hpp"
#include "gloo/issue.hpp"
#include "idist/error.hpp"

namespace idist::gloo_backend {

namespace {

// ReduceScatterHalvingDoubling takes a typed function pointer; the reduction idist uses (chosen at
// run time from the dtype and op) reaches it through this thread's slot, set around the call.
thread_local backend_kit::ReduceFn current_reduce = nullptr;

template <class T>
void reduce_with_current(T* x, const T* y, std::size_t n) {
  current_reduce(x, x, y, n);
}

}  // namespace

Work GlooBackend::do_reduce(const Reduction& r, Completion how) {
  switch (r.op) {
    case OpType::AllReduce: return all_reduce(r, how);
    case OpType::Reduce: return reduce_to_root(r, how);
    // Each group rank's block length: out.count for all of them, or r.counts.
    case OpType::ReduceScatter:
      return reduce_scatter(r, std::vector<int>(std::size_t(r.group.size()), int(r.out.count)), how);
    case OpType::ReduceScatterV:
      return reduce_scatter(r, std::vector<int>(r.counts.begin(), r.counts.end()), how);
    IDIST_OPTYPES_OUTSIDE_REDUCTION:
      break;
  }
  backend_kit::outside_family(r.op, backend_kit::OpFamily::Reduction);
}

Work GlooBackend::all_reduce(const Reduction& r, Completion how) {
  const Buffer data = r.out;
  if (data.count == 0) return Work{};
  using launch::GlooAllReduce;
  const bool posted =
      all_reduce_algorithm_ == GlooAllReduce::Posted ||
      (all_reduce_algorithm_ == GlooAllReduce::Auto && static_cast<const GlooGroup&>(r.group).spans_hosts);
  if (posted) return posted_all_reduce(r, how);
  const backend_kit::ReduceFn fn = backend_kit::reduce_function(r.out.dtype, r.reduce_op);
  const ReduceOp op = r.reduce_op;
  const auto algorithm = all_reduce_algorithm_ == GlooAllReduce::Bcube ? gloo::AllreduceOptions::Algorithm::BCUBE
                                                                       : gloo::AllreduceOptions::Algorithm::RING;
  const auto timeout = this->timeout();
  return issue(r.group, r.op, how, [data, op, fn, algorithm, timeout, retained = retained_.get()](gloo::Context& ctx) {
    retained->run<gloo::AllreduceOptions>(borrow(ctx), [&](gloo::AllreduceOptions& o) {
      with_element_type(dtype_size(data.dtype), [&](auto t) {
        using T = decltype(t);
        o.setOutput<T>(static_cast<T*>(data.data), data.count);
      });
      o.setReduceFunction(fn);
      o.setTag(call_tag(data.dtype, data.count, int(op), -1));
      o.setAlgorithm(algorithm);
      o.setTimeout(timeout);
      gloo::allreduce(o);
    });
  });
}

Work GlooBackend::reduce_to_root(const Reduction& r, Completion how) {
  const backend_kit::ReduceFn fn = backend_kit::reduce_function(r.out.dtype, r.reduce_op);
  const Buffer data = r.out;
  if (data.count == 0) return Work{};
  const int root = r.root;
  const bool is_root = r.group.rank() == root;
  const std::uint32_t tag = call_tag(data.dtype, data.count, int(r.reduce_op), root);
  const auto timeout = this->timeout();
  return issue(r.group, r.op, how, [=, retained = retained_.get()](gloo::Context& ctx) {
    // Gloo's reduce works in its output on every rank: the others reduce in a copy, so that their
    // buffer keeps its values (as with MPI_Reduce).
    std::shared_ptr<std::vector<std::byte>> copy;
    void* work = data.data;
    if (!is_root) {
      copy = std::make_shared<std::vector<std::byte>>(data.bytes());
      std::memcpy(copy->data(), data.data, data.bytes());
      work = copy->data();
    }
    try {
      retained->run<gloo::ReduceOptions>(borrow(ctx), [&](gloo::ReduceOptions& o) {
        with_element_type(dtype_size(data.dtype), [&](auto t) {
          using T = decltype(t);
          o.setOutput<T>(static_cast<T*>(work), data.count);
        });
        o.setRoot(root);
        o.setReduceFunction(fn);
        o.setTag(tag);
        o.setTimeout(timeout);
        gloo::reduce(o);
      });
    } catch (...) {
      if (copy) retained->keep(copy);
      throw;
    }
  });
}

Work GlooBackend::reduce_scatter(const Reduction& r, std::vector<int> blocks, Completion how) {
  const backend_kit::ReduceFn fn = backend_kit::reduce_function(r.in.dtype, r.reduce_op);
  const ConstBuffer in = r.in;
  const Buffer out = r.out;
  if (in.count == 0) return Work{};
  const auto& group = static_cast<const GlooGroup&>(r.group);
  const int n = group.size();
  // Gloo's ReduceScatterHalvingDoubling gave wrong sums on 3 ranks (a peer's block counted twice, in
  // the exchange between binary blocks that only groups of other sizes than powers of two have), and
  // waited forever for an empty block at 4; with unequal blocks it lasts as long as the longest one.
  const bool equal = std::all_of(blocks.begin(), blocks.end(), [&](int b) { return b == blocks.front(); });
  if (!equal || (n & (n - 1)) != 0) return posted_reduce_scatter(r, blocks, how);
  if (in.count > std::size_t(INT_MAX))
    throw BackendError(fmt::format("{} on rank {}: {} elements exceed the int counts of Gloo's reduce_scatter",
                                   to_string(r.op), rank(), in.count));
  return issue(
      r.group, r.op, how, [=, &group, blocks = std::move(blocks), retained = retained_.get()](gloo::Context& ctx) {
        const std::size_t esize = dtype_size(in.dtype);
        // The algorithm reduces its buffer in place and leaves this rank's block at its start.
        const auto plan = group.reduce_scatters.get(esize, in.count, blocks, [&](ReduceScatterPlan& p) {
          with_element_type(esize, [&](auto t) {
            using T = decltype(t);
            static const gloo::ReductionFunction<T> reduce(gloo::SUM, &reduce_with_current<T>);
            p.algorithm = std::make_shared<gloo::ReduceScatterHalvingDoubling<T>>(
                borrow(ctx), std::vector<T*>{reinterpret_cast<T*>(p.work.data())}, int(in.count), blocks, &reduce);
          });
        });
        std::memcpy(plan->work.data(), in.data, in.bytes());
        const backend_kit::ReduceFn saved = current_reduce;
        current_reduce = fn;
        try {
          plan->algorithm->run();
        } catch (...) {
          current_reduce = saved;
          group.reduce_scatters.drop(plan);
          retained->keep(plan);  // the transport thread may still touch its buffers
          throw;
        }
        current_reduce = saved;
        std::memcpy(out.data, plan->work.data(), out.bytes());
      });
}

}  // namespace idist::gloo_backend
