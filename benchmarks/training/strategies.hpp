#pragma once
// The ways of running a data-parallel training step that the training benchmark compares.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/raw_backend.hpp"
#include "training/models.hpp"

namespace idist_bench {

/// How gradients are synchronised.
enum class Strategy {
  Local,             ///< one process, no idist, no communication
  AutoModel,         ///< idist::auto_model (bucketed, overlapped, averaged in the bucket)
  AutoModelCopy,     ///< the same with gradient_as_bucket_view = false (buckets are a copy)
  StatusQuoIdist,    ///< after backward: one blocking idist::all_reduce per parameter, then divide
  StatusQuoRaw,      ///< the same with the raw backend call (MPI_Allreduce / gloo::allreduce)
  NoSync,            ///< auto_model inside idist::no_sync: local accumulation only (no communication)
  AutoModelAdam,     ///< auto_model with torch::optim::Adam (ZeroRedundancyOptimizer's baseline)
  Zero,              ///< auto_model with idist::ZeroRedundancyOptimizer over Adam (parameters as bucket views)
  ZeroStaged,        ///< the same with parameters_as_bucket_view = false (the shards are copied through a buffer)
  Zero2,             ///< Zero with its reduce_scatter_hook (ZeRO stage 2: gradients reduce-scattered by owner)
  ZeroOverlap,       ///< Zero with overlap_with_ddp: hook_with_zero_step over the all-reduce (stage 1 in the backward)
  Zero2Overlap,      ///< the same over the reduce_scatter_hook (stage 2 in the backward)
  ZeroInterleaved,   ///< ZeroOverlap through hook_with_zero_step_interleaved
  Zero2Interleaved,  ///< Zero2Overlap through hook_with_zero_step_interleaved
};

/// Whether the strategy steps with idist::ZeroRedundancyOptimizer.
constexpr bool is_zero(Strategy s) {
  return s == Strategy::Zero || s == Strategy::ZeroStaged || s == Strategy::Zero2 || s == Strategy::ZeroOverlap ||
         s == Strategy::Zero2Overlap || s == Strategy::ZeroInterleaved || s == Strategy::Zero2Interleaved;
}

/// One configuration: a strategy and, for auto_model, its bucket cap.
struct Config {
  Strategy strategy = Strategy::Local;
  /// AutoModelOptions::bucket_cap_mb (MiB, as DDP's bucket_cap_mb); unset: auto_model's default (tuned).
  std::optional<double> bucket_mb = 25.0;
  /// auto_model only: the communication hook ("" none, "allreduce", "fp16", "bf16", "powersgd<rank>",
  /// "timeline": the all-reduce hook, timing when each bucket leaves; a hook of its own, so auto_model
  /// does not tune the cap: give one, "auto_model:4+timeline"; "gathersum": each bucket all-gathered
  /// whole and summed at the wait, an all-reduce of its own whose exchanges gloo posts at issue).
  std::string hook;
  /// "local", "auto_model:25", "auto_model_copy:25", "status_quo_idist", "status_quo_raw", "no_sync",
  /// "auto_model_adam:25", "zero:25", "zero_staged:25", "zero2:25", "zero_overlap:25", "zero2_overlap:25",
  /// "zero_interleaved:25", "zero2_interleaved:25"; "auto_model" without a cap: the default
  /// options (the cap tuned); a hook adds "+<hook>" ("auto_model:25+fp16", "auto_model+fp16").
  std::string name() const;
  /// Whether the gradients are averaged exactly (no lossy compression hook).
  bool exact() const { return hook.empty() || is_exact_hook(hook); }
  /// The hooks that average exactly (their losses are checked against auto_model's).
  static bool is_exact_hook(const std::string& h) { return h == "allreduce" || h == "timeline" || h == "gathersum"; }
  /// Whether the step is Adam's (else SGD's): the ZeRO comparison.
  bool adam() const { return strategy == Strategy::AutoModelAdam || is_zero(strategy); }
  /// Whether the model goes through auto_model (and `bucket_mb` applies).
  bool auto_model() const {
    return strategy != Strategy::Local && strategy != Strategy::StatusQuoIdist && strategy != Strategy::StatusQuoRaw;
  }
};

/// Parses Config::name() text (a name of the auto_model family alone means auto_model's default cap;
/// "+allreduce", "+fp16", "+bf16" or "+powersgd<rank>" registers that communication hook).
/// @throws std::invalid_argument for anything else.
Config parse_config(const std::string& text);

/// Every configuration of a run: "local" when serial, else the status quo (idist and raw), no_sync
/// and auto_model with each cap of `buckets_mb`.
std::vector<Config> default_configs(bool distributed, const std::vector<double>& buckets_mb);

/// One model instance prepared for one configuration, with its optimizer (SGD, or Adam for the ZeRO
/// comparison) and batch.
class Trainer {
 public:
  /// Builds the workload and prepares it (auto_model when the strategy needs it; collective then).
  /// `raw` is needed by StatusQuoRaw.
  /// @throws std::invalid_argument when StatusQuoRaw has no raw backend.
  Trainer(const std::string& model, Config config, std::int64_t batch, std::uint64_t seed, RawBackend* raw);
  /// One training step: zero_grad, forward, cross-entropy, backward, synchronisation, optimizer step.
  void step();
  const Config& config() const noexcept { return config_; }
  /// Bytes of the gradients, and of auto_model's bucket buffers (0 without auto_model).
  std::size_t gradient_bytes() const noexcept { return grad_bytes_; }
  std::size_t bucket_bytes() const noexcept { return bucket_bytes_; }
  /// Number of gradient buckets (0 without auto_model).
  std::size_t buckets() const noexcept { return buckets_; }
  /// Reads the bucket layout again (auto_model tunes an unset cap during the first steps).
  void read_buckets();
  /// Bytes of this rank's optimizer state tensors (SGD without momentum: 0; Adam: its moments;
  /// ZeRO: those of the local optimizer's shard only).
  std::size_t optimizer_state_bytes() const;
  /// Bytes ZeroRedundancyOptimizer keeps for publishing the shards beyond the parameters (its send
  /// buffer, plus the staging buffer of zero_staged); 0 for the other configurations.
  std::size_t zero_buffer_bytes() const noexcept { return zero_buffer_bytes_; }
  /// The loss of the last step (to check that every configuration trains the same way).
  double last_loss() const noexcept { return last_loss_; }

