// GlooBackend's distributions: broadcast (gloo::broadcast), the rooted scatter (gloo::scatter),
// all_to_all (gloo::alltoall) and all_to_all_v (gloo::alltoallv).
#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/broadcast.h>
#include <gloo/scatter.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "backend_kit/op_family.hpp"
#include "gloo/call_tag.hpp"
#include "gloo/issue.hpp"

namespace idist::gloo_backend {

Work GlooBackend::do_distribute(const Distribution& d, Completion how) {
  switch (d.op) {
    case OpType::Broadcast: return broadcast(d, how);
    case OpType::Scatter: return scatter_from_root(d, how);
    case OpType::AllToAll: return all_to_all(d, how);
    case OpType::AllToAllV:
      return all_to_all_v(d, how);
    IDIST_OPTYPES_OUTSIDE_DISTRIBUTION:
      break;
  }
  backend_kit::outside_family(d.op, backend_kit::OpFamily::Distribution);
}

Work GlooBackend::broadcast(const Distribution& d, Completion how) {
  const Buffer data = d.out;
  const int root = d.root;
  if (data.count == 0) return Work{};
  const auto timeout = this->timeout();
  return issue(d.group, d.op, how, [data, root, timeout, retained = retained_.get()](gloo::Context& ctx) {
    retained->run<gloo::BroadcastOptions>(borrow(ctx), [&](gloo::BroadcastOptions& o) {
      with_element_type(dtype_size(data.dtype), [&](auto t) {
        using T = decltype(t);
        o.setOutput<T>(static_cast<T*>(data.data), data.count);
      });
      o.setRoot(root);
      o.setTag(call_tag(data.dtype, data.count, -1, root));
      o.setTimeout(timeout);
      gloo::broadcast(o);
    });
  });
}

Work GlooBackend::scatter_from_root(const Distribution& d, Completion how) {
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

Work GlooBackend::all_to_all(const Distribution& d, Completion how) {
  const ConstBuffer in = d.in;
  const Buffer out = d.out;
  const auto timeout = this->timeout();
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

Work GlooBackend::all_to_all_v(const Distribution& d, Completion how) {
  const ConstBuffer in = d.in;
  const Buffer out = d.out;
  const auto timeout = this->timeout();
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
