// peer_mpi_loop: the training loop a user writes by hand with LibTorch and MPI, without idist: the
// peer of examples/fashion_mnist on mpi (benchmarks/run_peers.sh compares them).
//
//   mpirun -np 2 build/benchmarks/peer_mpi_loop                 # the example's CNN job, 1 epoch
//   mpirun -np 2 build/benchmarks/peer_mpi_loop --mode mlp      # the 32x512 MLP step of benchmarks/training
//
// cnn: the example's work (its Net, its IDX reader and normalisation, DistributedSampler's order:
// randperm seeded with seed + epoch, padded, every world-th index from the rank; SGD with momentum
// and the linear decay per step; global batch divided over the ranks, drop_last), but the images
// stay in one pre-stacked tensor indexed per batch, and after backward each parameter's gradient
// gets one MPI_Allreduce, then is divided by the world size. Rank 0 prints one JSON line with the
// example's keys; images_per_s covers the training loop only (after a barrier, until rank 0's last
// step returns), as the example times it.
// mlp: per-step times (maxima over the ranks) of the same hand-written synchronisation on the MLP.
#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>
#include <CLI/CLI.hpp>

#include "dataset.hpp"
#include "net.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string mode = "cnn";
  std::string data_dir = "/usr/share/datasets/fashion-mnist";  // the example's default
  std::uint32_t limit = 0;
  int epochs = 1;
  std::int64_t batch_size = 64;
  double lr = 0.05;
  double momentum = 0.9;
  std::string lr_schedule = "linear";
  std::uint64_t seed = 0;
  int threads = 1;
  std::string metrics = "epoch";
  int depth = 32;
  std::int64_t width = 512;
  std::int64_t mlp_batch = 16;
  int warmup = 3;
  int steps = 20;
};

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw std::runtime_error(fmt::format("{} failed: {}", call, std::string(text, std::size_t(len))));
}

int world_rank() {
  int r = 0;
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &r), "MPI_Comm_rank");
  return r;
}

int world_size() {
  int n = 1;
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &n), "MPI_Comm_size");
  return n;
}

// The user's hand-written start: every rank takes rank 0's weights.
void broadcast_parameters(torch::nn::Module& model) {
  for (auto& p : model.parameters()) {
    torch::Tensor t = p.detach();
    check_mpi(MPI_Bcast(t.data_ptr<float>(), int(t.numel()), MPI_FLOAT, 0, MPI_COMM_WORLD), "MPI_Bcast");
  }
}

// The user's hand-written synchronisation: one blocking all-reduce per gradient, then the mean.
void average_gradients(const std::vector<torch::Tensor>& params, int world) {
  for (const auto& p : params) {
    torch::Tensor g = p.grad();
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, g.data_ptr<float>(), int(g.numel()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
              "MPI_Allreduce");
    g.div_(world);
  }
}

// torch.utils.data.DistributedSampler's indices for this rank (shuffled with seed + epoch, padded by
// repetition to a multiple of the world size, every world-th from the rank), as int64.
std::vector<std::int64_t> sampler_indices(std::int64_t n, std::uint64_t seed, std::uint64_t epoch, int world,
                                          int rank) {
  const at::Generator gen = at::detail::createCPUGenerator(seed + epoch);
  const torch::Tensor perm = at::randperm(n, gen, at::kLong);
  const std::int64_t* p = perm.data_ptr<std::int64_t>();
  const std::int64_t total = (n + world - 1) / world * world;
  std::vector<std::int64_t> mine;
  for (std::int64_t i = rank; i < total; i += world) mine.push_back(p[i % n]);
  return mine;
}

