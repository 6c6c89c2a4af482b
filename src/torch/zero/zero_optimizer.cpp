// idist::ZeroRedundancyOptimizer (see include/idist/torch/zero.hpp): construction, step and the
// consolidated state; the collectives are in shard_comm, the parameter buffer in shard_layout.
#include <exception>
#include <unordered_map>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "idist/context.hpp"
#include "idist/error.hpp"
#include "idist/logging.hpp"
#include "idist/torch/zero.hpp"
#include "torch/checkpoint/optimizer_state.hpp"
#include "torch/comm/comm.hpp"
#include "torch/zero/archive_io.hpp"
#include "torch/zero/checks.hpp"
#include "torch/zero/gradient_hook.hpp"
#include "torch/zero/state_archive.hpp"
#include "torch/zero/zero_impl.hpp"

namespace idist {

namespace detail {

namespace {

constexpr const char* kWhat = "ZeroRedundancyOptimizer";

// Raises, on every member, the problem of this member or else of the first member that has one.
void agree(const ShardComm& comm, const std::string& problem, const std::string& what) {
  if (std::string e = first_problem(comm.all_gather(problem), comm.rank(), what); !e.empty()) throw ValueError(e);
}

// An exception's message for another rank's error text (c10's without its backtrace).
std::string message_of(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) return c->what_without_backtrace();
  return e.what();
}

void consolidate(ZeroImpl& z, int to, const std::string& what) {
  if (to < 0 || to >= z.comm.size())
    throw ValueError(fmt::format("{}: to is {}; expected a group rank in [0, {})", what, to, z.comm.size()));
  std::string bytes;
  std::string problem;
  try {
    bytes = member_archive(*z.local, z.local_order());
  } catch (const std::exception& e) {
    problem = fmt::format("its local optimizer cannot be saved: {}", message_of(e));
  }
  agree(z.comm, problem, what);
  z.consolidated = z.comm.gather(bytes, to);
}

std::vector<std::int64_t> numels_of(const std::vector<at::Tensor>& params) {
  std::vector<std::int64_t> n;
  n.reserve(params.size());
  for (const at::Tensor& p : params) n.push_back(p.numel());
  return n;
}

}  // namespace

ZeroImpl::ZeroImpl(std::vector<at::Tensor> ps, const ZeroRedundancyOptimizer::Factory& factory,
                   ZeroRedundancyOptimizerOptions options)
    : params(std::move(ps)), comm(std::move(options.group)) {
  // One exchange: each member's own problem or its parameters' shapes, so that every member raises
  // the same error before anything depends on the partition.
  const std::string problem = param_problem(params, bool(factory));
  if (std::string e = signature_error(comm.all_gather(param_signature(params, problem)), comm.rank()); !e.empty())
    throw ValueError(e);

  owners = zero_partition(numels_of(params), comm.size());
  std::vector<at::Tensor> shard;
  for (std::size_t i = 0; i < params.size(); ++i)
    if (owners[i] == comm.rank()) shard.push_back(params[i]);
  std::string made;
  try {
    local = factory(shard);
    made = local_optimizer_problem(local.get(), shard);
  } catch (const std::exception& e) {
    made = fmt::format("the factory threw: {}", message_of(e));
  } catch (...) {
    made = "the factory threw an exception that is not a std::exception";
  }
  agree(comm, made, kWhat);
  if (comm.size() == 1) return;
  if (!options.overlap_with_ddp) {
    layout.emplace(params, owners, comm.rank(), comm.size(), options.parameters_as_bucket_view);
    return;
  }
  step_target = std::make_shared<ZeroStepTarget>(comm);
  step_target->local = local.get();
  step_target->owners = owner_map();
}

ZeroImpl::~ZeroImpl() {
  if (!step_target) return;
  step_target->local = nullptr;
  step_target->options = nullptr;
}

void ZeroImpl::prepare_step() {
  if (!layout || !layout->trainability_changed()) return;
  log_warning("distributed.optim.zero_redundancy_optimizer",
              "ZeroRedundancyOptimizer: the parameters requiring a gradient changed; rebuilding the parameter buffer "
              "(every member must make the same change)");
  layout->rebuild();
}

void ZeroImpl::publish() {
  if (!layout || layout->total() == 0) return;
  at::NoGradGuard no_grad;
  layout->pack();
  comm.publish(layout->send(), layout->flat(), layout->counts(), layout->equal_counts());
  layout->unpack();
}

std::shared_ptr<const OwnerMap> ZeroImpl::owner_map() {
  if (!owner_map_) owner_map_ = make_owner_map(params, owners);
  return owner_map_;
}

std::vector<std::int64_t> ZeroImpl::local_order() const {
  std::unordered_map<const void*, std::int64_t> index;
  for (std::size_t i = 0; i < params.size(); ++i) index.emplace(params[i].unsafeGetTensorImpl(), std::int64_t(i));
  std::vector<std::int64_t> order;
  for (const auto& group : local->param_groups())
    for (const at::Tensor& p : group.params()) order.push_back(index.at(p.unsafeGetTensorImpl()));
  return order;
}

}  // namespace detail

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::vector<torch::Tensor> params, Factory factory,
                                                 ZeroRedundancyOptimizerOptions options)
    : ZeroRedundancyOptimizer(std::make_unique<detail::ZeroImpl>(std::move(params), factory, std::move(options))) {}

