// GlooBackend: rendezvous, communicators, barriers and teardown.
#include "gloo/gloo_backend.hpp"

#include <gloo/barrier.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backend_kit/cuda_probe.hpp"
#include "core/backend_factories.hpp"
#include "gloo/gloo_store.hpp"
#include "gloo/issue.hpp"
#include "gloo/peer_diagnosis.hpp"
#include "gloo/tcp_device.hpp"
#include "idist/error.hpp"
#include "launch/settings.hpp"
#include "store/prefix_store.hpp"
#include "store/store_monitored_barrier.hpp"
#include "store/store_progress_board.hpp"

namespace idist::gloo_backend {

namespace {

using rendezvous::describe_rank;

}  // namespace

GlooBackend::GlooBackend(const InitOptions& opts) : Backend(opts.timeout) {
  rendezvous::WorldInfo info = rendezvous::discover(opts);
  set_layout(info.layout());  // provisional until exchange_topology()
  all_reduce_algorithm_ = launch::gloo_allreduce();
  env_ = rendezvous::EnvOverride(info);
  try {
    store_ = rendezvous::open_store(opts, info);
    if (!info.topology_exact || !info.local_rank_known) rendezvous::exchange_topology(*store_, info, timeout());
    set_layout(info.layout());
    interface_ = rendezvous::select_interface(info.master_addr, info.nnodes);
    peers_ = rendezvous::exchange_peers(*store_, info.rank, info.world_size, {idist::hostname(), interface_.address},
                                        timeout());
    if (const auto why = rendezvous::unreachable_addresses(peers_, "GLOO_SOCKET_IFNAME"))
      throw BackendError(fmt::format("gloo: rank {} cannot form the world: {}", info.rank, *why));
    device_ = make_tcp_device(interface_, loop_scheduling_from_env(info.nnodes, allowed_cpus()));
    if (const auto settings = PeerWatch::from_env()) watch_ = std::make_unique<PeerWatch>(*settings);
    std::vector<int> all(std::size_t(info.world_size));
    for (int r = 0; r < info.world_size; ++r) all[std::size_t(r)] = r;
    auto world = std::make_shared<GlooGroup>(std::move(all), rank(), world_size(), id());
    connect(*world, "idist/gloo/world");
    set_world_group(world);
    groups_.push_back(std::move(world));
    p2p_lane_ = std::make_unique<OpLane>("point-to-point");
  } catch (...) {
    teardown(false);
    throw;
  }
}

GlooBackend::~GlooBackend() {
  if (!torn_down_) teardown(false);
}

Device GlooBackend::device() const {
  return backend_kit::cuda_device_count() > 0 ? Device{DeviceType::CUDA, local_rank()} : Device{};
}

void GlooBackend::set_local_rank(int local_rank) { set_layout_local_rank(local_rank); }

void GlooBackend::connect(GlooGroup& group, const std::string& prefix) {
  auto context = std::make_shared<gloo::rendezvous::Context>(group.rank(), group.size());
  context->setTimeout(timeout());
  const std::string what = fmt::format(
      "gloo: rank {} could not connect the communicator of group {} ({} ranks) through {} within {} ms: ", rank(),
      group.name(), group.size(), store_->describe(), timeout().count());
  try {
    store::PrefixStore prefixed(prefix, store_);
    GlooStore for_gloo(prefixed);
    context->connectFullMesh(for_gloo, device_);
  } catch (const TimeoutError& e) {
    throw TimeoutError(fmt::format("{}{}", what, e.what()));
  } catch (const ValueError&) {
    throw;
  } catch (const std::exception& e) {
    const bool timed_out = std::strstr(e.what(), "imed out") || std::strstr(e.what(), "imeout");
    if (timed_out) throw TimeoutError(fmt::format("{}{}", what, e.what()));
    throw BackendError(fmt::format("{}{}", what, e.what()));
  }
  const std::string& my_address = peers_.at(std::size_t(rank())).address;
  group.spans_hosts = std::any_of(group.ranks().begin(), group.ranks().end(),
                                  [&](int r) { return peers_.at(std::size_t(r)).address != my_address; });
  group.context = std::move(context);
  group.lane = std::make_unique<OpLane>(group.name());
  watch(group);
}

void GlooBackend::watch(GlooGroup& group) {
  if (!watch_) return;
  const int self = group.rank();
  const std::string& my_address = peers_.at(std::size_t(rank())).address;
  group.sockets.assign(group.ranks().size(), std::nullopt);
  std::vector<PeerWatch::Host>& hosts = group.watched.hosts;
  for (int pos = 0; pos < group.size(); ++pos) {
    const int r = group.ranks()[std::size_t(pos)];
    const std::string& address = peers_.at(std::size_t(r)).address;
    if (pos == self || address == my_address || rendezvous::is_loopback_address(address)) continue;
    auto& pair = group.context->getPair(pos);
    if (!pair) continue;
    auto& socket = group.sockets[std::size_t(pos)];
    socket = find_pair_socket(*pair);
    if (!socket) continue;
    auto host = std::find_if(hosts.begin(), hosts.end(), [&](const auto& h) { return h.probe.address == address; });
    if (host == hosts.end()) host = hosts.insert(hosts.end(), PeerWatch::Host{socket->remote, {}, {}});
    host->positions.push_back(pos);
    host->described += fmt::format("{}{}", host->described.empty() ? "" : ", ", describe_rank(peers_, r));
  }
  if (hosts.empty()) return;
  const auto settings = watch_->settings();
  group.watched.on_lost = [&group, settings](const std::vector<std::size_t>& lost) {
    std::vector<std::string> named;
    for (const std::size_t h : lost) named.push_back(group.watched.hosts[h].described);
    {  // before the shutdown: the failing operation reads it
      std::lock_guard lock(group.failure_mutex);
      group.unreachable = fmt::format(
          "peers unreachable on the network (no answer to {} TCP probes of {} ms each while the operation "
          "waited; the connections to them were shut down): {}",
          settings.rounds, settings.probe_timeout.count(), fmt::join(named, ", "));
    }
    for (const std::size_t h : lost)
      for (const int pos : group.watched.hosts[h].positions) shutdown_pair_socket(*group.sockets[std::size_t(pos)]);
  };
  watch_->add(group.watched);
}

std::shared_ptr<ProcessGroup> GlooBackend::create_group(std::vector<int> sorted_ranks) {
  if (int(sorted_ranks.size()) == world_size()) return world_group();  // the world, listed
  const std::string prefix = fmt::format("idist/gloo/group/{}", fmt::join(sorted_ranks, ","));
  auto group = std::make_shared<GlooGroup>(std::move(sorted_ranks), rank(), world_size(), id());
  if (group->is_member()) connect(*group, prefix);  // non-members take no part
  groups_.push_back(group);
  return group;
}

std::shared_ptr<core::debug::ProgressBoard> GlooBackend::progress_board() { return store::make_progress_board(store_); }

Work GlooBackend::do_barrier(const ProcessGroup& group, Completion how) {
  const auto timeout = this->timeout();
  return issue(group, OpType::Barrier, how, [timeout, retained = retained_.get()](gloo::Context& ctx) {
    retained->run<gloo::BarrierOptions>(borrow(ctx), [&](gloo::BarrierOptions& o) {
      o.setTimeout(timeout);
      gloo::barrier(o);
    });
  });
}

void GlooBackend::do_monitored_barrier(const ProcessGroup& group, std::chrono::milliseconds timeout,
                                       bool wait_all_ranks) {
  const auto& g = static_cast<const GlooGroup&>(group);
  const std::uint64_t n = g.monitored_barriers.fetch_add(1);
  store::store_monitored_barrier(*store_, fmt::format("idist/monitored_barrier/{}/{}", g.name(), n), g.ranks(), rank(),
                                 timeout, wait_all_ranks);
}

void GlooBackend::finalize() {
  if (!torn_down_) teardown(true);
}

void GlooBackend::teardown(bool barrier_first) noexcept {
  torn_down_ = true;
  const GlooGroup* world = groups_.empty() ? nullptr : groups_.front().get();
  if (barrier_first && world && !world->broken.load()) {
    // Every rank is done with the store and the contexts once all have arrived here.
    try {
      do_barrier(*world_group(), Completion::Blocking);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "idist: gloo finalize on rank %d: closing barrier failed: %s\n", rank(), e.what());
    }
  }
  try {
    watch_.reset();  // first: it calls into the groups
    if (p2p_lane_) p2p_lane_->stop("the gloo backend was finalized");
    for (auto& g : groups_)
      if (g->lane) g->lane->stop("the gloo backend was finalized");
    // Leaving on an error (no closing barrier, or a failed communicator): peers may be dead or stuck, so
    // rank 0's store server must not wait for them to disconnect; a rank that raised exits promptly.
    bool failed = !barrier_first;
    for (auto& g : groups_) failed = failed || g->broken.load();
    if (failed && store_) store_->leave_without_waiting();
    // Contexts close their connections; a Group the program still holds keeps an empty shell.
    p2p_lane_.reset();
    for (auto& g : groups_) {
      g->lane.reset();
      g->reduce_scatters = ReduceScatterCache{};  // its algorithms hold the context
      g->context.reset();
    }
    groups_.clear();
    device_.reset();
    retained_->clear();  // the loop thread that could signal them is gone with the device
    store_.reset();      // after a clean finalize, rank 0's server waits (bounded) for the other ranks to disconnect
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idist: gloo finalize on rank %d: %s\n", rank(), e.what());
  }
  env_.restore();
  sigpipe_.restore();
}

std::unique_ptr<core::Backend> create(const InitOptions& opts) { return std::make_unique<GlooBackend>(opts); }

}  // namespace idist::gloo_backend
