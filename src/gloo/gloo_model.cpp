// GlooModel: rendezvous, communicators and the collectives on Gloo's algorithms.
#include "gloo/gloo_model.hpp"

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/backend_factories.hpp"
#include "core/cuda_probe.hpp"
#include "core/host_reduce.hpp"
#include "gloo/call_tag.hpp"
#include "gloo/gloo_store.hpp"
#include "gloo/peer_diagnosis.hpp"
#include "gloo/tcp_device.hpp"
#include "idist/error.hpp"
#include "store/prefix_store.hpp"
#include "store/store_monitored_barrier.hpp"

namespace idist::gloo_backend {

namespace {

// A lost host is one that does not answer a TCP connection attempt within this time.
constexpr std::chrono::milliseconds kPeerProbeTimeout{1000};
// How much longer a Work waits than the operation's own timeout: the probe, plus scheduling slack.
constexpr std::chrono::milliseconds kFailureReportGrace = kPeerProbeTimeout + std::chrono::milliseconds(1000);

using rendezvous::describe_rank;

// Calls f(T{}) with an unsigned integer type of `size` bytes: gloo's options take the element size
// from the pointer type, and our reduce functions interpret the bytes by their real dtype.
template <class F>
void with_element_type(std::size_t size, F&& f) {
  switch (size) {
    case 1: f(std::uint8_t{}); return;
    case 2: f(std::uint16_t{}); return;
    case 4: f(std::uint32_t{}); return;
    default: f(std::uint64_t{}); return;
  }
}

bool read_bcube_choice() {
  const char* v = std::getenv("IDIST_GLOO_ALLREDUCE");
  if (!v || !*v || std::strcmp(v, "ring") == 0) return false;
  if (std::strcmp(v, "bcube") == 0) return true;
  throw ValueError(fmt::format("IDIST_GLOO_ALLREDUCE should be 'ring' or 'bcube', but given '{}'", v));
}

}  // namespace

GlooModel::GlooModel(const InitOptions& opts) : ComputationModel(opts.timeout) {
  rendezvous::WorldInfo info = rendezvous::discover(opts);
  set_layout(info.layout());  // provisional until exchange_topology()
  use_bcube_ = read_bcube_choice();
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
    device_ = make_tcp_device(interface_);
    if (const auto settings = PeerWatch::from_env()) watch_ = std::make_unique<PeerWatch>(*settings);
    std::vector<int> all(std::size_t(info.world_size));
    for (int r = 0; r < info.world_size; ++r) all[std::size_t(r)] = r;
    world_ = connect(std::move(all), "world", "idist/gloo/world");
  } catch (...) {
    teardown(false);
    throw;
  }
}

GlooModel::~GlooModel() {
  if (!torn_down_) teardown(false);
}

Device GlooModel::device() const {
  return core::cuda_device_count() > 0 ? Device{DeviceType::CUDA, local_rank()} : Device{};
}

void GlooModel::set_local_rank(int local_rank) { set_layout_local_rank(local_rank); }

std::unique_ptr<Communicator> GlooModel::connect(std::vector<int> ranks, std::string name, const std::string& prefix) {
  auto comm = std::make_unique<Communicator>();
  const int pos = int(std::lower_bound(ranks.begin(), ranks.end(), rank()) - ranks.begin());
  auto context = std::make_shared<gloo::rendezvous::Context>(pos, int(ranks.size()));
  context->setTimeout(timeout());
  const std::string what = fmt::format(
      "gloo: rank {} could not connect the communicator of group {} ({} ranks) through {} within {} ms: ", rank(), name,
      ranks.size(), store_->describe(), timeout().count());
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
  comm->ranks = std::move(ranks);
  comm->name = std::move(name);
  comm->context = std::move(context);
  comm->lane = std::make_unique<OpLane>(comm->name);
  watch(*comm);
  return comm;
}

