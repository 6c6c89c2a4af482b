#pragma once
/// @file
/// idist::Checkpoint: ignite.handlers.Checkpoint with its DiskSaver, for LibTorch training state.
///
/// One file per save, `DIR/{filename_prefix}_{name}_{iteration}.pt` (ignite's default pattern; no
/// prefix: `{name}_{iteration}.pt`; `name` is the item's name when there is one item, else
/// "checkpoint"), holding the registered items (modules, optimizers, data loaders, objects that save
/// themselves), epoch and iteration, every rank's default CPU generator state and user values:
///
///     idist::Checkpoint checkpoint(dir, {{"model", model}, {"optimizer", optimizer}, {"loader", loader}},
///                                  {.n_saved = 2, .require_empty = false});
///     std::uint64_t epoch = 0, iteration = 0;
///     if (auto loaded = checkpoint.load_latest()) epoch = loaded->epoch, iteration = loaded->iteration;
///     ...  // in the training loop, on every rank:
///     checkpoint.save({.epoch = epoch, .iteration = iteration, .values = {{"best", best}}});
///
/// Every call is collective: every rank calls it, in the same order (an item's own save may need
/// its peers, e.g. a sharded optimizer consolidating its state). The saving rank (save_on_rank, 0 by
/// default) alone touches the directory; other ranks need not see it (another node's file system)
/// and may pass any path. A failure that only the saving rank sees reaches every rank as the same
/// exception.
///
/// The file: a 32-byte header (magic, format version, payload length, CRC-32 of the payload) and a
/// LibTorch archive. It is written atomically: a temporary file in DIR, fsync of the file, rename,
/// fsync of DIR; a crash at any point leaves the previous checkpoints intact, and the newest one
/// that is truncated or corrupt anyway is skipped by load_latest() with a warning.
///
/// Across world sizes: model, optimizer and user values do not depend on the world size. A loader's
/// position is kept in samples of all ranks together; at the same world size the resumed epoch
/// continues exactly where it stood; at R ranks it continues floor(consumed / R) * R samples in, so up
/// to R - 1 samples are seen again. Rank r restores the generator state rank r saved; ranks the
/// saving run did not have keep their own.
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include "idist/error.hpp"
#include "idist/torch/auto_dataloader.hpp"

namespace idist {

/// One user value of a checkpoint: an integer, a double, a string or a tensor (saved as a copy taken
/// by save(); loaded as CheckpointOptions::map_location says).
using CheckpointValue = std::variant<std::int64_t, double, std::string, torch::Tensor>;

/// User values by name (any string).
using CheckpointValues = std::map<std::string, CheckpointValue>;

/// What a training loop saves beside its items (ignite keeps epoch and iteration in the trainer's
/// state; here the loop passes them).
struct CheckpointState {
  std::uint64_t epoch = 0;      ///< the epoch, counted as the program counts it
  std::uint64_t iteration = 0;  ///< the global step; it names the file (ignite's global_step)
  CheckpointValues values{};    ///< anything else the loop needs to resume
};

/// What Checkpoint::load_latest() restored.
struct LoadedCheckpoint {
  std::filesystem::path path;   ///< the file, as the saving rank names it
  std::uint64_t epoch = 0;      ///< CheckpointState::epoch of the save
  std::uint64_t iteration = 0;  ///< CheckpointState::iteration of the save
  int world_size = 1;           ///< ranks of the run that saved it
  CheckpointValues values;      ///< the saved user values

  /// The user value `key` as a T (std::int64_t, double, std::string or torch::Tensor).
  /// @throws ValueError naming the key when it is missing or holds another type.
  template <class T>
  const T& value(const std::string& key) const {
    const auto it = values.find(key);
    if (it == values.end())
      throw ValueError(detail::format_message("checkpoint {}: no user value '{}'", path.string(), key));
    if (const T* v = std::get_if<T>(&it->second)) return *v;
    throw ValueError(detail::format_message("checkpoint {}: user value '{}' holds another type", path.string(), key));
  }
};

/// An object that saves itself into a checkpoint: the extension point for state that is not a
/// module, an optimizer or a loader (an LR scheduler, a stream dataset's position). A
/// ZeroRedundancyOptimizer is an optimizer item, not one of these.
///
/// save() runs on every rank, in the items' order, during Checkpoint::save (it may call collectives);
/// only the saving rank's archive is written, serialized before Checkpoint::save returns, so an
/// object whose state is spread over the ranks gathers it on save_on_rank (which save() is not told:
/// the object is built knowing it). load() runs on every rank with that archive. Tensors read in
/// load() are on the checkpoint's map_location (the host without one): load() moves them where the
/// object keeps them.
class Checkpointable {
 public:
  virtual ~Checkpointable() = default;
  /// Writes this object's state (every rank; collectives allowed).
  virtual void save(torch::serialize::OutputArchive& archive) = 0;
  /// Restores what save() wrote on the saving rank (every rank).
  virtual void load(torch::serialize::InputArchive& archive) = 0;
};

namespace detail {
/// A data loader as a checkpoint item: its shared progress and its sampler.
struct LoaderItem {
  std::shared_ptr<LoaderProgress> progress;  ///< the loader's DataLoader::progress()
  std::shared_ptr<EpochSampler> sampler;     ///< its sampler (set to the saved epoch by a load)
};
/// An object that saves itself, as two callables (see Checkpointable).
struct CustomItem {
  std::function<void(torch::serialize::OutputArchive&)> save;  ///< Checkpointable::save
  std::function<void(torch::serialize::InputArchive&)> load;   ///< Checkpointable::load
};
}  // namespace detail

/// One named object of a checkpoint (an entry of ignite's `to_save`). Built implicitly from
/// `{"name", object}`, the object given by holder or by reference:
///
///     auto model = std::make_shared<Net>();                              // a holder: shared
///     torch::optim::SGD optimizer(model->parameters(), 0.1);             // on the stack: referred to
///     idist::Checkpoint checkpoint(dir, {{"model", model}, {"optimizer", optimizer}});
///
/// Given by holder (std::shared_ptr, a LibTorch module holder), modules, optimizers and
/// Checkpointables are shared by the checkpoint; given by reference, they are not owned and must
/// outlive it. A loader's position state and sampler are always shared.
class CheckpointItem {
 public:
  /// What the item refers to.
  using Target = std::variant<std::shared_ptr<torch::nn::Module>, std::shared_ptr<torch::optim::Optimizer>,
                              detail::LoaderItem, detail::CustomItem>;

