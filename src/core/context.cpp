// The current computation model and the configuration functions that dispatch to it.
#include "idist/context.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <climits>
#include <memory>

#include "core/debug/debug_backend.hpp"
#include "core/local_rank_hint.hpp"
#include "core/need_to_sync.hpp"
#include "core/registry.hpp"
#include "idist/error.hpp"
#include "idist/logging.hpp"
#include "launch/environment.hpp"
#include "launch/launcher_info.hpp"

namespace idist {

namespace {

// The front door over `backend`, decorated by the debug layer when `debug` asks for it.
std::unique_ptr<ComputationModel> model_of(std::unique_ptr<core::Backend> backend, const core::debug::Settings& debug) {
  return std::make_unique<ComputationModel>(core::debug::wrap(std::move(backend), debug));
}

std::unique_ptr<ComputationModel> serial_model() {
  return std::make_unique<ComputationModel>(core::serial().create(InitOptions{}));
}

struct ContextState {
  std::unique_ptr<ComputationModel> model = serial_model();
  bool serial = true;
  // ignite's _need_to_sync: while serial and not explicitly initialized, every query first looks for
  // a context created outside idist (e.g. the program's own MPI_Init) and adopts it.
  bool need_to_sync = true;
  // The current model wraps a context created outside idist (sync() checks that it still exists).
  bool adopted = false;
  // ignite's ComputationModel._ext_local_rank: set_local_rank() while serial keeps the hint for the
  // context adopted or initialized later; it lives as long as the process, as in ignite.
  std::optional<int> local_rank_hint;
};

ContextState& state() {
  static ContextState s;
  return s;
}

bool try_adopt() {
  for (const auto& entry : core::backends()) {
    if (!entry.adopt) continue;
    if (auto backend = entry.adopt()) {
      if (state().local_rank_hint) backend->set_local_rank(*state().local_rank_hint);
      state().model = model_of(std::move(backend), core::debug::read_settings(std::nullopt));
      state().serial = false;
      state().adopted = true;
      return true;
    }
  }
  return false;
}

// Whether the context an adopted `model` wraps still exists (e.g. MPI not finalized since).
bool adopted_context_exists(const ComputationModel& model) {
  for (const auto& entry : core::backends())
    if (entry.has_context && model.backend() == entry.name) return entry.has_context();
  return false;
}

std::string available_list() {
  const auto names = available_backends();
  return names.empty() ? "none (this build of idist has no distributed backend)"
                       : fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

namespace core {
std::optional<int> local_rank_hint() { return state().local_rank_hint; }
bool need_to_sync() { return state().need_to_sync; }
}  // namespace core

ComputationModel& current_model() {
  ContextState& s = state();
  if (s.serial && s.need_to_sync) try_adopt();
  return *s.model;
}

void initialize(std::string_view backend, const InitOptions& opts) {
  ContextState& s = state();
  if (!s.serial)
    throw ValueError(fmt::format("initialize: the {} backend is already initialized; call idist::finalize() first",
                                 s.model->backend().value_or("serial")));
  if (opts.timeout.count() <= 0)
    throw ValueError(fmt::format("initialize: timeout must be positive, got {} ms", opts.timeout.count()));
  const core::debug::Settings debug = core::debug::read_settings(opts.debug);  // ValueError before any rendezvous
  (void)log_level();  // a misspelt IDIST_LOG_LEVEL: ValueError here, not a warning later
  for (const auto& entry : core::backends()) {
    if (entry.name != backend) continue;
    s.model = model_of(entry.create(opts), debug);
    s.serial = false;
    s.adopted = false;
    s.need_to_sync = false;
    return;
  }
  throw ValueError(fmt::format("initialize: backend should be one of the available backends ({}), but given '{}'",
                               available_list(), backend));
}

void finalize() {
  ContextState& s = state();
  if (s.serial) return;
  std::unique_ptr<ComputationModel> model = std::move(s.model);
  s.model = serial_model();
  s.serial = true;
  s.adopted = false;
  s.need_to_sync = true;
  model->finalize();
}

void sync(bool temporary) {
  ContextState& s = state();
  if (!s.serial && s.adopted && !adopted_context_exists(*s.model)) {
    // The program tore the context down: back to serial. The model's finalize() makes no call on a
    // finalized MPI; the per-query lookup keeps its state, as in ignite.
    std::unique_ptr<ComputationModel> gone = std::move(s.model);
    s.model = serial_model();
    s.serial = true;
    s.adopted = false;
    gone->finalize();
    return;
  }
  if (s.serial && !try_adopt()) return;
  s.need_to_sync = temporary;  // ignite's _set_model(model, temporary)
}

std::optional<std::string> backend() { return current_model().backend(); }
std::string model_name() { return current_model().model_name(); }

std::vector<std::string> available_backends() {
  std::vector<std::string> names;
  for (const auto& entry : core::backends()) names.emplace_back(entry.name);
  return names;
}

int get_rank() { return current_model().rank(); }
int get_local_rank() { return current_model().local_rank(); }
int get_world_size() { return current_model().world_size(); }
int get_nproc_per_node() { return current_model().nproc_per_node(); }
int get_node_rank() { return current_model().node_rank(); }
int get_nnodes() { return current_model().nnodes(); }
Device device() { return current_model().device(); }

std::string hostname() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

void set_local_rank(int local_rank) {
  if (local_rank < 0) throw ValueError(fmt::format("set_local_rank: local_rank must be >= 0, got {}", local_rank));
  state().local_rank_hint = local_rank;
  current_model().set_local_rank(local_rank);  // the serial model ignores it; a live context takes it now
}

std::vector<ComputationModelInfo> registered_computation_models() {
  std::vector<ComputationModelInfo> models{{"serial", {}}};
  if (has_native_dist_support()) models.push_back({"native-dist", available_backends()});
  return models;
}

bool has_native_dist_support() { return !core::backends().empty(); }
bool has_xla_support() { return false; }
bool has_hvd_support() { return false; }

void show_config() {
  ComputationModel& m = current_model();
  const auto line = [](std::string_view key, const auto& value) {
    log_info("distributed", fmt::format("{}: {}", key, value));
  };
  line("distributed configuration", m.model_name());
  line("backend", m.backend().value_or("None"));
  line("device", m.device().str());
  line("hostname", hostname());
  line("world size", m.world_size());
  line("rank", m.rank());
  line("local rank", m.local_rank());
  line("num processes per_node", m.nproc_per_node());
  line("num nodes", m.nnodes());
  line("node rank", m.node_rank());
  if (const auto where = m.network_interface()) line("network interface", *where);
  const auto backend = m.backend();
  line("launcher", launch::describe_launcher(launch::snapshot(), backend == "gloo" || backend == "nccl"));
}

}  // namespace idist