// The exposed parameter group holds every parameter, with the local optimizer's options.
ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::unique_ptr<detail::ZeroImpl> impl)
    : torch::optim::Optimizer(impl->params, impl->local->param_groups().front().options().clone()),
      impl_(std::move(impl)) {
  // The group's options live on the heap and keep their address when the optimizer is moved.
  if (impl_->step_target) impl_->step_target->options = &param_groups_.front().options();
}

ZeroRedundancyOptimizer::~ZeroRedundancyOptimizer() = default;
ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(ZeroRedundancyOptimizer&&) noexcept = default;

torch::Tensor ZeroRedundancyOptimizer::step(LossClosure closure) {
  if (param_groups_.size() != 1)
    throw ValueError(fmt::format(
        "ZeroRedundancyOptimizer::step: the optimizer has {} parameter groups; expected the one made at construction "
        "(add_param_group is not supported)",
        param_groups_.size()));
  if (detail::ZeroStepTarget* target = impl_->step_target.get()) {
    if (closure)
      throw ValueError(
          "ZeroRedundancyOptimizer::step: a closure was given, but with overlap_with_ddp = true the step runs in the "
          "backward (hook_with_zero_step); expected step() without a closure");
    if (target->stepped_backwards == 0)
      throw ValueError(
          "ZeroRedundancyOptimizer::step: overlap_with_ddp is true, but no backward stepped the parameters since the "
          "previous step(); expected a backward through the auto_model model with "
          "idist::register_comm_hook(model, idist::hook_with_zero_step(hook, optimizer)) registered (not under "
          "no_sync())");
    target->stepped_backwards = 0;
    return {};
  }
  auto& local_groups = impl_->local->param_groups();
  if (local_groups.size() == 1) local_groups.front().set_options(param_groups_.front().options().clone());
  impl_->prepare_step();
  torch::Tensor loss = impl_->local->step(std::move(closure));
  impl_->publish();
  return loss;
}

torch::optim::Optimizer& ZeroRedundancyOptimizer::local_optimizer() noexcept { return *impl_->local; }
const torch::optim::Optimizer& ZeroRedundancyOptimizer::local_optimizer() const noexcept { return *impl_->local; }
CommHook ZeroRedundancyOptimizer::reduce_scatter_hook() const {
  const detail::ShardComm& comm = impl_->comm;
  const int world = detail::comm::world_size();
  if (comm.size() != world)
    throw ValueError(fmt::format(
        "ZeroRedundancyOptimizer::reduce_scatter_hook: the optimizer's group {} has {} of the world's {} ranks; "
        "expected a group of every rank (auto_model averages the gradients over the world)",
        comm.group().str(), comm.size(), world));
  return detail::make_reduce_scatter_hook(impl_->owner_map(), comm.group());
}

