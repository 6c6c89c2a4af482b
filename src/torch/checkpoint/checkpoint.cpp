// idist::Checkpoint: the collective protocol around the saving rank's directory (see
// include/idist/torch/checkpoint.hpp). One collective per save (an all-gather of every rank's
// error, if any, and generator state), one per wait(), two or more per load (status, then the
// payload in chunks).
#include "idist/torch/checkpoint.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <span>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "idist/collectives.hpp"
#include "idist/context.hpp"
#include "idist/logging.hpp"
#include "torch/checkpoint/archive.hpp"
#include "torch/checkpoint/background_writer.hpp"
#include "torch/checkpoint/directory.hpp"
#include "torch/checkpoint/file_format.hpp"
#include "torch/checkpoint/snapshot.hpp"

namespace idist {
namespace {

constexpr std::string_view kLogger = "handlers.checkpoint";
constexpr std::size_t kBroadcastChunk = std::size_t(1) << 28;

// One rank's part of a save's all-gather: its error (empty: none) and its generator state.
std::vector<std::byte> encode(const std::string& error, const at::Tensor& rng) {
  const std::uint64_t n = error.size();
  const at::Tensor state = rng.contiguous();
  std::vector<std::byte> out(sizeof n + n + std::size_t(state.numel()));
  std::memcpy(out.data(), &n, sizeof n);
  std::memcpy(out.data() + sizeof n, error.data(), n);
  std::memcpy(out.data() + sizeof n + n, state.data_ptr<std::uint8_t>(), std::size_t(state.numel()));
  return out;
}

std::pair<std::string, at::Tensor> decode(const std::vector<std::byte>& blob) {
  std::uint64_t n = 0;
  std::memcpy(&n, blob.data(), sizeof n);
  std::string error(reinterpret_cast<const char*>(blob.data()) + sizeof n, n);
  at::Tensor rng = at::empty({std::int64_t(blob.size() - sizeof n - n)}, at::kByte);
  std::memcpy(rng.data_ptr<std::uint8_t>(), blob.data() + sizeof n + n, std::size_t(rng.numel()));
  return {std::move(error), rng};
}

void log_warnings(const checkpoint::Outcome& outcome) {
  for (const auto& w : outcome.warnings) log_warning(kLogger, w);
}

void check_name(const std::string& name, const char* what) {
  if (name.empty()) throw ValueError(fmt::format("Checkpoint: {} should be a non-empty name", what));
  if (name.find('/') != std::string::npos || name.find('\0') != std::string::npos)
    throw ValueError(fmt::format("Checkpoint: {} '{}' names a file: it should contain no '/'", what, name));
}

}  // namespace

CheckpointItem::CheckpointItem(TargetTag, std::string name, Target target)
    : name_(std::move(name)), target_(std::move(target)) {
  bool null = false;
  if (const auto* m = std::get_if<std::shared_ptr<torch::nn::Module>>(&target_)) null = !*m;
  if (const auto* o = std::get_if<std::shared_ptr<torch::optim::Optimizer>>(&target_)) null = !*o;
  if (const auto* l = std::get_if<detail::LoaderItem>(&target_)) null = !l->progress;
  if (const auto* c = std::get_if<detail::CustomItem>(&target_)) null = !c->save || !c->load;
  if (null) throw ValueError(fmt::format("Checkpoint: item '{}' is null; expected an object to save", name_));
}

CheckpointItem::CheckpointItem(std::string name, std::shared_ptr<Checkpointable> object)
    : CheckpointItem(std::move(name), object ? Target(detail::CustomItem{
                                                   [object](torch::serialize::OutputArchive& a) { object->save(a); },
                                                   [object](torch::serialize::InputArchive& a) { object->load(a); }})
                                             : Target(detail::CustomItem{})) {}

CheckpointItem::CheckpointItem(std::string name, Checkpointable& object)
    : CheckpointItem(std::move(name),
                     Target(detail::CustomItem{[&object](torch::serialize::OutputArchive& a) { object.save(a); },
                                               [&object](torch::serialize::InputArchive& a) { object.load(a); }})) {}

CheckpointItem::CheckpointItem(std::string name, std::function<void(torch::serialize::OutputArchive&)> save,
                               std::function<void(torch::serialize::InputArchive&)> load)
    : CheckpointItem(std::move(name), Target(detail::CustomItem{std::move(save), std::move(load)})) {}

struct Checkpoint::Impl {
  std::filesystem::path dir;  // the saving rank's, absolute
  std::vector<CheckpointItem> items;
  CheckpointOptions options;
  std::string base;                                          // file names are {base}_{iteration}.pt
  torch::Device device{torch::kCPU};                         // where archives are loaded (checkpoint::load_device)
  std::optional<std::string> last;                           // file name of the last save or load
  std::vector<std::pair<std::uint64_t, std::string>> saved;  // saving rank: kept files, oldest first
  std::string deferred_error;                                // saving rank: raised by the next save / wait
  checkpoint::BackgroundWriter writer;
  checkpoint::SnapshotPool pool;

