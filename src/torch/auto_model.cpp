// auto_model's work on a module, the registry of reducers, register_comm_hook and no_sync's guard
// (idist/torch/auto_model.hpp).
#include "idist/torch/auto_model.hpp"

#include <string>
#include <vector>

#include <fmt/format.h>

#include "idist/collectives.hpp"
#include "idist/logging.hpp"
#include "idist/torch/collectives.hpp"
#include "idist/torch/dtype.hpp"
#include "idist/torch/nn/convert_sync_batch_norm.hpp"
#include "torch/agree_on_error.hpp"
#include "torch/broadcast_coalesced.hpp"
#include "torch/reducer_registry.hpp"

namespace idist::detail {

namespace {

// auto_model's sync_bn step: converts the BatchNorm modules of `module` to SyncBatchNorm on every rank
// (ignite: nn.SyncBatchNorm.convert_sync_batchnorm); every rank raises when one cannot.
void convert_batch_norms(torch::nn::Module& module) {
  std::string error;
  std::size_t converted = 0;
  try {
    converted = nn::convert_sync_batchnorm(module);
  } catch (const ValueError& e) {
    error = fmt::format("auto_model: sync_bn=true, but {}", e.what());
  }
  agree_on_error(error, Group{}, [](int bad) {
    return fmt::format(
        "auto_model: sync_bn=true, but rank {} could not convert its BatchNorm modules to SyncBatchNorm (see that "
        "rank's error)",
        bad);
  });
  if (converted > 0)
    log_info("distributed.auto.auto_model",
             fmt::format("Convert batch norm to sync batch norm ({} module(s))", converted));
}

// One line per parameter and buffer: "name dtype [sizes]", for comparing models across ranks.
std::vector<std::string> module_signature(const torch::nn::Module& module) {
  std::vector<std::string> lines;
  for (const auto& p : module.named_parameters(true))
    lines.push_back(fmt::format("parameter {} {} {}", p.key(), c10::toString(p.value().scalar_type()),
                                c10::str(p.value().sizes())));
  for (const auto& b : module.named_buffers(true))
    lines.push_back(
        fmt::format("buffer {} {} {}", b.key(), c10::toString(b.value().scalar_type()), c10::str(b.value().sizes())));
  return lines;
}

// Checks that every rank has the same parameters and buffers as rank 0 (DDP's
// _verify_param_shape_across_processes); every rank raises when one differs.
void verify_same_model(const torch::nn::Module& module) {
  const std::vector<std::string> mine = module_signature(module);
  std::string text;
  for (const auto& l : mine) text += l + "\n";
  const std::string ref = broadcast(text, 0);
  std::string error;
  if (ref != text) {
    std::vector<std::string> theirs;
    std::size_t start = 0;
    for (std::size_t nl; (nl = ref.find('\n', start)) != std::string::npos; start = nl + 1)
      theirs.push_back(ref.substr(start, nl - start));
    std::size_t k = 0;
    while (k < mine.size() && k < theirs.size() && mine[k] == theirs[k]) ++k;
    error = fmt::format(
        "auto_model: the model on rank {} differs from rank 0's: entry {} is '{}' here but '{}' on rank 0", get_rank(),
        k, k < mine.size() ? mine[k] : std::string("<none>"), k < theirs.size() ? theirs[k] : std::string("<none>"));
  }
  agree_on_error(error, Group{}, [](int bad) {
    return fmt::format(
        "auto_model: the model on rank {} differs from rank 0's (parameters or buffers; see that rank's error)", bad);
  });
}

// Copies rank 0's parameters and buffers to every rank, one broadcast per dtype and device.
void broadcast_module_states(const torch::nn::Module& module) {
  std::vector<at::Tensor> states = module.parameters(true);
  for (const auto& b : module.buffers(true)) states.push_back(b);
  broadcast_coalesced(states, 0);
}

}  // namespace

void adapt_model(const std::shared_ptr<torch::nn::Module>& module, const AutoModelOptions& opts) {
  if (opts.bucket_cap_mb && !(*opts.bucket_cap_mb > 0))
    throw ValueError(fmt::format("auto_model: bucket_cap_mb should be positive, but given {}", *opts.bucket_cap_mb));
  const c10::Device dev = to_torch_device(device());
  bool on_device = true;
  for (const auto& p : module->parameters(true)) on_device = on_device && p.device() == dev;
  for (const auto& b : module->buffers(true)) on_device = on_device && (!b.defined() || b.device() == dev);
  if (!on_device) module->to(dev);
  if (get_world_size() == 1) return;
  if (opts.sync_bn) convert_batch_norms(*module);
  verify_same_model(*module);
  broadcast_module_states(*module);
  reducer_registry().add(module, Reducer::create(module, opts));
}

std::shared_ptr<Reducer> find_reducer(const torch::nn::Module* module) { return reducer_registry().find(module); }

std::vector<std::size_t> bucket_bytes_of(const std::shared_ptr<Reducer>& reducer) {
  return reducer ? reducer->bucket_bytes() : std::vector<std::size_t>{};
}

void register_hook(const std::shared_ptr<torch::nn::Module>& module, CommHook hook) {
  auto reducer = module ? find_reducer(module.get()) : nullptr;
  if (!hook) throw ValueError("register_comm_hook: the hook is empty; expected a callable");
  if (!reducer) {
    if (get_world_size() > 1)
      throw ValueError(
          "register_comm_hook: the model was not prepared by idist::auto_model, so it has no gradient buckets to hook");
    return;
  }
  reducer->register_comm_hook(std::move(hook));
}

void ReducerRegistry::add(const std::shared_ptr<torch::nn::Module>& module, std::shared_ptr<Reducer> reducer) {
  std::lock_guard lock(mutex_);
  prune();
  entries_[module.get()] = Entry{module, std::move(reducer)};
}

std::shared_ptr<Reducer> ReducerRegistry::find(const torch::nn::Module* module) {
  std::lock_guard lock(mutex_);
  prune();
  auto it = entries_.find(module);
  return it == entries_.end() ? nullptr : it->second.reducer;
}

void ReducerRegistry::remove(const torch::nn::Module* module) {
  std::lock_guard lock(mutex_);
  entries_.erase(module);
  prune();
}

void ReducerRegistry::prune() {
  std::erase_if(entries_, [](const auto& kv) { return kv.second.module.expired(); });
}

ReducerRegistry& reducer_registry() {
  static ReducerRegistry registry;
  return registry;
}

}  // namespace idist::detail

namespace idist {

NoSyncGuard::NoSyncGuard(std::shared_ptr<detail::Reducer> reducer) : reducer_(std::move(reducer)) {
  if (reducer_) {
    previous_ = reducer_->require_sync();
    reducer_->set_require_sync(false);
  }
}

NoSyncGuard::~NoSyncGuard() {
  if (reducer_) reducer_->set_require_sync(previous_);
}

}  // namespace idist
