#include "checkpoint/measure.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <system_error>

#include <fmt/core.h>

#include "common/timing.hpp"
#include "idist/idist.hpp"

namespace idist_bench {
namespace {

// A module of float parameter tensors totalling about `mib` MiB, plus one buffer.
struct Blob : torch::nn::Module {
  Blob(double mib, double tensor_mib) {
    const auto per = std::int64_t(tensor_mib * 1024 * 1024 / 4);
    const auto count = std::max<std::int64_t>(1, std::int64_t(mib / tensor_mib + 0.5));
    for (std::int64_t i = 0; i < count; ++i) register_parameter(fmt::format("w{}", i), torch::randn({per}));
    register_buffer("steps", torch::zeros({1}, torch::kLong));
  }
};

std::shared_ptr<torch::optim::Optimizer> make_optimizer(const std::string& name, Blob& model) {
  std::shared_ptr<torch::optim::Optimizer> opt;
  if (name == "adam")
    opt = std::make_shared<torch::optim::Adam>(model.parameters(), torch::optim::AdamOptions(1e-3));
  else
    opt = std::make_shared<torch::optim::SGD>(model.parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  for (auto& p : model.parameters()) p.mutable_grad() = torch::ones_like(p);
  opt->step();  // creates the state (momentum buffers, moments)
  return opt;
}

[[noreturn]] void fail(const std::string& what, const std::filesystem::path& path) {
  throw std::runtime_error(fmt::format("{} {}: {}", what, path.string(), std::strerror(errno)));
}

// Writes `bytes` to a new file with one write() call (the page cache), then fsyncs it; returns the
// two durations in microseconds.
std::pair<double, double> plain_write(const std::vector<char>& bytes, const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create", path);
  const auto t0 = Clock::now();
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) fail("cannot write", path);
    done += std::size_t(n);
  }
  const auto t1 = Clock::now();
  if (::fsync(fd) != 0) fail("cannot fsync", path);
  const auto t2 = Clock::now();
  ::close(fd);
  std::filesystem::remove(path);
  return {micros(t0, t1), micros(t1, t2)};
}

}  // namespace

CheckpointSamples measure_checkpoint(const CheckpointCase& c, const std::filesystem::path& dir, int reps) {
  torch::manual_seed(1);
  auto model = std::make_shared<Blob>(c.model_mib, c.tensor_mib);
  auto optimizer = make_optimizer(c.optimizer, *model);
  idist::Checkpoint checkpoint(dir, {{"model", model}, {"optimizer", optimizer}},
                               {.filename_prefix = fmt::format("bench{}", std::int64_t(c.model_mib)),
                                .require_empty = false,
                                .background_write = c.background_write});
  CheckpointSamples s;
  checkpoint.save({.iteration = 0});  // untimed: allocates the snapshot buffers
  checkpoint.wait();
  const bool root = idist::get_rank() == 0;
  std::vector<char> bytes;
  if (root) {
    s.file_bytes = std::filesystem::file_size(*checkpoint.last_checkpoint());
    bytes.assign(s.file_bytes, 1);  // touched: the plain write reads resident memory, as save does
  }
  for (int r = 1; r <= reps; ++r) {
    {
      torch::NoGradGuard no_grad;
      for (auto& p : model->parameters()) p.add_(1e-3);  // training moves on between saves
    }
    idist::barrier();
    const auto t0 = Clock::now();
    checkpoint.save({.iteration = std::uint64_t(r)});
    const auto t1 = Clock::now();
    checkpoint.wait();
    const auto t2 = Clock::now();
    s.save_us.push_back(micros(t0, t1));
    s.finish_us.push_back(micros(t1, t2));
    if (root) {
      const auto [write_us, fsync_us] = plain_write(bytes, dir / "plain_write.bin");
      s.page_cache_us.push_back(write_us);
      s.fsync_us.push_back(fsync_us);
    }
  }
  return s;
}

}  // namespace idist_bench