  /// A module (auto_model's result included): every parameter and buffer, by its dotted name
  /// (named_parameters() / named_buffers()), loaded by copy into the existing tensors.
  template <std::derived_from<torch::nn::Module> M>
  CheckpointItem(std::string name, std::shared_ptr<M> module)  // NOLINT(google-explicit-constructor)
      : CheckpointItem(std::move(name), Target(std::shared_ptr<torch::nn::Module>(std::move(module)))) {}
  /// A module by reference (not owned: it must outlive the checkpoint).
  template <std::derived_from<torch::nn::Module> M>
  requires(!std::is_const_v<M>) CheckpointItem(std::string name, M& module)  // NOLINT(google-explicit-constructor)
      : CheckpointItem(std::move(name), Target(unowned<torch::nn::Module>(module))) {}
  /// A module held by a LibTorch module holder (torch::nn::Linear, ...).
  template <class M>
  CheckpointItem(std::string name, const torch::nn::ModuleHolder<M>& module)  // NOLINT
      : CheckpointItem(std::move(name), module.ptr()) {}
  /// An optimizer: its Optimizer::save / load state (SGD momentum buffers, Adam moments and steps,
  /// the options of each parameter group). LibTorch's own optimizers are copied in memory and
  /// serialized off the training thread; any other optimizer's save() runs on every rank and is
  /// serialized before Checkpoint::save returns. A ZeroRedundancyOptimizer gathers its shards on
  /// the saving rank there (save(archive, group rank of save_on_rank); save_on_rank must be a
  /// member of its group, else save raises on every rank), so the file holds the whole state in a
  /// plain optimizer's layout: it loads into ZeRO at any world size (each rank takes its shard) or
  /// into a plain optimizer of the local optimizer's kind.
  template <std::derived_from<torch::optim::Optimizer> O>
  CheckpointItem(std::string name, std::shared_ptr<O> optimizer)  // NOLINT(google-explicit-constructor)
      : CheckpointItem(std::move(name), Target(std::shared_ptr<torch::optim::Optimizer>(std::move(optimizer)))) {}
  /// An optimizer by reference, e.g. one built on the stack (not owned: it must outlive the
  /// checkpoint); saved and loaded as by holder.
  template <std::derived_from<torch::optim::Optimizer> O>
  requires(!std::is_const_v<O>) CheckpointItem(std::string name, O& optimizer)  // NOLINT(google-explicit-constructor)
      : CheckpointItem(std::move(name), Target(unowned<torch::optim::Optimizer>(optimizer))) {}
  /// An auto_dataloader loader: its epoch, the samples its batches handed out in it, and the
  /// generator state its epoch was drawn with, so that a resumed run continues that epoch mid-way
  /// (see DataLoader::set_epoch). Save after the step of the last batch read.
  template <class Dataset>
  CheckpointItem(std::string name, const DataLoader<Dataset>& loader)  // NOLINT(google-explicit-constructor)
      : CheckpointItem(std::move(name), Target(detail::LoaderItem{loader.progress(), loader.sampler_ptr()})) {}
  /// An object that saves itself (shared).
  CheckpointItem(std::string name, std::shared_ptr<Checkpointable> object);
  /// An object that saves itself, by reference (not owned: it must outlive the checkpoint).
  CheckpointItem(std::string name, Checkpointable& object);
  /// An object that saves itself through two callables (see Checkpointable for when they run).
  CheckpointItem(std::string name, std::function<void(torch::serialize::OutputArchive&)> save,
                 std::function<void(torch::serialize::InputArchive&)> load);
  /// Any target. A template taking exactly Target, so that converting other objects to the
  /// variant is never tried (LibTorch's module holders would fail hard inside that check).
  template <class T>
  requires std::same_as<std::remove_cvref_t<T>, Target> CheckpointItem(
      std::string name, T&& target)  // NOLINT(google-explicit-constructor)
      : CheckpointItem(TargetTag{}, std::move(name), Target(std::forward<T>(target))) {}

