// idist training benchmark: step time of data-parallel LibTorch training with auto_model against
// the per-parameter all-reduce status quo, a bucket-size sweep and no_sync; and
// ZeroRedundancyOptimizer against auto_model + Adam (step time, optimizer state). See
// docs/performance.md.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "common/memory.hpp"
#include "common/raw_backend.hpp"
#include "common/stats.hpp"
#include "common/table.hpp"
#include "common/timing.hpp"
#include "idist/idist.hpp"
#include "training/models.hpp"
#include "training/options.hpp"
#include "training/strategies.hpp"

namespace idist_bench {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
// Relative loss difference above which a synchronised configuration is reported as broken.
constexpr double kLossTolerance = 1e-4;

std::vector<Column> columns() {
  return {{"model", 10},
          {"config", 17},
          {"bucket_MiB", 10},
          {"buckets", 7},
          {"ranks", 5},
          {"batch", 5},
          {"p50_ms", 9},
          {"p90_ms", 9},
          {"p95_ms", 9},
          {"samples_per_s", 13},
          {"speedup_sq_idist", 16},
          {"speedup_sq_raw", 14},
          {"exposed_ms", 10},
          {"target", 6},
          {"avg_ms", 9, false},
          {"min_ms", 9, false},
          {"max_ms", 9, false},
          {"steps", 5, false},
          {"grad_MiB", 9, false},
          {"bucket_buffers_MiB", 9, false},
          {"optim_state_MiB", 15},
          {"zero_buffers_MiB", 9, false},
          {"x_auto_adam", 11},
          {"last_loss", 10, false},
          {"forward_p50_ms", 9, false},
          {"backward_p50_ms", 9, false},
          {"step_p50_ms", 9, false}};
}

// The targets for the default auto_model on 2 ranks: gloo >= 1.15x the status quo on the
// 32x512 MLP and >= 10x on the 200-layer model; mpi no slower than the status quo (3 %) anywhere.
std::string target(const std::string& backend, const std::string& model, double auto_p50, double sq_idist,
                   double sq_raw) {
  const double sq = std::min(sq_idist > 0 ? sq_idist : sq_raw, sq_raw > 0 ? sq_raw : sq_idist);
  if (sq <= 0) return "-";
  if (backend == "mpi") return auto_p50 <= 1.03 * sq ? "ok" : "MISS";
  if (backend == "gloo") {
    if (model == "mlp32x512") return sq / auto_p50 >= 1.15 ? "ok" : "MISS";
    if (model == "mlp200x64") return sq / auto_p50 >= 10.0 ? "ok" : "MISS";
  }
  return "-";
}

/// Per rank, in rank order: the peak resident set size (`peak`), and that peak minus the
/// file-backed and shared pages resident now (`peak_private`, see shared_rss_bytes()). Bytes.
struct RankMemory {
  std::vector<std::size_t> peak;
  std::vector<std::size_t> peak_private;
};

/// Measures this rank's RankMemory and gathers every rank's in one all_gather (collective).
RankMemory memory_per_rank() {
  const std::size_t peak = peak_rss_bytes();
  const std::size_t shared = shared_rss_bytes();
  const std::vector<std::int64_t> mine{std::int64_t(peak), std::int64_t(peak > shared ? peak - shared : 0)};
  const std::vector<std::int64_t> all = idist::all_gather(std::span<const std::int64_t>(mine));
  RankMemory m;
  for (std::size_t i = 0; i + 1 < all.size(); i += 2) {
    m.peak.push_back(std::size_t(all[i]));
    m.peak_private.push_back(std::size_t(all[i + 1]));
  }
  return m;
}

/// `bytes` in MiB with one decimal, joined by `sep` ("101.4;101.1").
std::string mib_list(const std::vector<std::size_t>& bytes, const char* sep) {
  std::string out;
  for (std::size_t v : bytes) out += (out.empty() ? "" : sep) + fixed(double(v) / kMiB, 1);
  return out;
}

/// The largest of `bytes`, in MiB with one decimal.
std::string mib_max(const std::vector<std::size_t>& bytes) {
  return fixed(double(*std::max_element(bytes.begin(), bytes.end())) / kMiB, 1);
}

/// Per configuration, the largest over ranks of its optimizer state and ZeRO buffer bytes (collective).
struct OptimizerMemory {
  std::vector<std::size_t> state, zero_buffers;
};

OptimizerMemory optimizer_memory(const std::vector<std::unique_ptr<Trainer>>& trainers) {
  OptimizerMemory m;
  for (const auto& t : trainers) {
    m.state.push_back(std::size_t(idist::all_reduce(std::int64_t(t->optimizer_state_bytes()), idist::ReduceOp::Max)));
    m.zero_buffers.push_back(
        std::size_t(idist::all_reduce(std::int64_t(t->zero_buffer_bytes()), idist::ReduceOp::Max)));
  }
  return m;
}

void append_memory_rows(const std::string& path, const std::string& backend, const std::string& model,
                        std::int64_t batch, const std::vector<std::unique_ptr<Trainer>>& trainers,
                        const RankMemory& mem, const OptimizerMemory& optim, bool steps_only) {
  const bool fresh = !std::filesystem::exists(path);
  std::ofstream f(path, std::ios::app);
  if (!f) throw std::runtime_error("cannot write " + path);
  if (fresh)
    f << "backend,model,config,ranks,batch,peak_rss_MiB_max,peak_rss_MiB_per_rank,peak_private_MiB_max,"
         "peak_private_MiB_per_rank,grad_MiB,bucket_buffers_MiB,"
         "configs_in_process,peak_of,optim_state_MiB_max,zero_buffers_MiB_max\n";
  for (std::size_t k = 0; k < trainers.size(); ++k) {
    const auto& t = trainers[k];
    f << backend << "," << model << "," << t->config().name() << "," << mem.peak.size() << "," << batch << ","
      << mib_max(mem.peak) << "," << mib_list(mem.peak, ";") << "," << mib_max(mem.peak_private) << ","
      << mib_list(mem.peak_private, ";") << "," << fixed(double(t->gradient_bytes()) / kMiB, 2) << ","
      << fixed(double(t->bucket_bytes()) / kMiB, 2) << "," << trainers.size() << ","
      << (steps_only ? "steps" : "process") << "," << fixed(double(optim.state[k]) / kMiB, 2) << ","
      << fixed(double(optim.zero_buffers[k]) / kMiB, 2) << "\n";
  }
}

// The "timeline" hook's reading of one configuration: when backward's first bucket left, when its
// compute was done (the last bucket left), and when backward returned with every bucket reduced; the
// span from the first bucket to the return carries the all-reduce, 2(n-1)/n of the gradients each way.
void print_timeline(const Trainer& t, double backward_p50, int n) {
  if (t.first_launch_ms.empty()) return;
  const double first = summarize(t.first_launch_ms).p50;
  const double last = summarize(t.last_launch_ms).p50;
  const double span = backward_p50 - first;
  const double share = 2.0 * (n - 1) / n;  // of a bucket's bytes, sent (and received) by each rank
  const double bytes = double(t.gradient_bytes()) * share;
  const double early = summarize(t.reduced_at_last_bytes).p50 * share;  // moved while computing
  const auto gbits = [](double b, double ms) { return ms > 0 ? b * 8 / (ms * 1e6) : 0.0; };
  fmt::print(
      "# timeline {}: from backward's start, the first bucket leaves at {:.1f} ms, the last at {:.1f} ms, "
      "backward returns at {:.1f} ms (p50s over ranks' maxima); the {:.1f} ms from the first bucket to the "
      "return carry {:.2f} MiB each way: {:.3f} Gbit/s. Buckets complete when the last left: {:.2f} MiB "
      "each way, at least {:.3f} Gbit/s while backward computed, then {:.3f} Gbit/s\n",
      t.config().name(), first, last, backward_p50, span, bytes / kMiB, gbits(bytes, span), early / kMiB,
      gbits(early, last - first), gbits(bytes - early, backward_p50 - last));
}

void run_model(const TrainingOptions& o, const std::string& model, const std::vector<Config>& configs, RawBackend* raw,
               const std::string& backend) {
  const bool root = idist::get_rank() == 0;
  const bool dist = idist::get_world_size() > 1;
  const std::int64_t batch = o.batch > 0 ? o.batch : default_batch(model);
  std::vector<std::unique_ptr<Trainer>> trainers;
  for (const Config& c : configs) trainers.push_back(std::make_unique<Trainer>(model, c, batch, o.seed, raw));
  for (auto& t : trainers) {
    for (int i = 0; i < o.warmup; ++i) t->step();
    t->read_buckets();  // the layout the timed steps use (a tuned cap is chosen during the warm-up)
  }
  // From here on the peak resident memory is that of training steps, not of setup transients
  // (auto_model's one-off flat copy for the initial broadcast, the status quo's broadcasts).
  const bool step_peak = reset_peak_rss();

  const std::size_t nc = trainers.size();
  for (int r = 0; r < o.rounds; ++r) {
    for (std::size_t j = 0; j < nc; ++j) {
      Trainer& t = *trainers[(std::size_t(r) + j) % nc];  // rotate who goes first
      if (dist) idist::barrier();
      t.step();  // untimed: the previous configuration's model left the caches
      for (int s = 0; s < o.steps; ++s) {
        const auto t0 = Clock::now();
        t.step();
        t.samples.push_back(micros(t0, Clock::now()) / 1000.0);
        t.record_phases();
      }
    }
  }

  std::vector<Summary> sums;
  double sq_idist = 0, sq_raw = 0, nosync = 0;
  std::vector<std::array<double, 3>> phases;  // p50 of forward, backward, rest (per-step maxima over ranks)
  for (auto& t : trainers) {
    max_over_ranks(t->samples);
    sums.push_back(summarize(t->samples));
    std::array<double, 3> p{};
    std::vector<double>* parts[3] = {&t->forward_ms, &t->backward_ms, &t->step_ms};
    for (int i = 0; i < 3; ++i) {
      max_over_ranks(*parts[i]);
      p[std::size_t(i)] = summarize(*parts[i]).p50;
    }
    phases.push_back(p);
    if (!t->first_launch_ms.empty()) {
      max_over_ranks(t->first_launch_ms);
      max_over_ranks(t->last_launch_ms);
      max_over_ranks(t->reduced_at_last_bytes);
    }
    const Strategy s = t->config().strategy;
    if (s == Strategy::StatusQuoIdist) sq_idist = sums.back().p50;
    if (s == Strategy::StatusQuoRaw) sq_raw = sums.back().p50;
    if (s == Strategy::NoSync) nosync = sums.back().p50;
  }
  const RankMemory mem = memory_per_rank();  // peaks since reset_peak_rss() when step_peak
  const OptimizerMemory optim = optimizer_memory(trainers);
  // Every synchronised configuration starts from the same weights, sees the same data and averages
  // the same gradients, so after the same number of steps their losses agree up to rounding: a
  // check that each of them really synchronises. no_sync (local steps only) shows how far apart an
  // unsynchronised run ends up.
  // SGD and Adam configurations are compared among themselves (ZeRO against auto_model + Adam); the
  // printed reference is SGD's when there is one.
  double ref_by[2] = {0, 0};  // [sgd, adam]
  bool have_by[2] = {false, false};
  double worst = 0, nosync_gap = -1;
  std::string worst_name;
  for (auto& t : trainers) {
    const Strategy s = t->config().strategy;
    if (s == Strategy::Local || s == Strategy::NoSync || !t->config().exact()) continue;  // compression: other loss
    const int family = t->config().adam() ? 1 : 0;
    if (!have_by[family]) {
      ref_by[family] = t->last_loss();
      have_by[family] = true;
      continue;
    }
    const double rel = std::abs(t->last_loss() - ref_by[family]) / std::max(1e-12, std::abs(ref_by[family]));
    if (rel >= worst) {
      worst = rel;
      worst_name = t->config().name();
    }
  }
  const bool have_ref = have_by[0] || have_by[1];
  const double ref_loss = have_by[0] ? ref_by[0] : ref_by[1];
  for (auto& t : trainers)
    if (have_by[0] && t->config().strategy == Strategy::NoSync)
      nosync_gap = std::abs(t->last_loss() - ref_loss) / std::max(1e-12, std::abs(ref_loss));
  if (worst > kLossTolerance)
    throw std::runtime_error(
        fmt::format("{}: the loss of {} differs from the other synchronised configurations' by {:.3g} "
                    "(relative, tolerance {:g}): its gradients are not averaged like theirs",
                    model, worst_name, worst, kLossTolerance));
  if (!root) return;

  Table table(columns());
  fmt::print("\n## {} (batch {} per rank, {} ranks)\n", model, batch, idist::get_world_size());
  table.print_header();
  const int n = idist::get_world_size();
  // ZeRO's step time against auto_model + Adam with the same bucket cap.
  const auto adam_p50 = [&](std::optional<double> bucket_mb) {
    for (std::size_t k = 0; k < nc; ++k)
      if (trainers[k]->config().strategy == Strategy::AutoModelAdam && trainers[k]->config().bucket_mb == bucket_mb)
        return sums[k].p50;
    return 0.0;
  };
  for (std::size_t k = 0; k < nc; ++k) {
    const Trainer& t = *trainers[k];
    const Summary& s = sums[k];
    const bool am = t.config().auto_model() && t.config().strategy != Strategy::NoSync;
    const bool zero = is_zero(t.config().strategy);
    const auto ratio = [&](double ref) { return ref > 0 ? fixed(ref / s.p50, 3) : std::string("-"); };
    table.add_row({model,
                   t.config().name(),
                   am ? (t.config().bucket_mb ? fmt::format("{:g}", *t.config().bucket_mb) : "auto") : "-",
                   std::to_string(t.buckets()),
                   std::to_string(n),
                   std::to_string(batch),
                   fixed(s.p50, 2),
                   fixed(s.p90, 2),
                   fixed(s.p95, 2),
                   fixed(double(n * batch) / (s.p50 / 1000.0), 1),
                   ratio(sq_idist),
                   ratio(sq_raw),
                   nosync > 0 && t.config().strategy != Strategy::NoSync ? fixed(s.p50 - nosync, 2) : "-",
                   t.config().strategy == Strategy::AutoModel && t.config().bucket_mb == 25.0
                       ? target(backend, model, s.p50, sq_idist, sq_raw)
                       : "-",
                   fixed(s.avg, 2),
                   fixed(s.min, 2),
                   fixed(s.max, 2),
                   std::to_string(s.n),
                   fixed(double(t.gradient_bytes()) / kMiB, 2),
                   fixed(double(t.bucket_bytes()) / kMiB, 2),
                   fixed(double(optim.state[k]) / kMiB, 2),
                   fixed(double(optim.zero_buffers[k]) / kMiB, 2),
                   zero && adam_p50(t.config().bucket_mb) > 0 ? fixed(s.p50 / adam_p50(t.config().bucket_mb), 3) : "-",
                   fmt::format("{:.6g}", t.last_loss()),
                   fixed(phases[k][0], 3),
                   fixed(phases[k][1], 3),
                   fixed(phases[k][2], 3)});
  }
  if (have_ref)
    fmt::print(
        "# final loss {:.6g}; largest relative difference between synchronised configurations {:.2e} "
        "(no_sync: {:.2e})\n",
        ref_loss, worst, nosync_gap);
  for (std::size_t k = 0; k < nc; ++k) print_timeline(*trainers[k], phases[k][1], n);
  fmt::print("# peak resident memory per rank during the timed steps of all {} configurations{}: {} MiB\n", nc,
             step_peak ? "" : " (whole process: could not reset the peak)", mib_list(mem.peak, ", "));
  const std::string stem = o.out_dir + "/training_" + backend + "_" + model;
  table.write_csv(stem + ".csv");
  table.write_markdown(stem + ".md");
  if (!o.memory_csv.empty()) append_memory_rows(o.memory_csv, backend, model, batch, trainers, mem, optim, step_peak);
}

void run(const TrainingOptions& o) {
  at::set_num_threads(o.threads);
  try {
    at::set_num_interop_threads(1);
  } catch (const std::exception&) {
    // already set in this process
  }
  // Deep ReLU stacks drive activations towards denormal floats, which x86 computes ~100x slower;
  // flushing them keeps every configuration's compute time stable (the same for all of them).
  at::globalContext().setFlushDenormal(true);

  const bool dist = idist::get_world_size() > 1;
  const std::string backend = o.label.empty() ? idist::backend().value_or("serial") : o.label;
  std::unique_ptr<RawBackend> raw = dist ? make_raw_backend(idist::current_model()) : nullptr;
  std::vector<Config> configs;
  if (o.configs.empty()) {
    configs = default_configs(dist, o.buckets_mb);
  } else {
    for (const auto& s : o.configs) configs.push_back(parse_config(s));
  }
  for (const auto& c : configs)
    if ((c.strategy == Strategy::Local) == dist)
      throw std::invalid_argument("config " + c.name() +
                                  (dist ? " needs --backend serial" : " needs a distributed backend"));
  if (idist::get_rank() == 0) {
    ensure_dir(o.out_dir);
    fmt::print(
        "# idist training benchmark: backend {}, {} ranks on {} node(s), {} intra-op thread(s) each, host {}, "
        "load average {}; non-blocking collectives progress in the background: {}\n",
        backend, idist::get_world_size(), idist::get_nnodes(), o.threads, idist::hostname(), load_average(),
        idist::current_model().has_async_progress() ? "yes" : "no");
    fmt::print(
        "# step = zero_grad + forward + cross-entropy + backward (+ synchronisation) + optimizer step (SGD; Adam\n"
        "# for auto_model_adam and zero, whose x_auto_adam is its p50 over auto_model_adam's); times are\n"
        "# per-step maxima over ranks; {} rounds x {} timed steps per configuration, configurations interleaved\n",
        o.rounds, o.steps);
  }
  for (const auto& m : o.models) run_model(o, m, configs, raw.get(), backend);
  if (idist::get_rank() == 0) fmt::print("\n# load average at the end: {}\n", load_average());
}

}  // namespace
}  // namespace idist_bench

int main(int argc, char** argv) {
  using namespace idist_bench;
  TrainingOptions opts;
  int code = 0;
  if (!parse_training_options(argc, argv, opts, code)) return code;
  try {
    const auto timeout = std::chrono::milliseconds(std::chrono::seconds(opts.timeout_s));
    if (opts.backend == "serial") {
      run(opts);
    } else if (opts.nproc > 0) {
      idist::SpawnOptions so;
      so.nproc_per_node = opts.nproc;
      so.master_port = opts.port;
      so.timeout = timeout;
      idist::spawn(
          opts.backend, [](int, const TrainingOptions& o) { run(o); }, opts, so);
    } else {
      idist::InitOptions io;
      io.timeout = timeout;
      idist::initialize(opts.backend, io);
      run(opts);
      idist::finalize();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idist_bench_training: %s\n", e.what());
    return 1;
  }
  return 0;
}
