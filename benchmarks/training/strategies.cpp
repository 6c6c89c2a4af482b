#include "training/strategies.hpp"

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <utility>

#include <fmt/core.h>

#include "common/timing.hpp"
#include "idist/idist.hpp"

namespace idist_bench {

namespace {
// Large enough that a rank training on its own data alone drifts visibly from synchronised ranks
// within a few steps (the loss check in main.cpp), small enough to stay stable.
constexpr double kLearningRate = 0.05;
// Adam's usual rate: the ZeRO comparison trains stably for the benchmark's few hundred steps.
constexpr double kAdamLearningRate = 1e-3;

std::unique_ptr<torch::optim::Optimizer> adam(std::vector<torch::Tensor> params) {
  return std::make_unique<torch::optim::Adam>(std::move(params), torch::optim::AdamOptions(kAdamLearningRate));
}

// The auto_model family: its name, and its strategy by name.
struct AutoModelName {
  Strategy strategy;
  const char* name;
};
constexpr AutoModelName kAutoModelNames[] = {{Strategy::AutoModel, "auto_model"},
                                             {Strategy::AutoModelCopy, "auto_model_copy"},
                                             {Strategy::AutoModelAdam, "auto_model_adam"},
                                             {Strategy::Zero, "zero"},
                                             {Strategy::ZeroStaged, "zero_staged"},
                                             {Strategy::Zero2, "zero2"},
                                             {Strategy::ZeroOverlap, "zero_overlap"},
                                             {Strategy::Zero2Overlap, "zero2_overlap"},
                                             {Strategy::ZeroInterleaved, "zero_interleaved"},
                                             {Strategy::Zero2Interleaved, "zero2_interleaved"}};
// ":<cap>", or nothing for auto_model's default (tuned) cap.
std::string cap_text(const std::optional<double>& mb) { return mb ? fmt::format(":{:g}", *mb) : ""; }

}  // namespace

std::string Config::name() const {
  const std::string suffix = hook.empty() ? "" : "+" + hook;
  switch (strategy) {
    case Strategy::Local: return "local";
    case Strategy::AutoModel: return fmt::format("auto_model{}{}", cap_text(bucket_mb), suffix);
    case Strategy::AutoModelCopy: return fmt::format("auto_model_copy{}{}", cap_text(bucket_mb), suffix);
    case Strategy::StatusQuoIdist: return "status_quo_idist";
    case Strategy::StatusQuoRaw: return "status_quo_raw";
    case Strategy::NoSync: return "no_sync";
    case Strategy::AutoModelAdam: return fmt::format("auto_model_adam{}{}", cap_text(bucket_mb), suffix);
    case Strategy::Zero: return fmt::format("zero{}{}", cap_text(bucket_mb), suffix);
    case Strategy::ZeroStaged: return fmt::format("zero_staged{}{}", cap_text(bucket_mb), suffix);
    case Strategy::Zero2: return fmt::format("zero2{}{}", cap_text(bucket_mb), suffix);
    case Strategy::ZeroOverlap: return fmt::format("zero_overlap{}{}", cap_text(bucket_mb), suffix);
    case Strategy::Zero2Overlap: return fmt::format("zero2_overlap{}{}", cap_text(bucket_mb), suffix);
    case Strategy::ZeroInterleaved: return fmt::format("zero_interleaved{}{}", cap_text(bucket_mb), suffix);
    case Strategy::Zero2Interleaved: return fmt::format("zero2_interleaved{}{}", cap_text(bucket_mb), suffix);
  }
  return "?";
}

Config parse_config(const std::string& full) {
  Config c;
  const std::size_t plus = full.find('+');
  const std::string text = full.substr(0, plus);
  if (plus != std::string::npos) {
    c.hook = full.substr(plus + 1);
    const bool powersgd = c.hook.rfind("powersgd", 0) == 0 && c.hook.size() > 8 &&
                          c.hook.find_first_not_of("0123456789", 8) == std::string::npos;
    if (!(Config::is_exact_hook(c.hook) || c.hook == "fp16" || c.hook == "bf16" || powersgd) ||
        text.rfind("auto_model", 0) != 0)
      throw std::invalid_argument("config '" + full +
                                  "': a hook is auto_model[...]+allreduce, +timeline, +gathersum, +fp16, +bf16 or "
                                  "+powersgd<rank>");
  }
  const std::string family = text.substr(0, text.find(':'));
  const auto* am = std::find_if(std::begin(kAutoModelNames), std::end(kAutoModelNames),
                                [&](const AutoModelName& n) { return family == n.name; });
  if (text == "local") {
    c.strategy = Strategy::Local;
  } else if (am != std::end(kAutoModelNames)) {
    c.strategy = am->strategy;
    c.bucket_mb.reset();
    if (family.size() < text.size()) {
      std::size_t used = 0;
      const std::string num = text.substr(family.size() + 1);
      try {
        c.bucket_mb = std::stod(num, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != num.size() || used == 0 || !(*c.bucket_mb > 0))
        throw std::invalid_argument("config '" + text + "': expected " + family + ":<positive bucket cap in MiB>");
    }
  } else if (text == "status_quo_idist") {
    c.strategy = Strategy::StatusQuoIdist;
  } else if (text == "status_quo_raw") {
    c.strategy = Strategy::StatusQuoRaw;
  } else if (text == "no_sync") {
    c.strategy = Strategy::NoSync;
  } else {
    throw std::invalid_argument(
        "unknown config '" + text +
        "'; expected local, auto_model[:MiB], auto_model_copy[:MiB], auto_model_adam[:MiB], "
        "zero[:MiB], zero_staged[:MiB], zero2[:MiB], zero_overlap[:MiB], zero2_overlap[:MiB], "
        "zero_interleaved[:MiB], zero2_interleaved[:MiB], status_quo_idist, status_quo_raw or no_sync");
  }
  return c;
}

// When each bucket of one backward was handed to the hook, from the start of that backward.
struct Trainer::Launches {
  Clock::time_point backward_start;
  std::vector<double> at_ms;
  std::vector<std::pair<idist::Work, std::size_t>> buckets;  // this backward's, launch order: work, bytes
  std::size_t reduced_at_last = 0;                           // bytes of the buckets complete when the last one left

  // Bytes of the launched buckets whose reduction has completed by now.
  std::size_t reduced_now() {
    std::size_t done = 0;
    for (auto& [work, bytes] : buckets)
      if (work.is_completed()) done += bytes;
    return done;
  }
};

std::vector<Config> default_configs(bool distributed, const std::vector<double>& buckets_mb) {
  const auto of = [](Strategy s, std::optional<double> mb = 25.0) {
    Config c;
    c.strategy = s;
    c.bucket_mb = mb;
    return c;
  };
  if (!distributed) return {of(Strategy::Local)};
  std::vector<Config> out{of(Strategy::StatusQuoIdist), of(Strategy::StatusQuoRaw), of(Strategy::NoSync)};
  for (double b : buckets_mb) out.push_back(of(Strategy::AutoModel, b));
  out.push_back(of(Strategy::AutoModelCopy));  // DDP's default layout, for comparison
  return out;
}

Trainer::Trainer(const std::string& model, Config config, std::int64_t batch, std::uint64_t seed, RawBackend* raw)
    : config_(config), raw_(raw), world_(idist::get_world_size()) {
  if (config_.strategy == Strategy::StatusQuoRaw && !raw_)
    throw std::invalid_argument("status_quo_raw needs a raw backend (mpi or gloo)");
  w_ = make_workload(model, batch, seed, seed + 1000 + std::uint64_t(idist::get_rank()));
  grad_bytes_ = idist_bench::gradient_bytes(*w_.model);
  if (config_.auto_model()) {
    w_.model = idist::auto_model(
        w_.model, idist::AutoModelOptions{.bucket_cap_mb = config_.bucket_mb,
                                          .gradient_as_bucket_view = config_.strategy != Strategy::AutoModelCopy});
    if (config_.hook == "allreduce") idist::register_comm_hook(w_.model, idist::comm_hooks::allreduce());
    if (config_.hook == "timeline") {
      launches_ = std::make_shared<Launches>();
      idist::register_comm_hook(
          w_.model, [rec = launches_, reduce = idist::comm_hooks::allreduce()](idist::GradBucket& b) {
            rec->at_ms.push_back(micros(rec->backward_start, Clock::now()) / 1000.0);
            if (b.is_last()) rec->reduced_at_last = rec->reduced_now();
            idist::Work w = reduce(b);
            rec->buckets.emplace_back(w, std::size_t(b.buffer().numel()) * b.buffer().element_size());
            return w;
          });
    }
    if (config_.hook == "gathersum") {
      // Experiment: every rank's whole bucket gathered (posted at issue on gloo), summed at the wait.
      idist::register_comm_hook(w_.model, [](idist::GradBucket& b) {
        const at::Tensor in = b.buffer();
        const int n = idist::get_world_size();
        at::Tensor out = at::empty({n * in.numel()}, in.options());
        idist::Work w = idist::all_gather_async(in, out);
        w.then([out, n, numel = in.numel()] { return out.view({n, numel}).sum(0).div_(n); });
        return w;
      });
    }
    if (config_.hook == "fp16") idist::register_comm_hook(w_.model, idist::comm_hooks::fp16_compress());
    if (config_.hook == "bf16") idist::register_comm_hook(w_.model, idist::comm_hooks::bf16_compress());
    if (config_.hook.rfind("powersgd", 0) == 0)  // compressing from the third step (error feedback needs > 1)
      idist::register_comm_hook(
          w_.model, idist::comm_hooks::powersgd(
                        {.matrix_approximation_rank = std::stoi(config_.hook.substr(8)), .start_powersgd_iter = 2}));
    read_buckets();
  } else if (config_.strategy != Strategy::Local && world_ > 1) {
    // The status quo starts from the same weights too (what users do by hand: broadcast once).
    for (auto& p : w_.model->parameters()) idist::broadcast(p.detach(), 0);
  }
  params_ = w_.model->parameters();
  if (is_zero(config_.strategy)) {
    const Strategy s = config_.strategy;
    const bool views = s != Strategy::ZeroStaged;
    const bool stage2 = s == Strategy::Zero2 || s == Strategy::Zero2Overlap || s == Strategy::Zero2Interleaved;
    const bool interleaved = s == Strategy::ZeroInterleaved || s == Strategy::Zero2Interleaved;
    const bool overlap = interleaved || s == Strategy::ZeroOverlap || s == Strategy::Zero2Overlap;
    auto zero = std::make_unique<idist::ZeroRedundancyOptimizer>(
        params_, adam,
        idist::ZeroRedundancyOptimizerOptions{.parameters_as_bucket_view = views, .overlap_with_ddp = overlap});
    if (world_ > 1) {
      idist::CommHook reduce = stage2 ? zero->reduce_scatter_hook() : idist::comm_hooks::allreduce();
      if (overlap)
        idist::register_comm_hook(w_.model, interleaved ? idist::hook_with_zero_step_interleaved(reduce, *zero)
                                                        : idist::hook_with_zero_step(reduce, *zero));
      else if (stage2)
        idist::register_comm_hook(w_.model, reduce);
    }
    opt_ = std::move(zero);
    // The send buffer holds this rank's shard; the staged form also has a buffer of every parameter,
    // and the step in the backward one gather buffer per bucket (every parameter together).
    std::size_t shard = 0;
    const auto& local = static_cast<idist::ZeroRedundancyOptimizer&>(*opt_).local_optimizer();
    for (const auto& g : local.param_groups())
      for (const auto& p : g.params()) shard += std::size_t(p.numel()) * p.element_size();
    zero_buffer_bytes_ = world_ > 1 ? shard + (views && !overlap ? 0 : grad_bytes_) : 0;
  } else if (config_.adam()) {
    opt_ = adam(params_);
  } else {
    opt_ = std::make_unique<torch::optim::SGD>(params_, torch::optim::SGDOptions(kLearningRate));
  }
}

std::size_t Trainer::optimizer_state_bytes() const {
  const torch::optim::Optimizer* opt = opt_.get();
  if (const auto* z = dynamic_cast<const idist::ZeroRedundancyOptimizer*>(opt)) opt = &z->local_optimizer();
  std::size_t bytes = 0;
  const auto add = [&](const torch::Tensor& t) {
    if (t.defined()) bytes += std::size_t(t.numel()) * t.element_size();
  };
  for (const auto& [key, state] : opt->state()) {
    if (const auto* a = dynamic_cast<const torch::optim::AdamParamState*>(state.get())) {
      add(a->exp_avg());
      add(a->exp_avg_sq());
      add(a->max_exp_avg_sq());
    } else if (const auto* m = dynamic_cast<const torch::optim::SGDParamState*>(state.get())) {
      add(m->momentum_buffer());
    }
  }
  return bytes;
}

void Trainer::sync_status_quo() {
  for (auto& p : params_) {
    torch::Tensor g = p.grad();
    if (config_.strategy == Strategy::StatusQuoIdist)
      idist::all_reduce(g);
    else
      raw_->all_reduce_sum(g.data_ptr<float>(), std::size_t(g.numel()));
    g.div_(world_);
  }
}

void Trainer::step() {
  const auto t0 = Clock::now();
  opt_->zero_grad();
  torch::Tensor out = w_.model->forward(w_.input);
  torch::Tensor loss = torch::nn::functional::cross_entropy(out, w_.target);
  const auto t1 = Clock::now();
  if (launches_) {
    launches_->backward_start = t1;
    launches_->at_ms.clear();
    launches_->buckets.clear();
    launches_->reduced_at_last = 0;
  }
  if (config_.strategy == Strategy::NoSync) {
    auto guard = idist::no_sync(w_.model);
    loss.backward();
  } else {
    loss.backward();
  }
  const auto t2 = Clock::now();
  if ((config_.strategy == Strategy::StatusQuoIdist || config_.strategy == Strategy::StatusQuoRaw) && world_ > 1)
    sync_status_quo();
  opt_->step();
  last_loss_ = loss.item<double>();
  const auto t3 = Clock::now();
  last_phases_ = {micros(t0, t1) / 1000.0, micros(t1, t2) / 1000.0, micros(t2, t3) / 1000.0};
}

void Trainer::record_phases() {
  forward_ms.push_back(last_phases_[0]);
  backward_ms.push_back(last_phases_[1]);
  step_ms.push_back(last_phases_[2]);
  if (launches_ && !launches_->at_ms.empty()) {
    first_launch_ms.push_back(launches_->at_ms.front());
    last_launch_ms.push_back(launches_->at_ms.back());
    reduced_at_last_bytes.push_back(double(launches_->reduced_at_last));
  }
}

void Trainer::read_buckets() {
  if (!config_.auto_model()) return;
  const std::vector<std::size_t> buckets = idist::gradient_bucket_bytes(w_.model);
  bucket_bytes_ = 0;
  for (std::size_t b : buckets) bucket_bytes_ += b;
  buckets_ = buckets.size();
}

}  // namespace idist_bench
