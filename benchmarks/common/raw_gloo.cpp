// Raw Gloo collectives on the world context of idist's gloo backend (same TCP pairs, same timeout).
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/context.h>
#include <gloo/math.h>

#include "common/raw_backend.hpp"
#include "gloo/gloo_model.hpp"

namespace idist_bench {

namespace {

class RawGloo final : public RawBackend {
 public:
  RawGloo(std::shared_ptr<gloo::Context> ctx, std::chrono::milliseconds timeout) : ctx_(std::move(ctx)), timeout_(timeout) {}

  std::string call_name(const std::string& op) const override {
    if (op == "all_reduce") return "gloo::allreduce";
    if (op == "all_gather") return "gloo::allgather";
    if (op == "broadcast") return "gloo::broadcast";
    return "gloo::barrier";
  }

  // What torch's ProcessGroupGloo does for a float sum: the ring algorithm with gloo::sum<float>.
  void all_reduce_sum(float* data, std::size_t count) override {
    gloo::AllreduceOptions o(ctx_);
    o.setOutput(data, count);
    o.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    o.setTimeout(timeout_);
    gloo::allreduce(o);
  }
  void all_gather(const float* in, float* out, std::size_t count) override {
    gloo::AllgatherOptions o(ctx_);
    o.setInput(const_cast<float*>(in), count);
    o.setOutput(out, count * std::size_t(ctx_->size));
    o.setTimeout(timeout_);
    gloo::allgather(o);
  }
  void broadcast(float* data, std::size_t count, int root) override {
    gloo::BroadcastOptions o(ctx_);
    o.setOutput(data, count);
    o.setRoot(root);
    o.setTimeout(timeout_);
    gloo::broadcast(o);
  }
  void barrier() override {
    gloo::BarrierOptions o(ctx_);
    o.setTimeout(timeout_);
    gloo::barrier(o);
  }

 private:
  std::shared_ptr<gloo::Context> ctx_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

std::unique_ptr<RawBackend> make_raw_gloo(idist::ComputationModel& model, RawKind kind) {
  if (kind != RawKind::Blocking) return nullptr;  // gloo's algorithms only block
  auto& g = static_cast<idist::gloo_backend::GlooModel&>(model.backend_model());  // backend() == "gloo"
  return std::make_unique<RawGloo>(g.world_context(), model.timeout());
}

}  // namespace idist_bench