void GlooModel::watch(Communicator& comm) {
  if (!watch_) return;
  const int self = int(std::lower_bound(comm.ranks.begin(), comm.ranks.end(), rank()) - comm.ranks.begin());
  const std::string& my_address = peers_.at(std::size_t(rank())).address;
  comm.sockets.assign(comm.ranks.size(), std::nullopt);
  std::vector<PeerWatch::Host>& hosts = comm.watched.hosts;
  for (int pos = 0; pos < int(comm.ranks.size()); ++pos) {
    const int r = comm.ranks[std::size_t(pos)];
    const std::string& address = peers_.at(std::size_t(r)).address;
    if (pos == self || address == my_address || rendezvous::is_loopback_address(address)) continue;
    auto& pair = comm.context->getPair(pos);
    if (!pair) continue;
    auto& socket = comm.sockets[std::size_t(pos)];
    socket = find_pair_socket(*pair);
    if (!socket) continue;
    auto host = std::find_if(hosts.begin(), hosts.end(), [&](const auto& h) { return h.probe.address == address; });
    if (host == hosts.end()) host = hosts.insert(hosts.end(), PeerWatch::Host{socket->remote, {}, {}});
    host->positions.push_back(pos);
    host->described += fmt::format("{}{}", host->described.empty() ? "" : ", ", describe_rank(peers_, r));
  }
  if (hosts.empty()) return;
  const auto settings = watch_->settings();
  comm.watched.on_lost = [&comm, settings](const std::vector<std::size_t>& lost) {
    std::vector<std::string> named;
    for (const std::size_t h : lost) named.push_back(comm.watched.hosts[h].described);
    {  // before the shutdown: the failing operation reads it
      std::lock_guard lock(comm.failure_mutex);
      comm.unreachable = fmt::format(
          "peers unreachable on the network (no answer to {} TCP probes of {} ms each while the operation "
          "waited; the connections to them were shut down): {}",
          settings.rounds, settings.probe_timeout.count(), fmt::join(named, ", "));
    }
    for (const std::size_t h : lost)
      for (const int pos : comm.watched.hosts[h].positions) shutdown_pair_socket(*comm.sockets[std::size_t(pos)]);
  };
  watch_->add(comm.watched);
}

Communicator& GlooModel::communicator(const Group& group) {
  if (group.is_world()) return *world_;
  if (const auto* comm = groups_.find(group.ranks())) return **comm;
  const std::vector<int> ranks = normalize_group(group);
  if (int(ranks.size()) == world_size()) return *world_;  // the whole world, listed
  return *groups_.get_or_create(group.ranks(), ranks, [&](const std::vector<int>& sorted) {
    return connect(sorted, Group(sorted).str(), fmt::format("idist/gloo/group/{}", fmt::join(sorted, ",")));
  });
}

std::optional<int> GlooModel::group_rank(const Group& group) {
  if (group.is_world()) return rank();
  const std::vector<int> ranks = normalize_group(group);
  const auto it = std::lower_bound(ranks.begin(), ranks.end(), rank());
  if (it == ranks.end() || *it != rank()) return std::nullopt;  // non-members take no part
  communicator(group);
  return int(it - ranks.begin());
}

// Runs one gloo operation of `comm`, translating failures into idist errors that name the operation,
// the rank and the group; the first failure marks the communicator unusable.
template <class Run>
void GlooModel::run_guarded(Communicator& comm, const char* op, int rank, const rendezvous::PeerTable& peers,
                            const Run& run) {
  if (comm.broken.load(std::memory_order_acquire)) {
    std::lock_guard lock(comm.failure_mutex);
    throw BackendError(
        fmt::format("{} on rank {}: the gloo communicator of group {} is unusable after an earlier "
                    "failure ({}); call idist::finalize()",
                    op, rank, comm.name, comm.failure));
  }
  const auto fail = [&](const std::string& detail, bool timed_out) {
    std::string unreachable;  // the peer watch's verdict, when it ended the operation
    {
      std::lock_guard lock(comm.failure_mutex);
      unreachable = comm.unreachable;
    }
    if (!unreachable.empty()) timed_out = false;
    // Only the first failure of a communicator looks for the lost peers (a bounded network probe).
    const std::string lost = !unreachable.empty() || comm.broken.load(std::memory_order_acquire)
                                 ? std::string()
                                 : lost_peers(detail, timed_out, comm.ranks, rank, peers, kPeerProbeTimeout);
    std::string msg;
    if (!unreachable.empty())
      msg = fmt::format("{} on {} (group {}) failed: {} (gloo then reported: {})", op, describe_rank(peers, rank),
                        comm.name, unreachable, detail);
    else if (lost.empty())
      msg = fmt::format(
          "{} on {} (group {}) failed: {}; a peer may have died or issued a different collective (another "
          "operation, element type, count, reduce op or root: IDIST_DISTRIBUTED_DEBUG=DETAIL names it)",
          op, describe_rank(peers, rank), comm.name, detail);
    else
      msg = fmt::format("{} on {} (group {}) failed: {}; {}", op, describe_rank(peers, rank), comm.name, detail, lost);
    {
      std::lock_guard lock(comm.failure_mutex);
      if (comm.failure.empty()) comm.failure = msg;
    }
    comm.broken.store(true, std::memory_order_release);
    if (timed_out) throw TimeoutError(msg);
    throw BackendError(msg);
  };
  // The peer watch sees how long this operation has been running.
  struct Busy {
    std::atomic<std::int64_t>& since;
    explicit Busy(std::atomic<std::int64_t>& s) : since(s) {
      since.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_release);
    }
    ~Busy() { since.store(0, std::memory_order_release); }
  };
  try {
    const Busy busy(comm.watched.busy_since);
    run(*comm.context);
  } catch (const TimeoutError& e) {
    fail(e.what(), true);
  } catch (const Error& e) {
    fail(e.what(), false);
  } catch (const gloo::IoException& e) {
    fail(std::string("gloo I/O error: ") + e.what(), std::strstr(e.what(), "imed out") != nullptr);
  } catch (const std::exception& e) {
    fail(std::string("gloo error: ") + e.what(), false);
  }
}