// FNV-1a (64 bits) of the parameters' bytes, as examples/fashion_mnist/metrics.cpp computes it.
std::string weights_digest(torch::nn::Module& model) {
  std::uint64_t h = 14695981039346656037ull;
  for (const auto& p : model.parameters()) {
    const torch::Tensor t = p.detach().contiguous();
    const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
    for (std::size_t i = 0; i < t.nbytes(); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

// Accuracy over the test split: each rank scores every world-th image from its rank (the unpadded part
// of an unshuffled DistributedSampler's share) in batches of 1000; counts summed over the ranks.
double evaluate(fashion_mnist::Net& model, const fashion_mnist::FashionMnist& test, int world, int rank) {
  torch::NoGradGuard no_grad;
  model.eval();
  const std::int64_t n = test.images().size(0);
  const torch::Tensor mine = torch::arange(rank, n, world, torch::kLong);
  std::array<std::int64_t, 2> counts{0, 0};  // correct, total
  for (std::int64_t i = 0; i < mine.size(0); i += 1000) {
    const torch::Tensor idx = mine.slice(0, i, std::min(i + 1000, mine.size(0)));
    const torch::Tensor logits = model.forward(test.images().index_select(0, idx));
    counts[0] += logits.argmax(1).eq(test.targets().index_select(0, idx)).sum().item<std::int64_t>();
    counts[1] += idx.size(0);
  }
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, counts.data(), 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  return counts[1] > 0 ? double(counts[0]) / double(counts[1]) : 0.0;
}

void train_cnn(const Options& o) {
  const int rank = world_rank(), world = world_size();
  torch::manual_seed(o.seed);
  const fashion_mnist::FashionMnist train(o.data_dir, fashion_mnist::FashionMnist::Mode::Train, o.limit);
  const fashion_mnist::FashionMnist test(o.data_dir, fashion_mnist::FashionMnist::Mode::Test);
  const std::int64_t n = train.images().size(0);
  const std::int64_t local_batch = o.batch_size >= world ? o.batch_size / world : o.batch_size;
  const std::int64_t per_rank = (n + world - 1) / world;
  const std::int64_t steps = per_rank / local_batch;  // drop_last
  if (steps == 0)
    throw std::invalid_argument(fmt::format("--limit {}: fewer than one batch of {} per rank", o.limit, local_batch));

  auto model = std::make_shared<fashion_mnist::Net>();
  broadcast_parameters(*model);
  const std::vector<torch::Tensor> params = model->parameters();
  torch::optim::SGD optimizer(params, torch::optim::SGDOptions(o.lr).momentum(o.momentum));
  if (rank == 0)
    fmt::print(stderr,
               "peer_mpi_loop: {} training / {} test images, global batch {} ({} per rank x {} ranks), {} steps per "
               "epoch, {} intra-op thread(s) per rank, metrics reduced per {}\n",
               n, test.images().size(0), local_batch * world, local_batch, world, steps, torch::get_num_threads(),
               o.metrics);

  double trained = 0;
  std::int64_t images_done = 0;
  std::array<double, 4> totals{};  // loss * n, correct, n over all ranks (last epoch), flag
  double accuracy = 0;
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    model->train();
    std::array<double, 4> local{}, epoch_totals{};
    check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");  // start the clock together
    const auto start = Clock::now();
    std::vector<std::int64_t> indices = sampler_indices(n, o.seed, std::uint64_t(epoch - 1), world, rank);
    for (std::int64_t step = 0; step < steps; ++step) {
      const torch::Tensor idx = torch::from_blob(indices.data() + step * local_batch, {local_batch}, torch::kLong);
      const torch::Tensor data = train.images().index_select(0, idx);
      const torch::Tensor target = train.targets().index_select(0, idx);
      optimizer.zero_grad();
      const torch::Tensor logits = model->forward(data);
      const torch::Tensor loss = torch::nn::functional::cross_entropy(logits, target);
      loss.backward();
      average_gradients(params, world);
      const double progress = double((epoch - 1) * steps + step) / double(o.epochs * steps);
      const double lr = o.lr_schedule == "linear" ? o.lr * (1.0 - progress) : o.lr;
      for (auto& group : optimizer.param_groups()) static_cast<torch::optim::SGDOptions&>(group.options()).lr(lr);
      optimizer.step();
      const auto b = double(local_batch);
      std::array<double, 4> s{loss.item<double>() * b,
                              double(logits.detach().argmax(1).eq(target).sum().item<std::int64_t>()), b, 0.0};
      if (o.metrics == "step") {  // the example's progress line: one all-reduce of 4 doubles per step
        check_mpi(MPI_Allreduce(MPI_IN_PLACE, s.data(), 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
        for (int i = 0; i < 3; ++i) epoch_totals[i] += s[i];
      } else {
        for (int i = 0; i < 3; ++i) local[i] += s[i];
      }
    }
    trained += std::chrono::duration<double>(Clock::now() - start).count();
    images_done += steps * local_batch * world;
    if (o.metrics != "step") {
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, local.data(), 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
      epoch_totals = local;
    }
    totals = epoch_totals;
    accuracy = evaluate(*model, test, world, rank);
    if (rank == 0) fmt::print(stderr, "epoch {}/{}: test accuracy {:.4f}\n", epoch, o.epochs, accuracy);
  }
  if (rank == 0) {
    fmt::print(
        "{{\"world_size\": {}, \"backend\": \"mpi\", \"epochs\": {}, \"first_epoch\": 1, \"last_epoch\": {}, "
        "\"batch_size\": {}, \"train_images\": {}, \"threads_per_rank\": {}, \"train_seconds\": {:.3f}, "
        "\"images_per_s\": {:.1f}, \"train_loss\": {:.6f}, \"train_accuracy\": {:.6f}, \"test_accuracy\": {:.4f}, "
        "\"comm_hook\": \"none\", \"weights_digest\": \"{}\", \"sync_bn\": false, \"program\": \"mpi_loop\", "
        "\"metrics\": \"{}\"}}\n",
        world, o.epochs, o.epochs, local_batch * world, n, torch::get_num_threads(), trained,
        trained > 0 ? double(images_done) / trained : 0.0, totals[0] / totals[2], totals[1] / totals[2], accuracy,
        weights_digest(*model), o.metrics);
    std::fflush(stdout);
  }
}

// benchmarks/training/models.cpp's mlp(): `depth` Linear width -> width with ReLU between them.
torch::nn::Sequential mlp(int depth, std::int64_t width) {
  torch::nn::Sequential s;
  for (int i = 0; i < depth; ++i) {
    s->push_back(torch::nn::Linear(width, width));
    if (i + 1 < depth) s->push_back(torch::nn::ReLU());
  }
  return s;
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const auto lo = std::size_t(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

void train_mlp(const Options& o) {
  const int rank = world_rank(), world = world_size();
  torch::manual_seed(o.seed);
  torch::nn::Sequential model = mlp(o.depth, o.width);
  torch::manual_seed(o.seed + 1000 + std::uint64_t(rank));  // benchmarks/training: a different batch per rank
  const torch::Tensor x = torch::randn({o.mlp_batch, o.width});
  const torch::Tensor y = torch::randint(0, o.width, {o.mlp_batch}, torch::kLong);
  broadcast_parameters(*model);
  const std::vector<torch::Tensor> params = model->parameters();
  torch::optim::SGD optimizer(params, torch::optim::SGDOptions(0.05));
  double last_loss = 0;
  const auto step = [&] {
    optimizer.zero_grad();
    const torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();
    average_gradients(params, world);
    optimizer.step();
    last_loss = loss.item<double>();
  };
  for (int i = 0; i < o.warmup; ++i) step();
  check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  step();  // untimed, as benchmarks/training does after its barrier (so that the last losses compare)
  std::vector<double> ms;
  for (int i = 0; i < o.steps; ++i) {
    const auto t0 = Clock::now();
    step();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, ms.data(), int(ms.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
            "MPI_Allreduce");
  if (rank == 0) {
    double mean = 0;
    for (double v : ms) mean += v / double(ms.size());
    const double p50 = quantile(ms, 0.5);
    fmt::print(
        "{{\"program\": \"mpi_loop\", \"mode\": \"mlp{}x{}\", \"world_size\": {}, \"backend\": \"mpi\", "
        "\"batch_per_rank\": {}, \"threads_per_rank\": {}, \"warmup\": {}, \"steps\": {}, \"p50_ms\": {:.3f}, "
        "\"p90_ms\": {:.3f}, \"mean_ms\": {:.3f}, \"min_ms\": {:.3f}, \"samples_per_s\": {:.1f}, \"last_loss\": "
        "{:.6f}}}\n",
        o.depth, o.width, world, o.mlp_batch, torch::get_num_threads(), o.warmup, o.steps, p50, quantile(ms, 0.9), mean,
        *std::min_element(ms.begin(), ms.end()), double(o.mlp_batch * world) * 1000.0 / p50, last_loss);
    std::fflush(stdout);
  }
}

std::optional<int> parse(int argc, char** argv, Options& o) {
  CLI::App app{"The hand-written LibTorch + MPI peer of examples/fashion_mnist (no idist)."};
  app.add_option("--mode", o.mode, "cnn (the example's job) or mlp (the training benchmark's MLP step)")
      ->check(CLI::IsMember({"cnn", "mlp"}))
      ->capture_default_str();
  app.add_option("--data-dir", o.data_dir, "folder of the Fashion-MNIST IDX gzip files")->capture_default_str();
  app.add_option("--limit", o.limit, "train on the first N images only (0: all)")->capture_default_str();
  app.add_option("--epochs", o.epochs)->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "global batch, divided over the ranks")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--lr", o.lr)->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--momentum", o.momentum)->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--lr-schedule", o.lr_schedule)->check(CLI::IsMember({"linear", "constant"}))->capture_default_str();
  app.add_option("--seed", o.seed)->capture_default_str();
  app.add_option("--threads", o.threads, "LibTorch intra-op threads per rank")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--metrics", o.metrics,
                 "reduce the training loss / accuracy over the ranks once per epoch, or every step (as the "
                 "example's progress line does)")
      ->check(CLI::IsMember({"epoch", "step"}))
      ->capture_default_str();
  app.add_option("--depth", o.depth, "mlp: Linear layers")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--width", o.width, "mlp: features")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--mlp-batch", o.mlp_batch, "mlp: samples per rank per step")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "mlp: untimed steps")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--steps", o.steps, "mlp: timed steps")->check(CLI::PositiveNumber)->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (auto code = parse(argc, argv, o)) return *code;
  check_mpi(MPI_Init(&argc, &argv), "MPI_Init");
  try {
    torch::set_num_threads(o.threads);
    if (o.mode == "cnn")
      train_cnn(o);
    else
      train_mlp(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "peer_mpi_loop: error on rank {}: {}\n", world_rank(), e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);  // the other ranks may be waiting in a collective
    return 1;
  }
  MPI_Finalize();
  return 0;
}
