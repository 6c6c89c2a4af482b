#pragma once
// The ways of running a data-parallel training step that the training benchmark compares.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/raw_backend.hpp"
#include "training/models.hpp"

namespace idist_bench {

/// How gradients are synchronised.
enum class Strategy {
  Local,           ///< one process, no idist, no communication
  AutoModel,       ///< idist::auto_model (bucketed, overlapped, averaged in the bucket)
  AutoModelCopy,   ///< the same with gradient_as_bucket_view = false (buckets are a copy)
  StatusQuoIdist,  ///< after backward: one blocking idist::all_reduce per parameter, then divide
  StatusQuoRaw,    ///< the same with the raw backend call (MPI_Allreduce / gloo::allreduce)
  NoSync,          ///< auto_model inside idist::no_sync: local accumulation only (no communication)
};

/// One configuration: a strategy and, for auto_model, its bucket cap.
struct Config {
  Strategy strategy = Strategy::Local;
  double bucket_mb = 25.0;  ///< AutoModelOptions::bucket_cap_mb (MiB, as DDP's bucket_cap_mb)
  /// auto_model only: the communication hook ("" none, "allreduce", "fp16", "bf16", "powersgd<rank>").
  std::string hook;
  /// "local", "auto_model:25", "auto_model_copy:25", "status_quo_idist", "status_quo_raw", "no_sync";
  /// a hook adds "+<hook>" ("auto_model:25+fp16").
  std::string name() const;
  /// Whether the gradients are averaged exactly (no lossy compression hook).
  bool exact() const { return hook.empty() || hook == "allreduce"; }
};

/// Parses Config::name() text ("auto_model" or "auto_model_copy" alone means the default 25 MiB cap;
/// "+allreduce", "+fp16", "+bf16" or "+powersgd<rank>" registers that communication hook).
/// @throws std::invalid_argument for anything else.
Config parse_config(const std::string& text);

/// Every configuration of a run: "local" when serial, else the status quo (idist and raw), no_sync
/// and auto_model with each cap of `buckets_mb`.
std::vector<Config> default_configs(bool distributed, const std::vector<double>& buckets_mb);

/// One model instance prepared for one configuration, with its SGD optimizer and batch.
class Trainer {
 public:
  /// Builds the workload and prepares it (auto_model when the strategy needs it; collective then).
  /// `raw` is needed by StatusQuoRaw.
  /// @throws std::invalid_argument when StatusQuoRaw has no raw backend.
  Trainer(const std::string& model, Config config, std::int64_t batch, std::uint64_t seed, RawBackend* raw);
  /// One training step: zero_grad, forward, cross-entropy, backward, synchronisation, SGD step.
  void step();
  const Config& config() const noexcept { return config_; }
  /// Bytes of the gradients, and of auto_model's bucket buffers (0 without auto_model).
  std::size_t gradient_bytes() const noexcept { return grad_bytes_; }
  std::size_t bucket_bytes() const noexcept { return bucket_bytes_; }
  /// Number of gradient buckets (0 without auto_model).
  std::size_t buckets() const noexcept { return buckets_; }
  /// The loss of the last step (to check that every configuration trains the same way).
  double last_loss() const noexcept { return last_loss_; }

  /// Per-step wall times of timed steps, milliseconds.
  std::vector<double> samples;

 private:
  void sync_status_quo();

  Config config_;
  Workload w_;
  std::unique_ptr<torch::optim::SGD> opt_;
  std::vector<torch::Tensor> params_;
  RawBackend* raw_;
  int world_;
  std::size_t grad_bytes_ = 0;
  std::size_t bucket_bytes_ = 0;
  std::size_t buckets_ = 0;
  double last_loss_ = 0;
};

}  // namespace idist_bench