namespace {

CommHook zero_step_hook(CommHook hook, const detail::ZeroImpl& z, bool interleaved, const char* fn) {
  if (!hook) throw ValueError(fmt::format("{}: the hook is empty; expected the hook that reduces each bucket", fn));
  const int world = detail::comm::world_size();
  if (z.comm.size() != world)
    throw ValueError(fmt::format(
        "{}: the optimizer's group {} has {} of the world's {} ranks; expected a group of every rank (auto_model "
        "averages the gradients over the world)",
        fn, z.comm.group().str(), z.comm.size(), world));
  if (world == 1) return hook;  // nothing to overlap: step() steps
  if (!z.step_target)
    throw ValueError(
        fmt::format("{}: the ZeroRedundancyOptimizer was made with overlap_with_ddp = false; expected one made with "
                    "ZeroRedundancyOptimizerOptions{{.overlap_with_ddp = true}}",
                    fn));
  return detail::make_zero_step_hook(std::move(hook), z.step_target, interleaved);
}

}  // namespace

CommHook hook_with_zero_step(CommHook hook, ZeroRedundancyOptimizer& zero) {
  return zero_step_hook(std::move(hook), *zero.impl_, false, "hook_with_zero_step");
}

CommHook hook_with_zero_step_interleaved(CommHook hook, ZeroRedundancyOptimizer& zero) {
  return zero_step_hook(std::move(hook), *zero.impl_, true, "hook_with_zero_step_interleaved");
}

const std::vector<int>& ZeroRedundancyOptimizer::owners() const noexcept { return impl_->owners; }
const Group& ZeroRedundancyOptimizer::group() const noexcept { return impl_->comm.group(); }

void ZeroRedundancyOptimizer::consolidate_state_dict(int to) {
  detail::consolidate(*impl_, to, "ZeroRedundancyOptimizer::consolidate_state_dict");
}

void ZeroRedundancyOptimizer::save_consolidated(torch::serialize::OutputArchive& archive) const {
  if (impl_->consolidated.empty())
    throw ValueError(
        fmt::format("ZeroRedundancyOptimizer::save_consolidated: group rank {0} holds no consolidated state; call "
                    "consolidate_state_dict({0}) on every member first",
                    impl_->comm.rank()));
  detail::write_consolidated(archive, impl_->consolidated, param_groups_.front().options(),
                             detail::numels_of(impl_->params));
}

void ZeroRedundancyOptimizer::save(torch::serialize::OutputArchive& archive) const { save(archive, 0); }

void ZeroRedundancyOptimizer::save(torch::serialize::OutputArchive& archive, int to) const {
  detail::consolidate(*impl_, to, "ZeroRedundancyOptimizer::save");
  if (impl_->comm.rank() != to) {
    detail::write_stub(archive, to);
    return;
  }
  save_consolidated(archive);
  impl_->consolidated.clear();
}

void ZeroRedundancyOptimizer::load(torch::serialize::InputArchive& archive) {
  detail::ZeroImpl& z = *impl_;
  const char* what = "ZeroRedundancyOptimizer::load";
  std::string bytes;
  std::string problem;
  try {
    bytes = detail::shard_archive(archive, *z.local, z.local_order(), z.params);
  } catch (const ValueError& e) {
    problem = e.what();
  } catch (const std::exception& e) {
    problem = fmt::format("the archive is not an optimizer state it can read: {}", detail::message_of(e));
  }
  detail::agree(z.comm, problem, what);
  try {
    torch::serialize::InputArchive shard;
    detail::load_archive(shard, bytes);
    z.local->load(shard);
    checkpoint::place_state_on_parameters(*z.local);  // floating state in its parameter's dtype, as PyTorch
  } catch (const std::exception& e) {
    problem = fmt::format("the local optimizer cannot load its shard's state: {}", detail::message_of(e));
  }
  detail::agree(z.comm, problem, what);
}

}  // namespace idist