  /// The item's name (a key of ignite's to_save).
  const std::string& name() const noexcept { return name_; }
  /// What it refers to.
  const Target& target() const noexcept { return target_; }

 private:
  struct TargetTag {};
  CheckpointItem(TargetTag, std::string name, Target target);
  // A pointer that does not own `object` (the aliasing constructor over an empty owner).
  template <class Base, class T>
  static std::shared_ptr<Base> unowned(T& object) {
    return std::shared_ptr<Base>(std::shared_ptr<void>(), static_cast<Base*>(&object));
  }
  std::string name_;
  Target target_;
};

/// Options of Checkpoint: ignite's Checkpoint and DiskSaver arguments that apply, and where the
/// write happens.
struct CheckpointOptions {
  /// Prefix of the file names (ignite's filename_prefix): `{prefix}_{name}_{iteration}.pt`.
  std::string filename_prefix{};
  /// Checkpoints kept (ignite's n_saved, default 1): after a save is on disk, the oldest ones this
  /// Checkpoint wrote (or found when it loaded) beyond n_saved are deleted. nullopt keeps all.
  std::optional<std::size_t> n_saved = 1;
  /// Create the directory (and its parents) when missing (ignite's DiskSaver create_dir).
  bool create_dir = true;
  /// Refuse a directory that already holds `.pt` files (ignite's DiskSaver require_empty); set it to
  /// false to resume from, or keep adding to, an existing directory.
  bool require_empty = true;
  /// The rank that writes and reads the files (ignite's save_on_rank).
  int save_on_rank = 0;
  /// Serialize, checksum, write, fsync and rename on a background thread: save() returns once the
  /// state is copied in memory. At most one save is in flight; the next save(), wait(), load_latest()
  /// and the destructor wait for it. false: save() returns when the file is on disk.
  bool background_write = true;
  /// torch.load's map_location: the device every loaded tensor is moved to first, so that a
  /// checkpoint saved on GPUs loads on a CPU-only host and back. Whatever it is, each item then
  /// takes its tensors where it keeps them, as PyTorch's load_state_dict does: a module copies them
  /// into its own parameters and buffers (their device and dtype), an optimizer's state goes to its
  /// parameter's device, floating state in the parameter's dtype (LibTorch's SGD, Adam, AdamW,
  /// Adagrad, RMSprop, LBFGS and ZeroRedundancyOptimizer's local optimizer; step counts stay
  /// integers). What stays where it is loaded: user tensor values, and the tensors a Checkpointable
  /// reads. Unset (the default): the host, except user tensors saved from an accelerator, which go
  /// to this rank's idist::device().
  std::optional<torch::Device> map_location{};
};

/// Saves and restores training state: ignite.handlers.Checkpoint with a DiskSaver (see the file's
/// comment for the format, atomicity and world sizes). Every member function is collective.
class Checkpoint {
 public:
  /// Checks the options on every rank and the directory on the saving rank (created with
  /// create_dir; with require_empty, it must hold no `.pt` file); removes temporary files a crashed
  /// save left there.
  /// @throws ValueError on every rank for no item, an empty or duplicate item name, n_saved 0,
  ///         save_on_rank outside [0, world size), a prefix with '/', a missing directory (without
  ///         create_dir) or one that cannot be created, or `.pt` files with require_empty.
  Checkpoint(std::filesystem::path dirname, std::vector<CheckpointItem> to_save, CheckpointOptions options = {});
  /// Waits for a save in flight (a failure is then only logged: call wait() to see it as an error).
  ~Checkpoint();
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;

  /// Saves the items with `state` as `{prefix}_{name}_{state.iteration}.pt` (a file of that name is
  /// replaced), then applies n_saved. Returns once the state is copied (background_write) or written.
  /// @throws ValueError for an empty user value name or an undefined tensor value; Error naming the
  ///         file and the rank, on every rank, when the previous save failed to reach the disk or an
  ///         item's save threw.
  void save(const CheckpointState& state);
  /// Waits until the last save is on disk (renamed and its directory synced).
  /// @throws Error on every rank when it could not be written (disk full, directory removed, ...).
  void wait();
  /// Restores the items from the newest checkpoint of the directory (the largest iteration whose
  /// file is intact; a truncated or corrupt one is skipped with a warning). The saving rank reads
  /// the file and broadcasts it. Returns nothing when the directory holds no checkpoint.
  /// @throws ValueError on every rank when checkpoints exist but none is readable, or one does not
  ///         fit the items (a missing or extra item, parameter, or a shape that differs).
  std::optional<LoadedCheckpoint> load_latest();
  /// The file of the last save, as the saving rank names it (ignite's last_checkpoint).
  std::optional<std::filesystem::path> last_checkpoint() const;
  /// The directory, as the saving rank names it.
  const std::filesystem::path& dirname() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace idist