template <class Run>
Work GlooModel::submit(Communicator& comm, const char* op, Run run) {
  const auto timeout = this->timeout();
  const int rank = this->rank();
  // One closure per operation: the lane's std::function holds it (a single allocation).
  const rendezvous::PeerTable& peers = peers_;
  auto impl =
      comm.lane->submit([&comm, op, rank, &peers, run = std::move(run)] { run_guarded(comm, op, rank, peers, run); },
                        std::chrono::steady_clock::now() + timeout);
  // Gloo enforces the timeout inside the operation, whose error names the lost peers after a bounded
  // probe; the Work's own wait allows for that probe so that the caller gets the precise error.
  return Work(std::move(impl), op, rank, timeout + kFailureReportGrace);
}

template <class Run>
Work GlooModel::issue(Communicator& comm, const char* op, bool blocking, Run run) {
  if (!blocking) return submit(comm, op, std::move(run));
  const int rank = this->rank();
  if (!comm.lane->run_if_idle([&] { run_guarded(comm, op, rank, peers_, run); }))
    submit(comm, op, std::move(run)).wait();
  return Work{};
}

Work GlooModel::do_all_reduce(Buffer data, ReduceOp op, const Group& group) {
  return all_reduce_impl(data, op, group, false);
}
void GlooModel::do_all_reduce_blocking(Buffer data, ReduceOp op, const Group& group) {
  all_reduce_impl(data, op, group, true);
}
Work GlooModel::do_all_gather(ConstBuffer in, Buffer out, const Group& group) {
  return all_gather_impl(in, out, group, false);
}
void GlooModel::do_all_gather_blocking(ConstBuffer in, Buffer out, const Group& group) {
  all_gather_impl(in, out, group, true);
}
Work GlooModel::do_broadcast(Buffer data, int, int root, const Group& group) {
  return broadcast_impl(data, root, group, false);
}
void GlooModel::do_broadcast_blocking(Buffer data, int, int root, const Group& group) {
  broadcast_impl(data, root, group, true);
}
Work GlooModel::do_barrier(const Group& group) { return barrier_impl(group, false); }
void GlooModel::do_barrier_blocking(const Group& group) { barrier_impl(group, true); }

// gloo's option classes take a shared_ptr to the context; the lane owns the context for as long as
// it runs operations, so a non-owning alias avoids a reference count per operation.
static std::shared_ptr<gloo::Context> borrow(gloo::Context& ctx) { return {std::shared_ptr<void>(), &ctx}; }

Work GlooModel::all_reduce_impl(Buffer data, ReduceOp op, const Group& group, bool blocking) {
  const core::ReduceFn fn = core::reduce_function(data.dtype, op);  // ValueError for And / Or on floats
  Communicator& comm = communicator(group);
  if (data.count == 0) return Work{};
  const auto algorithm =
      use_bcube_ ? gloo::AllreduceOptions::Algorithm::BCUBE : gloo::AllreduceOptions::Algorithm::RING;
  const auto timeout = this->timeout();
  return issue(comm, "all_reduce", blocking,
               [data, op, fn, algorithm, timeout, retained = retained_.get()](gloo::Context& ctx) {
                 retained->run<gloo::AllreduceOptions>(borrow(ctx), [&](gloo::AllreduceOptions& o) {
                   with_element_type(dtype_size(data.dtype), [&](auto t) {
                     using T = decltype(t);
                     o.setOutput<T>(static_cast<T*>(data.data), data.count);
                   });
                   o.setReduceFunction(fn);
                   o.setTag(call_tag(data.dtype, data.count, int(op), -1));
                   o.setAlgorithm(algorithm);
                   o.setTimeout(timeout);
                   gloo::allreduce(o);
                 });
               });
}

Work GlooModel::all_gather_impl(ConstBuffer in, Buffer out, const Group& group, bool blocking) {
  Communicator& comm = communicator(group);
  if (in.count == 0) return Work{};
  const auto timeout = this->timeout();
  return issue(comm, "all_gather", blocking, [in, out, timeout, retained = retained_.get()](gloo::Context& ctx) {
    retained->run<gloo::AllgatherOptions>(borrow(ctx), [&](gloo::AllgatherOptions& o) {
      with_element_type(dtype_size(in.dtype), [&](auto t) {
        using T = decltype(t);
        o.setInput<T>(static_cast<T*>(const_cast<void*>(in.data)), in.count);
        o.setOutput<T>(static_cast<T*>(out.data), out.count);
      });
      o.setTag(call_tag(in.dtype, in.count, -1, -1));
      o.setTimeout(timeout);
      gloo::allgather(o);
    });
  });
}