  bool is_root() const { return get_rank() == options.save_on_rank; }

  // The saving rank: the outcome of the write in flight, as an error message ("" when it succeeded).
  std::string finish_write() {
    const checkpoint::Outcome outcome = writer.wait();
    log_warnings(outcome);
    if (!deferred_error.empty()) return std::exchange(deferred_error, {});
    if (outcome.error.empty()) return {};
    return fmt::format("writing {} failed: {}", (dir / last.value_or("?")).string(), outcome.error);
  }

  // The saving rank: files to delete to keep n_saved (never `name` itself), oldest first. All but
  // the last are surplus found by load_latest (a killed save renamed its file but did not remove the
  // oldest; a run with a larger n_saved): they go before the write, which still leaves n_saved
  // complete files, so that saves killed one after another never leave more than n_saved + 1.
  std::vector<std::string> retain(std::uint64_t iteration, const std::string& name) {
    std::erase_if(saved, [&](const auto& s) { return s.second == name; });
    saved.emplace_back(iteration, name);
    std::stable_sort(saved.begin(), saved.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::string> removals;
    while (options.n_saved && saved.size() > *options.n_saved) {
      const auto victim = std::find_if(saved.begin(), saved.end(), [&](const auto& s) { return s.second != name; });
      removals.push_back(victim->second);
      saved.erase(victim);
    }
    return removals;
  }
};

Checkpoint::Checkpoint(std::filesystem::path dirname, std::vector<CheckpointItem> to_save, CheckpointOptions options)
    : impl_(std::make_unique<Impl>()) {
  const int world = get_world_size();
  if (to_save.empty()) throw ValueError("Checkpoint: to_save is empty; expected at least one object to checkpoint");
  for (std::size_t i = 0; i < to_save.size(); ++i) {
    check_name(to_save[i].name(), "an item's name");
    for (std::size_t j = 0; j < i; ++j)
      if (to_save[j].name() == to_save[i].name())
        throw ValueError(
            fmt::format("Checkpoint: two items are named '{}'; names should be unique", to_save[i].name()));
  }
  if (options.n_saved && *options.n_saved == 0)
    throw ValueError(
        "Checkpoint: n_saved should be a positive number, or std::nullopt to keep every file, but given 0");
  if (options.save_on_rank < 0 || options.save_on_rank >= world)
    throw ValueError(
        fmt::format("Checkpoint: save_on_rank should be in [0, {}], but given {}", world - 1, options.save_on_rank));
  if (!options.filename_prefix.empty()) check_name(options.filename_prefix, "filename_prefix");
  Impl& m = *impl_;
  m.items = std::move(to_save);
  m.options = std::move(options);
  m.base = checkpoint::base_name(m.options.filename_prefix, m.items.size() == 1 ? m.items[0].name() : "checkpoint");
  m.device = checkpoint::load_device(m.options.map_location);
  std::string status;  // the saving rank's: '+' and its absolute directory, or '-' and the error
  if (m.is_root()) {
    try {
      if (dirname.empty()) throw std::runtime_error("Directory path '' is not found");
      const std::filesystem::path dir = std::filesystem::absolute(dirname);
      const std::string error =
          checkpoint::prepare_directory(dir, m.options.create_dir, m.options.require_empty, m.base);
      status = error.empty() ? "+" + dir.string() : "-" + error;
    } catch (const std::exception& e) {
      status = std::string("-") + e.what();
    }
  }
  if (world > 1) status = broadcast(status, m.options.save_on_rank);
  if (status.front() == '-')
    throw ValueError(fmt::format("Checkpoint: {} (on rank {}, which saves)", status.substr(1), m.options.save_on_rank));
  m.dir = status.substr(1);
}

Checkpoint::~Checkpoint() {
  if (!impl_ || !impl_->is_root()) return;
  try {
    if (const std::string error = impl_->finish_write(); !error.empty())
      log_warning(kLogger, fmt::format("Checkpoint: {}", error));
  } catch (...) {  // a destructor reports, it does not throw
  }
}

void Checkpoint::save(const CheckpointState& state) {
  Impl& m = *impl_;
  for (const auto& [key, value] : state.values) {
    if (key.empty()) throw ValueError("Checkpoint::save: a user value has an empty name");
    if (const auto* t = std::get_if<torch::Tensor>(&value); t && !t->defined())
      throw ValueError(fmt::format("Checkpoint::save: user value '{}' is an undefined tensor", key));
  }
  const int world = get_world_size();
  const bool root = m.is_root();
  const std::string name = checkpoint::file_name(m.base, state.iteration);
  std::string error;  // this rank's, shared with every rank below
  if (root) error = m.finish_write();
  // Items whose save() runs everywhere (it may be collective): before the agreement.
  std::vector<at::Tensor> serialized(m.items.size());
  for (std::size_t i = 0; i < m.items.size(); ++i) {
    if (!checkpoint::saves_on_every_rank(m.items[i])) continue;
    try {
      torch::serialize::OutputArchive archive;
      checkpoint::save_on_this_rank(m.items[i], archive, m.options.save_on_rank);
      if (root) serialized[i] = checkpoint::serialize_to_tensor(archive);
    } catch (const std::exception& e) {
      if (error.empty()) error = fmt::format("item '{}' failed to save: {}", m.items[i].name(), e.what());
    }
  }
  // Every rank's error and generator state.
  std::vector<at::Tensor> rng_states;
  std::string failure;
  if (world == 1) {
    rng_states.push_back(checkpoint::cpu_generator_state());
    if (!error.empty()) failure = fmt::format("rank 0: {}", error);
  } else {
    const std::vector<std::byte> mine = encode(error, checkpoint::cpu_generator_state());
    const auto blobs = all_gather_object(mine);
    for (std::size_t r = 0; r < blobs.size(); ++r) {
      auto [e, rng] = decode(blobs[r]);
      rng_states.push_back(std::move(rng));
      if (!e.empty() && failure.empty()) failure = fmt::format("rank {}: {}", r, e);
    }
  }
  if (!failure.empty()) throw Error(fmt::format("Checkpoint::save of {}: {}", (m.dir / name).string(), failure));
  m.last = name;
  std::string written;  // without background_write: the saving rank's outcome, shared below
  if (root) {
    const std::vector<std::string> removals = m.retain(state.iteration, name);
    auto archive = std::make_shared<torch::serialize::OutputArchive>();
    try {
      m.pool.rewind();
      checkpoint::build_archive(*archive, m.items, serialized, state, world, rng_states, m.pool);
      checkpoint::BackgroundWriter::Job job = [archive, dir = m.dir, name, removals](checkpoint::Outcome& out) {
        const auto remove = [&](const std::string& old) {
          std::error_code ec;
          std::filesystem::remove(dir / old, ec);
          if (ec)
            out.warnings.push_back(
                fmt::format("cannot remove the old checkpoint {}: {}", (dir / old).string(), ec.message()));
        };
        for (std::size_t i = 0; i + 1 < removals.size(); ++i) remove(removals[i]);  // surplus (see retain)
        checkpoint::write_atomically(dir, name, [&archive](const checkpoint::Sink& sink) {
          archive->save_to([&sink](const void* data, std::size_t size) {
            sink(data, size);
            return size;
          });
        });
        if (!removals.empty()) remove(removals.back());
      };
      if (m.options.background_write)
        m.writer.start(std::move(job));
      else if (const auto outcome = checkpoint::run_now(job); !outcome.error.empty())
        written = fmt::format("writing {} failed: {}", (m.dir / name).string(), outcome.error);
      else
        log_warnings(outcome);
    } catch (const std::exception& e) {
      (m.options.background_write ? m.deferred_error : written) =
          fmt::format("preparing {} failed: {}", (m.dir / name).string(), e.what());
    }
  }
  if (m.options.background_write) return;
  if (world > 1) written = broadcast(written, m.options.save_on_rank);
  if (!written.empty())
    throw Error(fmt::format("Checkpoint::save: {} (on rank {}, which saves)", written, m.options.save_on_rank));
}

void Checkpoint::wait() {
  Impl& m = *impl_;
  std::string error = m.is_root() ? m.finish_write() : std::string();
  if (get_world_size() > 1) error = broadcast(error, m.options.save_on_rank);
  if (!error.empty())
    throw Error(fmt::format("Checkpoint::wait: {} (on rank {}, which saves)", error, m.options.save_on_rank));
}

std::optional<LoadedCheckpoint> Checkpoint::load_latest() {
  Impl& m = *impl_;
  const int rank = get_rank(), world = get_world_size(), root = m.options.save_on_rank;
  std::string status;  // the saving rank's: "0" none, "+<size> <name>", or "-<error>"
  std::string payload;
  std::optional<torch::serialize::InputArchive> archive;
  std::vector<std::pair<std::uint64_t, std::string>> found;
  std::size_t chosen = 0;
  if (m.is_root()) {
    if (std::string error = m.finish_write(); !error.empty()) m.deferred_error = std::move(error);
    try {
      found = checkpoint::list_checkpoints(m.dir, m.base);
      std::vector<std::string> reasons;
      for (chosen = 0; chosen < found.size() && !archive; ++chosen) {
        const std::filesystem::path path = m.dir / found[chosen].second;
        try {
          payload = checkpoint::read_verified(path);
          torch::serialize::InputArchive parsed;
          parsed.load_from(payload.data(), payload.size(), m.device);
          checkpoint::check_format(parsed);
          archive = std::move(parsed);
          break;
        } catch (const std::exception& e) {
          reasons.push_back(fmt::format("{}: {}", found[chosen].second, e.what()));
          log_warning(kLogger, fmt::format("Checkpoint: cannot load {} ({}); falling back to the previous checkpoint",
                                           path.string(), e.what()));
        }
      }
      if (archive)
        status = fmt::format("+{} {}", payload.size(), found[chosen].second);
      else if (found.empty())
        status = "0";
      else
        status = fmt::format("-none of the {} checkpoints of {} can be loaded: {}", found.size(), m.dir.string(),
                             fmt::join(reasons, "; "));
    } catch (const std::exception& e) {
      status = std::string("-") + e.what();
    }
  }
  if (world > 1) status = broadcast(status, root);
  if (status.front() == '-')
    throw ValueError(fmt::format("Checkpoint::load_latest: {} (on rank {}, which saves)", status.substr(1), root));
  if (status == "0") return std::nullopt;
  const std::size_t space = status.find(' ');
  const std::size_t size = std::stoull(status.substr(1, space - 1));
  const std::string name = status.substr(space + 1);
  if (world > 1) {
    if (!m.is_root()) payload.assign(size, '\0');
    for (std::size_t off = 0; off < size; off += kBroadcastChunk)
      broadcast(std::span<std::uint8_t>(reinterpret_cast<std::uint8_t*>(payload.data()) + off,
                                        std::min(kBroadcastChunk, size - off)),
                root);
  }
  if (!archive) {
    archive.emplace();
    archive->load_from(payload.data(), payload.size(), m.device);
  }
  LoadedCheckpoint loaded = checkpoint::apply_archive(*archive, m.items, m.dir / name, rank, m.options.map_location);
  m.last = name;
  if (m.is_root()) {  // n_saved counts the files of the run this one continues
    m.saved.clear();
    for (const auto& f : found)
      if (f.first <= loaded.iteration) m.saved.push_back(f);
    std::reverse(m.saved.begin(), m.saved.end());
  }
  return loaded;
}

std::optional<std::filesystem::path> Checkpoint::last_checkpoint() const {
  if (!impl_->last) return std::nullopt;
  return impl_->dir / *impl_->last;
}

const std::filesystem::path& Checkpoint::dirname() const noexcept { return impl_->dir; }

}  // namespace idist
