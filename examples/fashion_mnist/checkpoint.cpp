#include "checkpoint.hpp"

#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <idist/idist.hpp>

namespace fashion_mnist {
namespace {

std::filesystem::path newest_in(const std::filesystem::path& dir) {
  const std::regex name(R"(checkpoint_(\d+)\.pt)");
  std::filesystem::path best;
  long best_epoch = -1;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string file = entry.path().filename().string();
    if (!std::regex_match(file, m, name)) continue;
    if (const long e = std::stol(m[1]); e > best_epoch) best_epoch = e, best = entry.path();
  }
  return best;
}

std::vector<std::byte> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (!in.good() && !in.eof()) throw std::runtime_error(fmt::format("cannot read {}", path.string()));
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  return {p, p + text.size()};
}

std::int64_t read_int(torch::serialize::InputArchive& a, const char* key) {
  c10::IValue v;
  a.read(key, v);
  return v.toInt();
}

double read_double(torch::serialize::InputArchive& a, const char* key) {
  c10::IValue v;
  a.read(key, v);
  return v.toDouble();
}

}  // namespace

CheckpointState state_of(const Options& o, int epoch, int world_size) {
  return {epoch, o.seed, o.lr, o.momentum, o.lr_schedule, o.epochs, o.batch_size, o.limit, world_size};
}

std::filesystem::path save_checkpoint(const std::filesystem::path& dir, const CheckpointState& s,
                                      const torch::nn::Module& model, const torch::optim::Optimizer& optimizer) {
  torch::serialize::OutputArchive archive, model_archive, optimizer_archive;
  model.save(model_archive);
  optimizer.save(optimizer_archive);
  archive.write("model", model_archive);
  archive.write("optimizer", optimizer_archive);
  archive.write("epoch", c10::IValue(std::int64_t(s.epoch)));
  archive.write("seed", c10::IValue(std::int64_t(s.seed)));
  archive.write("lr", c10::IValue(s.lr));
  archive.write("momentum", c10::IValue(s.momentum));
  archive.write("lr_schedule", c10::IValue(std::int64_t(s.lr_schedule == LrSchedule::Linear)));
  archive.write("epochs", c10::IValue(std::int64_t(s.epochs)));
  archive.write("batch_size", c10::IValue(s.batch_size));
  archive.write("limit", c10::IValue(std::int64_t(s.limit)));
  archive.write("world_size", c10::IValue(std::int64_t(s.world_size)));
  std::filesystem::create_directories(dir);
  const auto path = dir / fmt::format("checkpoint_{}.pt", s.epoch);
  const auto partial = dir / fmt::format(".checkpoint_{}.pt.partial", s.epoch);
  archive.save_to(partial.string());
  std::filesystem::rename(partial, path);
  return path;
}

LoadedCheckpoint load_newest_checkpoint(const std::filesystem::path& dir) {
  const bool root = idist::get_rank() == 0;
  const std::filesystem::path path = idist::broadcast(root ? newest_in(dir) : std::filesystem::path(), 0);
  if (path.empty())
    throw idist::ValueError(fmt::format("--resume: no checkpoint_<epoch>.pt in {} (on rank 0)", dir.string()));
  const std::vector<std::byte> bytes = idist::broadcast_object(root ? read_bytes(path) : std::vector<std::byte>{}, 0);
  std::istringstream stream(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  torch::serialize::InputArchive archive;
  archive.load_from(stream);
  LoadedCheckpoint out;
  out.path = path;
  archive.read("model", out.model);
  archive.read("optimizer", out.optimizer);
  CheckpointState& s = out.state;
  s.epoch = int(read_int(archive, "epoch"));
  s.seed = std::uint64_t(read_int(archive, "seed"));
  s.lr = read_double(archive, "lr");
  s.momentum = read_double(archive, "momentum");
  s.lr_schedule = read_int(archive, "lr_schedule") != 0 ? LrSchedule::Linear : LrSchedule::Constant;
  s.epochs = int(read_int(archive, "epochs"));
  s.batch_size = read_int(archive, "batch_size");
  s.limit = std::uint32_t(read_int(archive, "limit"));
  s.world_size = int(read_int(archive, "world_size"));
  return out;
}

}  // namespace fashion_mnist