  /// Appends the last step's phases to forward_ms, backward_ms and step_ms (a timed step).
  void record_phases();
  /// Per-step wall times of timed steps, milliseconds.
  std::vector<double> samples;
  /// The same steps split in phases, milliseconds: forward (with the loss), backward (with what
  /// auto_model's hooks do inside it), and the rest (the status quo's all-reduces, the wait for the
  /// last buckets, the optimizer step). no_sync's phases give the synchronous floor
  /// forward + max(backward + step, wire time).
  std::vector<double> forward_ms, backward_ms, step_ms;
  /// With the "timeline" hook, per timed step: milliseconds from the start of backward to the launch
  /// of its first and of its last bucket (when backward's compute is done); empty otherwise.
  std::vector<double> first_launch_ms, last_launch_ms;
  /// With the "timeline" hook, per timed step: bytes of the buckets whose all-reduce had completed
  /// when the last bucket left (polled then).
  std::vector<double> reduced_at_last_bytes;

 private:
  void sync_status_quo();

  Config config_;
  Workload w_;
  std::unique_ptr<torch::optim::Optimizer> opt_;
  std::vector<torch::Tensor> params_;
  RawBackend* raw_;
  int world_;
  std::size_t grad_bytes_ = 0;
  std::size_t bucket_bytes_ = 0;
  std::size_t buckets_ = 0;
  std::size_t zero_buffer_bytes_ = 0;
  double last_loss_ = 0;
  std::array<double, 3> last_phases_{};  // forward, backward, rest of the last step (ms)
  struct Launches;                       // the timeline hook's record of one backward
  std::shared_ptr<Launches> launches_;
};

}  // namespace idist_bench
