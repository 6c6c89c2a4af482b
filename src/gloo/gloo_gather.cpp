// GlooBackend's gatherings: all_gather (gloo::allgather), all_gather_v (gloo::allgatherv) and the
// rooted gather (gloo::gather).
#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/gather.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "backend_kit/op_family.hpp"
#include "gloo/call_tag.hpp"
#include "gloo/issue.hpp"

namespace idist::gloo_backend {

Work GlooBackend::do_gather(const Gathering& g, Completion how) {
  switch (g.op) {
    case OpType::AllGather: return all_gather(g, how);
    case OpType::AllGatherV: return all_gather_v(g, how);
    case OpType::Gather:
      return gather_to_root(g, how);
    IDIST_OPTYPES_OUTSIDE_GATHERING:
      break;
  }
  backend_kit::outside_family(g.op, backend_kit::OpFamily::Gathering);
}

Work GlooBackend::all_gather(const Gathering& g, Completion how) {
  const ConstBuffer in = g.in;
  const Buffer out = g.out;
  const auto timeout = this->timeout();
  if (in.count == 0) return Work{};
  return issue(g.group, g.op, how, [in, out, timeout, retained = retained_.get()](gloo::Context& ctx) {
    retained->run<gloo::AllgatherOptions>(borrow(ctx), [&](gloo::AllgatherOptions& o) {
      with_element_type(dtype_size(in.dtype), [&](auto t) {
        using T = decltype(t);
        o.setInput<T>(static_cast<T*>(const_cast<void*>(in.data)), in.count);
        o.setOutput<T>(static_cast<T*>(out.data), out.count);
      });
      o.setTag(call_tag(in.dtype, in.count, -1, -1));
      o.setTimeout(timeout);
      gloo::allgather(o);
    });
  });
}

Work GlooBackend::all_gather_v(const Gathering& g, Completion how) {
  const ConstBuffer in = g.in;
  const Buffer out = g.out;
  const auto timeout = this->timeout();
  const std::size_t total = out.count;  // sum(counts), checked by the front door
  if (total == 0) return Work{};
  std::vector<std::size_t> elements(g.counts.begin(), g.counts.end());
  return issue(
      g.group, g.op, how,
      [in, out, total, elements = std::move(elements), timeout, retained = retained_.get()](gloo::Context& ctx) {
        retained->run<gloo::AllgathervOptions>(borrow(ctx), [&](gloo::AllgathervOptions& o) {
          with_element_type(dtype_size(in.dtype), [&](auto t) {
            using T = decltype(t);
            o.setInput<T>(static_cast<T*>(const_cast<void*>(in.data)), in.count);
            o.setOutput<T>(static_cast<T*>(out.data), elements);
          });
          o.setTag(call_tag(in.dtype, total, -1, -1));
          o.setTimeout(timeout);
          gloo::allgatherv(o);
        });
      });
}

Work GlooBackend::gather_to_root(const Gathering& g, Completion how) {
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

}  // namespace idist::gloo_backend
