#include "torch/checkpoint/archive.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/DeviceType.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/utils.h>

#include "idist/context.hpp"
#include "idist/torch/dtype.hpp"
#include "torch/checkpoint/optimizer_state.hpp"
#include "torch/checkpoint/sharded_optimizer.hpp"

namespace idist::checkpoint {
namespace {

constexpr std::int64_t kFormat = 1;

std::string item_key(std::size_t i) { return fmt::format("item{}", i); }
std::string bytes_key(std::size_t i) { return fmt::format("item{}_bytes", i); }

c10::IValue read_value(torch::serialize::InputArchive& archive, const std::string& key) {
  c10::IValue v;
  archive.read(key, v);
  return v;
}

void write_module(const torch::nn::Module& module, torch::serialize::OutputArchive& out, SnapshotPool& pool) {
  c10::Dict<std::string, at::Tensor> parameters, buffers;
  for (const auto& p : module.named_parameters(/*recurse=*/true))
    if (p.value().defined()) parameters.insert(p.key(), pool.copy(p.value()));
  for (const auto& b : module.named_buffers(/*recurse=*/true))
    if (b.value().defined()) buffers.insert(b.key(), pool.copy(b.value()));
  out.write("parameters", c10::IValue(parameters));
  out.write("buffers", c10::IValue(buffers));
}

void write_loader(const detail::LoaderProgress& p, torch::serialize::OutputArchive& out) {
  std::uint64_t local = p.consumed;
  if (p.epoch_size) local = std::min<std::uint64_t>(local, *p.epoch_size);
  out.write("epoch", c10::IValue(std::int64_t(p.epoch)));
  out.write("consumed_samples", c10::IValue(std::int64_t(local * std::uint64_t(p.replicas))));
  out.write("replicas", c10::IValue(std::int64_t(p.replicas)));
  if (p.epoch_rng.defined()) out.write("epoch_rng", c10::IValue(p.epoch_rng.clone()));
}

void write_values(const CheckpointValues& values, torch::serialize::OutputArchive& out, SnapshotPool& pool) {
  c10::Dict<std::string, std::int64_t> ints;
  c10::Dict<std::string, double> doubles;
  c10::Dict<std::string, std::string> strings;
  c10::Dict<std::string, at::Tensor> tensors;
  c10::Dict<std::string, std::string> devices;  // the device type each tensor was saved from
  for (const auto& [key, value] : values) {
    if (const auto* i = std::get_if<std::int64_t>(&value)) ints.insert(key, *i);
    if (const auto* d = std::get_if<double>(&value)) doubles.insert(key, *d);
    if (const auto* s = std::get_if<std::string>(&value)) strings.insert(key, *s);
    if (const auto* t = std::get_if<torch::Tensor>(&value)) {
      tensors.insert(key, pool.copy(*t));
      devices.insert(key, c10::DeviceTypeName(t->device().type(), /*lower_case=*/true));
    }
  }
  out.write("values_int", c10::IValue(ints));
  out.write("values_double", c10::IValue(doubles));
  out.write("values_string", c10::IValue(strings));
  out.write("values_tensor", c10::IValue(tensors));
  out.write("values_tensor_device", c10::IValue(devices));
}

// The user values; tensors on `map_location` when given, else back on the host when saved from it
// and on this rank's device when saved from an accelerator (files without the record: the host).
CheckpointValues read_values(torch::serialize::InputArchive& archive,
                             const std::optional<torch::Device>& map_location) {
  CheckpointValues values;
  for (const auto& e : read_value(archive, "values_int").toGenericDict())
    values.emplace(e.key().toStringRef(), e.value().toInt());
  for (const auto& e : read_value(archive, "values_double").toGenericDict())
    values.emplace(e.key().toStringRef(), e.value().toDouble());
  for (const auto& e : read_value(archive, "values_string").toGenericDict())
    values.emplace(e.key().toStringRef(), e.value().toStringRef());
  std::map<std::string, std::string> saved_on;
  c10::IValue devices;
  if (archive.try_read("values_tensor_device", devices) && devices.isGenericDict())
    for (const auto& e : devices.toGenericDict()) saved_on.emplace(e.key().toStringRef(), e.value().toStringRef());
  const torch::Device here = to_torch_device(idist::device());
  for (const auto& e : read_value(archive, "values_tensor").toGenericDict()) {
    at::Tensor t = e.value().toTensor();
    const auto it = saved_on.find(e.key().toStringRef());
    if (!map_location && it != saved_on.end() && it->second != "cpu") t = t.to(here);
    values.emplace(e.key().toStringRef(), t);
  }
  return values;
}

std::string shape_of(const at::Tensor& t) {
  return fmt::format("{} [{}]", c10::toString(t.scalar_type()), fmt::join(t.sizes(), ", "));
}

// Up to a few names of a list, for messages.
std::string some(const std::vector<std::string>& names) {
  constexpr std::size_t kShown = 8;
  std::vector<std::string> shown(names.begin(), names.begin() + std::ptrdiff_t(std::min(names.size(), kShown)));
  return fmt::format("{}{}", fmt::join(shown, ", "),
                     names.size() > kShown ? fmt::format(" and {} more", names.size() - kShown) : "");
}

// Copies one dictionary of the file into the module's tensors of that kind, after checking them all.
void load_tensors(const c10::Dict<c10::IValue, c10::IValue>& saved,
                  const torch::OrderedDict<std::string, at::Tensor>& mine, const char* kind, const std::string& where) {
  std::vector<std::string> missing, unexpected, mismatched;
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;  // destination, source
  std::map<std::string, at::Tensor> from_file;
  for (const auto& e : saved) from_file.emplace(e.key().toStringRef(), e.value().toTensor());
  for (const auto& m : mine) {
    if (!m.value().defined()) continue;
    const auto it = from_file.find(m.key());
    if (it == from_file.end()) {
      missing.push_back(m.key());
      continue;
    }
    // PyTorch's load_state_dict: the shapes must agree; copy_ converts the dtype and the device.
    if (it->second.sizes() != m.value().sizes())
      mismatched.push_back(
          fmt::format("'{}' is {} in the file, {} in the module", m.key(), shape_of(it->second), shape_of(m.value())));
    else
      copies.emplace_back(m.value(), it->second);
    from_file.erase(it);
  }
  for (const auto& [name, t] : from_file) unexpected.push_back(name);
  if (!missing.empty())
    throw ValueError(fmt::format("{}: the module's {} {} are not in the file", where, kind, some(missing)));
  if (!unexpected.empty())
    throw ValueError(fmt::format("{}: the file's {} {} are not in the module", where, kind, some(unexpected)));
  if (!mismatched.empty())
    throw ValueError(fmt::format("{}: {} {} differ: {}", where, kind, mismatched.size(), some(mismatched)));
  torch::NoGradGuard no_grad;
  for (auto& [dst, src] : copies) dst.copy_(src);
}

void load_module(torch::nn::Module& module, torch::serialize::InputArchive& in, const std::string& where) {
  const c10::IValue parameters = read_value(in, "parameters"), buffers = read_value(in, "buffers");
  // Both kinds are checked before either is copied.
  const auto mine_p = module.named_parameters(true), mine_b = module.named_buffers(true);
  load_tensors(parameters.toGenericDict(), mine_p, "parameters", where);
  load_tensors(buffers.toGenericDict(), mine_b, "buffers", where);
}

// An item stored as bytes, as an archive on `device`.
void open_bytes(torch::serialize::InputArchive& archive, std::size_t i, torch::serialize::InputArchive& nested,
                const torch::Device& device) {
  const at::Tensor bytes = read_value(archive, bytes_key(i)).toTensor().to(at::kCPU).contiguous();
  nested.load_from(reinterpret_cast<const char*>(bytes.data_ptr<std::uint8_t>()), std::size_t(bytes.numel()), device);
}

}  // namespace

torch::Device load_device(const std::optional<torch::Device>& map_location) {
  return map_location.value_or(torch::Device(torch::kCPU));
}

at::Tensor cpu_generator_state() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_cpu_generator_state(const at::Tensor& state) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

bool saves_on_every_rank(const CheckpointItem& item) {
  if (std::holds_alternative<detail::CustomItem>(item.target())) return true;
  if (const auto* o = std::get_if<std::shared_ptr<torch::optim::Optimizer>>(&item.target()))
    return !is_builtin_optimizer(**o);
  return false;
}

void save_on_this_rank(const CheckpointItem& item, torch::serialize::OutputArchive& archive, int saving_rank) {
  if (const auto* c = std::get_if<detail::CustomItem>(&item.target())) return c->save(archive);
  save_optimizer_for(*std::get<std::shared_ptr<torch::optim::Optimizer>>(item.target()), archive, saving_rank);
}

void build_archive(torch::serialize::OutputArchive& out, const std::vector<CheckpointItem>& items,
                   const std::vector<at::Tensor>& serialized, const CheckpointState& state, int world_size,
                   const std::vector<at::Tensor>& rng_states, SnapshotPool& pool) {
  out.write("idist_checkpoint", c10::IValue(kFormat));
  out.write("epoch", c10::IValue(std::int64_t(state.epoch)));
  out.write("iteration", c10::IValue(std::int64_t(state.iteration)));
  out.write("world_size", c10::IValue(std::int64_t(world_size)));
  out.write("rng_states", c10::IValue(c10::List<at::Tensor>(rng_states)));
  write_values(state.values, out, pool);
  c10::List<std::string> names;
  for (std::size_t i = 0; i < items.size(); ++i) {
    names.push_back(items[i].name());
    if (serialized[i].defined()) {
      out.write(bytes_key(i), c10::IValue(serialized[i]));
      continue;
    }
    torch::serialize::OutputArchive nested;
    if (const auto* m = std::get_if<std::shared_ptr<torch::nn::Module>>(&items[i].target()))
      write_module(**m, nested, pool);
    if (const auto* o = std::get_if<std::shared_ptr<torch::optim::Optimizer>>(&items[i].target()))
      save_optimizer_copy(**o, nested, pool);
    if (const auto* l = std::get_if<detail::LoaderItem>(&items[i].target())) write_loader(*l->progress, nested);
    out.write(item_key(i), nested);
  }
  out.write("item_names", c10::IValue(names));
}

void check_format(torch::serialize::InputArchive& archive) {
  c10::IValue v;
  if (!archive.try_read("idist_checkpoint", v) || !v.isInt())
    throw std::runtime_error("not an idist checkpoint archive");
  if (v.toInt() != kFormat)
    throw std::runtime_error(fmt::format("archive format {}, this idist reads {}", v.toInt(), kFormat));
}

LoadedCheckpoint apply_archive(torch::serialize::InputArchive& archive, const std::vector<CheckpointItem>& items,
                               const std::filesystem::path& path, int rank,
                               const std::optional<torch::Device>& map_location) {
  LoadedCheckpoint out;
  out.path = path;
  out.epoch = std::uint64_t(read_value(archive, "epoch").toInt());
  out.iteration = std::uint64_t(read_value(archive, "iteration").toInt());
  out.world_size = int(read_value(archive, "world_size").toInt());
  out.values = read_values(archive, map_location);
  std::map<std::string, std::size_t> stored;
  const c10::List<c10::IValue> names = read_value(archive, "item_names").toList();
  for (std::size_t i = 0; i < names.size(); ++i) stored.emplace(names.get(i).toStringRef(), i);
  std::vector<std::string> absent;
  for (const auto& item : items)
    if (!stored.count(item.name())) absent.push_back(item.name());
  if (!absent.empty()) {
    std::vector<std::string> have;
    for (const auto& [name, i] : stored) have.push_back(name);
    throw ValueError(fmt::format("checkpoint {}: no item {} (it holds {})", path.string(), some(absent), some(have)));
  }
  for (const auto& item : items) {
    const std::size_t i = stored.at(item.name());
    const std::string where = fmt::format("checkpoint {}: item '{}'", path.string(), item.name());
    torch::serialize::InputArchive nested;
    if (!archive.try_read(item_key(i), nested)) open_bytes(archive, i, nested, load_device(map_location));
    if (const auto* m = std::get_if<std::shared_ptr<torch::nn::Module>>(&item.target()))
      load_module(**m, nested, where);
    if (const auto* o = std::get_if<std::shared_ptr<torch::optim::Optimizer>>(&item.target())) {
      try {
        (*o)->load(nested);
        place_state_on_parameters(**o);  // PyTorch's load_state_dict: the state follows its parameter
      } catch (const c10::Error& e) {
        throw ValueError(fmt::format("{}: the optimizer cannot load it: {}", where, e.what_without_backtrace()));
      }
    }
    if (const auto* l = std::get_if<detail::LoaderItem>(&item.target())) {
      detail::LoaderProgress& p = *l->progress;
      c10::IValue rng_value;
      at::Tensor rng;
      if (nested.try_read("epoch_rng", rng_value) && rng_value.isTensor()) rng = rng_value.toTensor().to(at::kCPU);
      const auto epoch = std::uint64_t(read_value(nested, "epoch").toInt());
      if (l->sampler) l->sampler->set_epoch(epoch);
      p.pending = detail::LoaderProgress::Resume{
          epoch, std::uint64_t(read_value(nested, "consumed_samples").toInt()) / std::uint64_t(p.replicas), rng};
    }
    if (const auto* c = std::get_if<detail::CustomItem>(&item.target())) c->load(nested);
  }
  const std::vector<at::Tensor> rng_states = read_value(archive, "rng_states").toTensorVector();
  if (rank < int(rng_states.size())) set_cpu_generator_state(rng_states[std::size_t(rank)].to(at::kCPU));
  return out;
}

}  // namespace idist::checkpoint
