// The non-template parts of auto_dataloader (include/idist/torch/auto_dataloader.hpp): the sampler
// ignite's rules choose, and the start of an epoch with its resume position.
#include "idist/torch/auto_dataloader.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/Type.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/data/samplers/random.h>
#include <torch/data/samplers/sequential.h>

#include <algorithm>
#include <mutex>
#include <typeinfo>

namespace idist::detail {
namespace {

// Presents any LibTorch sampler as an EpochSampler: set_epoch reaches samplers that have one
// (LibTorch's distributed samplers) and is ignored by the others.
class EpochAdapter final : public EpochSampler {
 public:
  EpochAdapter(std::shared_ptr<torch::data::samplers::Sampler<>> inner, std::optional<std::size_t> size)
      : inner_(std::move(inner)), size_(size) {}
  void set_epoch(std::uint64_t epoch) override {
    epoch_ = epoch;
    if (auto* d = dynamic_cast<torch::data::samplers::DistributedSampler<>*>(inner_.get())) d->set_epoch(epoch);
  }
  std::uint64_t epoch() const override { return epoch_; }
  std::optional<std::size_t> size() const override { return size_; }
  void reset(torch::optional<std::size_t> new_size = torch::nullopt) override { inner_->reset(new_size); }
  torch::optional<std::vector<std::size_t>> next(std::size_t batch_size) override { return inner_->next(batch_size); }
  void save(torch::serialize::OutputArchive& archive) const override { inner_->save(archive); }
  void load(torch::serialize::InputArchive& archive) override { inner_->load(archive); }
  const std::shared_ptr<torch::data::samplers::Sampler<>>& inner() const noexcept { return inner_; }

 private:
  std::shared_ptr<torch::data::samplers::Sampler<>> inner_;
  std::optional<std::size_t> size_;
  std::uint64_t epoch_ = 0;
};

// ignite's warnings for a given distributed sampler whose rank or num_replicas differ from the
// context's (idist's DistributedSampler and DistributedProxySampler; LibTorch's distributed samplers
// do not expose theirs).
void warn_about_sampler_placement(const torch::data::samplers::Sampler<>& s, int world_size, int rank) {
  std::optional<std::pair<int, int>> placed;  // rank, num_replicas
  if (auto* d = dynamic_cast<const DistributedSampler*>(&s)) placed = {d->rank(), d->num_replicas()};
  if (auto* p = dynamic_cast<const DistributedProxySampler*>(&s)) placed = {p->rank(), p->num_replicas()};
  if (!placed) return;
  if (placed->first != rank)
    log_warning(kAutoDataloaderLogger,
                fmt::format("Found distributed sampler with rank={}, but process rank is {}", placed->first, rank));
  if (placed->second != world_size)
    log_warning(kAutoDataloaderLogger,
                fmt::format("Found distributed sampler with num_replicas={}, but world size is {}", placed->second,
                            world_size));
}

// The default CPU generator's state, and setting it, under the generator's lock.
at::Tensor generator_state() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_generator_state(const at::Tensor& state) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

}  // namespace

bool pins_batches(const DataLoaderOptions& opts) {
  // Pinned memory needs the CUDA host allocator; without CUDA, PyTorch too leaves batches pageable.
  static const bool cuda = torch::cuda::is_available();
  return opts.pin_memory.value_or(false) && cuda;
}

std::string sampler_name(const EpochSampler& s) {
  const auto* adapter = dynamic_cast<const EpochAdapter*>(&s);
  const torch::data::samplers::Sampler<>* inner = adapter ? adapter->inner().get() : &s;
  return c10::demangle(typeid(*inner).name());
}

std::shared_ptr<EpochSampler> choose_sampler(const DataLoaderOptions& opts, std::size_t dataset_size, int world_size,
                                             int rank) {
  using torch::data::samplers::Sampler;
  const std::shared_ptr<Sampler<>>& user = opts.sampler;
  if (world_size > 1) {
    if (!user) return std::make_shared<DistributedSampler>(dataset_size, world_size, rank, opts.shuffle.value_or(true));
    if (!is_distributed_sampler(user.get())) return std::make_shared<DistributedProxySampler>(user, world_size, rank);
    warn_about_sampler_placement(*user, world_size, rank);
  }
  if (!user) {
    std::shared_ptr<Sampler<>> s;
    if (opts.shuffle.value_or(false))
      s = std::make_shared<torch::data::samplers::RandomSampler>(std::int64_t(dataset_size));
    else
      s = std::make_shared<torch::data::samplers::SequentialSampler>(dataset_size);
    return std::make_shared<EpochAdapter>(std::move(s), dataset_size);
  }
  if (auto e = std::dynamic_pointer_cast<EpochSampler>(user)) return e;
  std::optional<std::size_t> size;
  if (auto* w = dynamic_cast<const WeightedRandomSampler*>(user.get())) size = w->size();
  return std::make_shared<EpochAdapter>(user, size);
}

void start_epoch(LoaderProgress& progress, EpochSampler& sampler, torch::optional<std::size_t> new_size) {
  std::optional<LoaderProgress::Resume> resume;
  if (progress.pending && progress.pending->epoch == sampler.epoch()) resume = std::move(progress.pending);
  progress.pending.reset();
  progress.epoch = sampler.epoch();
  progress.consumed = 0;
  if (resume && resume->rng.defined()) {
    // Draw the epoch as the saved run drew it (samplers that use the global generator), then go on
    // with the generator where the checkpoint left it.
    const at::Tensor now = generator_state();
    set_generator_state(resume->rng);
    progress.epoch_rng = resume->rng;
    sampler.reset(new_size);
    set_generator_state(now);
  } else {
    progress.epoch_rng = generator_state();
    sampler.reset(new_size);
  }
  if (!resume) return;
  for (std::uint64_t left = resume->skip; left > 0;) {
    const auto batch = sampler.next(std::size_t(std::min<std::uint64_t>(left, 1 << 16)));
    if (!batch || batch->empty()) break;
    left -= std::min<std::uint64_t>(left, batch->size());
    progress.consumed += batch->size();
  }
}

}  // namespace idist::detail
