// GlooModel: the rooted reductions, gathers and scatters, reduce_scatter and all_to_all(v), each on
// Gloo's own algorithm (gloo::reduce, gather, scatter, alltoall, alltoallv and, on groups whose size
// is a power of two, ReduceScatterHalvingDoubling).
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>
#include <gloo/scatter.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "backend_kit/host_reduce.hpp"
#include "gloo/call_tag.hpp"
#include "gloo/issue.hpp"

namespace idist::gloo_backend {

namespace {

template <class T>
T* typed(const void* p) {
  return static_cast<T*>(const_cast<void*>(p));
}

// ReduceScatterHalvingDoubling takes a typed function pointer; the reduction idist uses (chosen at
// run time from the dtype and op) reaches it through this thread's slot, set around the call.
thread_local backend_kit::ReduceFn current_reduce = nullptr;

template <class T>
void reduce_with_current(T* x, const T* y, std::size_t n) {
  current_reduce(x, x, y, n);
}

}  // namespace

Work GlooModel::reduce_to_root(const Reduction& r, Completion how) {
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

namespace {
// Each group rank's block length: out.count for all of them (ReduceScatter), or r.counts (ReduceScatterV).
std::vector<int> block_counts(const Reduction& r) {
  if (r.op == OpType::ReduceScatterV) return std::vector<int>(r.counts.begin(), r.counts.end());
  return std::vector<int>(std::size_t(r.group.size()), int(r.out.count));
}
}  // namespace

Work GlooModel::reduce_scatter(const Reduction& r, Completion how) {
  const backend_kit::ReduceFn fn = backend_kit::reduce_function(r.in.dtype, r.reduce_op);
  const ConstBuffer in = r.in;
  const Buffer out = r.out;
  if (in.count == 0) return Work{};
  if (in.count > std::size_t(INT_MAX))
    throw BackendError(fmt::format("{} on rank {}: {} elements exceed the int counts of Gloo's reduce_scatter",
                                   to_string(r.op), rank(), in.count));
  const auto& group = static_cast<const GlooGroup&>(r.group);
  const int n = group.size();
  std::vector<int> blocks = block_counts(r);
  // An empty block beyond two ranks left ReduceScatterHalvingDoubling waiting (4 ranks, blocks 3, 0, 7, 9).
  const bool empty_block = n > 2 && std::find(blocks.begin(), blocks.end(), 0) != blocks.end();
  if ((n & (n - 1)) != 0 || empty_block) return reduce_scatter_by_allreduce(r, how);
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

// Gloo's ReduceScatterHalvingDoubling gave wrong sums on 3 ranks (a peer's block counted twice, in
// the exchange between binary blocks that only groups of other sizes than powers of two have), and
// waited forever for an empty block at 4: there the group runs gloo::allreduce (ring) on a copy and
// keeps its block, twice the traffic but exact.
Work GlooModel::reduce_scatter_by_allreduce(const Reduction& r, Completion how) {
  const backend_kit::ReduceFn fn = backend_kit::reduce_function(r.in.dtype, r.reduce_op);
  const ConstBuffer in = r.in;
  const Buffer out = r.out;
  const std::vector<int> blocks = block_counts(r);
  const std::size_t offset =
      dtype_size(in.dtype) * std::size_t(std::accumulate(blocks.begin(), blocks.begin() + r.group.rank(), 0L));
  const std::uint32_t tag = call_tag(in.dtype, in.count, int(r.reduce_op), -1);
  const auto timeout = this->timeout();
  return issue(r.group, r.op, how, [=, retained = retained_.get()](gloo::Context& ctx) {
    auto work = std::make_shared<std::vector<std::byte>>(in.bytes());
    std::memcpy(work->data(), in.data, in.bytes());
    try {
      retained->run<gloo::AllreduceOptions>(borrow(ctx), [&](gloo::AllreduceOptions& o) {
        with_element_type(dtype_size(in.dtype), [&](auto t) {
          using T = decltype(t);
          o.setOutput<T>(reinterpret_cast<T*>(work->data()), in.count);
        });
        o.setReduceFunction(fn);
        o.setTag(tag);
        o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        o.setTimeout(timeout);
        gloo::allreduce(o);
      });
    } catch (...) {
      retained->keep(work);
      throw;
    }
    std::memcpy(out.data, work->data() + offset, out.bytes());
  });
}

Work GlooModel::gather_to_root(const Gathering& g, Completion how) {
  const ConstBuffer in = g.in;
  const Buffer out = g.out;
  if (in.count == 0) return Work{};
  const int root = g.root;
  const bool is_root = g.group.rank() == root;
  const std::uint32_t tag = call_tag(in.dtype, in.count, -1, root);
  const auto timeout = this->timeout();
  return issue(g.group, g.op, how, [=, retained = retained_.get()](gloo::Context& ctx) {
    retained->run<gloo::GatherOptions>(borrow(ctx), [&](gloo::GatherOptions& o) {
      with_element_type(dtype_size(in.dtype), [&](auto t) {
        using T = decltype(t);
        o.setInput<T>(typed<T>(in.data), in.count);
        if (is_root) o.setOutput<T>(typed<T>(out.data), out.count);
      });
      o.setRoot(root);
      o.setTag(tag);
      o.setTimeout(timeout);
      gloo::gather(o);
    });
  });
}

Work GlooModel::scatter_from_root(const Distribution& d, Completion how) {
  const ConstBuffer in = d.in;
  const Buffer out = d.out;
  if (out.count == 0) return Work{};
  const int root = d.root;
  const bool is_root = d.group.rank() == root;
  const std::size_t n = std::size_t(d.group.size());
  const std::uint32_t tag = call_tag(out.dtype, out.count, -1, root);
  const auto timeout = this->timeout();
  return issue(d.group, d.op, how, [=, retained = retained_.get()](gloo::Context& ctx) {
    retained->run<gloo::ScatterOptions>(borrow(ctx), [&](gloo::ScatterOptions& o) {
      with_element_type(dtype_size(out.dtype), [&](auto t) {
        using T = decltype(t);
        if (is_root) {
          std::vector<T*> blocks(n);
          for (std::size_t i = 0; i < n; ++i) blocks[i] = typed<T>(in.data) + i * out.count;
          o.setInputs<T>(blocks, out.count);
        }
        o.setOutput<T>(typed<T>(out.data), out.count);
      });
      o.setRoot(root);
      o.setTag(tag);
      o.setTimeout(timeout);
      gloo::scatter(o);
    });
  });
}

Work GlooModel::all_to_all(const Distribution& d, Completion how) {
  const ConstBuffer in = d.in;
  const Buffer out = d.out;
  const auto timeout = this->timeout();
  if (d.op == OpType::AllToAll) {
    if (in.count == 0) return Work{};
    const std::uint32_t tag = call_tag(in.dtype, in.count, -1, -1);
    return issue(d.group, d.op, how, [=, retained = retained_.get()](gloo::Context& ctx) {
      retained->run<gloo::AlltoallOptions>(borrow(ctx), [&](gloo::AlltoallOptions& o) {
        with_element_type(dtype_size(in.dtype), [&](auto t) {
          using T = decltype(t);
          o.setInput<T>(typed<T>(in.data), in.count);
          o.setOutput<T>(typed<T>(out.data), out.count);
        });
        o.setTag(tag);
        o.setTimeout(timeout);
        gloo::alltoall(o);
      });
    });
  }
  std::vector<std::int64_t> sends(d.in_counts.begin(), d.in_counts.end());
  std::vector<std::int64_t> receives(d.counts.begin(), d.counts.end());
  // The ranks' totals differ: the tag carries only what they share.
  const std::uint32_t tag = call_tag(in.dtype, 0, -1, -1);
  return issue(
      d.group, d.op, how,
      [=, sends = std::move(sends), receives = std::move(receives), retained = retained_.get()](gloo::Context& ctx) {
        retained->run<gloo::AlltoallvOptions>(borrow(ctx), [&](gloo::AlltoallvOptions& o) {
          with_element_type(dtype_size(in.dtype), [&](auto t) {
            using T = decltype(t);
            o.setInput<T>(typed<T>(in.data), sends);
            o.setOutput<T>(typed<T>(out.data), receives);
          });
          o.setTag(tag);
          o.setTimeout(timeout);
          gloo::alltoallv(o);
        });
      });
}

}  // namespace idist::gloo_backend