Work GlooModel::do_all_gather_v(ConstBuffer in, Buffer out, std::span<const std::size_t> counts, int,
                                const Group& group) {
  Communicator& comm = communicator(group);
  const std::size_t total = out.count;  // sum(counts), checked by the front door
  if (total == 0) return Work{};
  const auto timeout = this->timeout();
  std::vector<std::size_t> elements(counts.begin(), counts.end());
  return submit(
      comm, "all_gather",
      [in, out, total, elements = std::move(elements), timeout, retained = retained_.get()](gloo::Context& ctx) {
        retained->run<gloo::AllgathervOptions>(borrow(ctx), [&](gloo::AllgathervOptions& o) {
          with_element_type(dtype_size(in.dtype), [&](auto t) {
            using T = decltype(t);
            o.setInput<T>(static_cast<T*>(const_cast<void*>(in.data)), in.count);
            o.setOutput<T>(static_cast<T*>(out.data), elements);
          });
          o.setTag(call_tag(in.dtype, total, -1, -1));
          o.setTimeout(timeout);
          gloo::allgatherv(o);
        });
      });
}

Work GlooModel::broadcast_impl(Buffer data, int root, const Group& group, bool blocking) {
  Communicator& comm = communicator(group);
  if (data.count == 0) return Work{};
  const auto timeout = this->timeout();
  return issue(comm, "broadcast", blocking, [data, root, timeout, retained = retained_.get()](gloo::Context& ctx) {
    retained->run<gloo::BroadcastOptions>(borrow(ctx), [&](gloo::BroadcastOptions& o) {
      with_element_type(dtype_size(data.dtype), [&](auto t) {
        using T = decltype(t);
        o.setOutput<T>(static_cast<T*>(data.data), data.count);
      });
      o.setRoot(root);
      o.setTag(call_tag(data.dtype, data.count, -1, root));
      o.setTimeout(timeout);
      gloo::broadcast(o);
    });
  });
}

Work GlooModel::barrier_impl(const Group& group, bool blocking) {
  Communicator& comm = communicator(group);
  const auto timeout = this->timeout();
  return issue(comm, "barrier", blocking, [timeout, retained = retained_.get()](gloo::Context& ctx) {
    retained->run<gloo::BarrierOptions>(borrow(ctx), [&](gloo::BarrierOptions& o) {
      o.setTimeout(timeout);
      gloo::barrier(o);
    });
  });
}

void GlooModel::do_monitored_barrier(const Group& group, std::chrono::milliseconds timeout, bool wait_all_ranks) {
  Communicator& comm = communicator(group);
  const std::uint64_t n = comm.monitored_barriers.fetch_add(1);
  store::store_monitored_barrier(*store_, fmt::format("idist/monitored_barrier/{}/{}", comm.name, n), comm.ranks,
                                 rank(), timeout, wait_all_ranks);
}

void GlooModel::finalize() {
  if (!torn_down_) teardown(true);
}

void GlooModel::teardown(bool barrier_first) noexcept {
  torn_down_ = true;
  if (barrier_first && world_ && !world_->broken.load()) {
    // Every rank is done with the store and the contexts once all have arrived here.
    try {
      barrier(Group{}).wait();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "idist: gloo finalize on rank %d: closing barrier failed: %s\n", rank(), e.what());
    }
  }
  try {
    watch_.reset();  // first: it calls into the communicators
    groups_.for_each([](auto& comm) { comm->lane->stop("the gloo backend was finalized"); });
    if (world_) world_->lane->stop("the gloo backend was finalized");
    // Leaving on an error (no closing barrier, or a failed communicator): peers may be dead or stuck, so
    // rank 0's store server must not wait for them to disconnect; a rank that raised exits promptly.
    bool failed = !barrier_first || (world_ && world_->broken.load());
    groups_.for_each([&](auto& comm) { failed = failed || comm->broken.load(); });
    if (failed && store_) store_->leave_without_waiting();
    groups_.clear();  // contexts close their connections
    world_.reset();
    device_.reset();
    retained_->clear();  // the loop thread that could signal them is gone with the device
    store_.reset();      // after a clean finalize, rank 0's server waits (bounded) for the other ranks to disconnect
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idist: gloo finalize on rank %d: %s\n", rank(), e.what());
  }
  env_.restore();
  sigpipe_.restore();
}

std::unique_ptr<ComputationModel> create(const InitOptions& opts) { return std::make_unique<GlooModel>(opts); }

}  // namespace idist::gloo_backend
