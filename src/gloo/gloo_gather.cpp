// GlooBackend's gatherings: the rooted gather (gloo::gather); all_gather and all_gather_v are posted
// (gloo_posted.cpp).
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
    case OpType::AllGather:
      if (g.in.count == 0) return Work{};
      return posted_all_gather(g, std::vector<std::size_t>(std::size_t(g.group.size()), g.in.count), how);
    case OpType::AllGatherV:
      if (g.out.count == 0) return Work{};  // sum(counts), checked by the front door
      return posted_all_gather(g, std::vector<std::size_t>(g.counts.begin(), g.counts.end()), how);
    case OpType::Gather:
      return gather_to_root(g, how);
    IDIST_OPTYPES_OUTSIDE_GATHERING:
      break;
  }
  backend_kit::outside_family(g.op, backend_kit::OpFamily::Gathering);
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
