#include "core/debug/debug_model.hpp"

#include <algorithm>
#include <numeric>

#include "core/debug/desync_check.hpp"
#include "idist/error.hpp"

namespace idist::core::debug {

namespace {

// A Work's own deadline is the backend's timeout plus this, so that a backend's precise failure
// (gloo names the lost peer after a probe of up to 2 s) arrives before the wrapper gives up.
constexpr std::chrono::milliseconds kWorkGrace{2500};

std::vector<int> members_of(const Group& group, int world_size) {
  std::vector<int> ranks = group.ranks();
  if (group.is_world()) {
    ranks.resize(std::size_t(world_size));
    std::iota(ranks.begin(), ranks.end(), 0);
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

// Called inside a catch block: records how the collective ended, dumps the recorder and rethrows;
// a timeout's message gains the ranks that never reached the collective.
[[noreturn]] void fail_current(Diagnostics& d, std::uint64_t id, const Fingerprint& fp, const Group& group,
                               int world_size, const std::string& name) {
  try {
    throw;
  } catch (const DesyncError& e) {
    d.recorder().finish(id, TraceState::Desync);
    d.dump(e.what());
    throw;
  } catch (const TimeoutError& e) {
    d.recorder().finish(id, TraceState::TimedOut);
    const std::string msg = e.what() + d.laggards(fp, members_of(group, world_size), name);
    d.dump(msg);
    throw TimeoutError(msg);
  } catch (const std::exception& e) {
    d.recorder().finish(id, TraceState::Failed);
    d.dump(e.what());
    throw;
  }
}

// The Work of a non-blocking collective: waits on the backend's Work and records how it ended.
class TracedWork final : public idist::detail::WorkImpl {
 public:
  TracedWork(Work inner, std::shared_ptr<Diagnostics> d, Fingerprint fp, Group group, std::string name,
             std::uint64_t id, int world_size)
      : inner_(std::move(inner)),
        d_(std::move(d)),
        fp_(fp),
        group_(std::move(group)),
        name_(std::move(name)),
        id_(id),
        world_size_(world_size) {}

  bool test() override { return inner_.is_completed(); }

  bool wait_until(std::chrono::steady_clock::time_point deadline) override {
    using namespace std::chrono;
    try {
      if (deadline == steady_clock::time_point::max())
        inner_.wait();
      else
        inner_.wait(std::max(milliseconds(0), duration_cast<milliseconds>(deadline - steady_clock::now())));
    } catch (...) {
      fail_current(*d_, id_, fp_, group_, world_size_, name_);
    }
    d_->recorder().finish(id_, TraceState::Completed);
    return true;
  }

 private:
  Work inner_;
  std::shared_ptr<Diagnostics> d_;
  Fingerprint fp_;
  Group group_;
  std::string name_;
  std::uint64_t id_;
  int world_size_;
};

}  // namespace

struct DebugModel::Call {
  Fingerprint fp;
  const Group* group;
  std::string name;
  std::uint64_t id = 0;
};

std::unique_ptr<ComputationModel> wrap(std::unique_ptr<ComputationModel> model, const Settings& settings) {
  if (!settings.wrapped()) return model;
  return std::make_unique<DebugModel>(std::move(model), settings);
}

DebugLevel level_of(ComputationModel& model) {
  const auto* d = dynamic_cast<const DebugModel*>(&model);
  return d ? d->level() : DebugLevel::Off;
}

DebugModel::DebugModel(std::unique_ptr<ComputationModel> inner, const Settings& settings)
    : ComputationModel(inner->timeout()), inner_(std::move(inner)) {
  set_layout(inner_->layout());
  diag_ = std::make_shared<Diagnostics>(settings, inner_->rank(), inner_->world_size(),
                                        inner_->backend().value_or("serial"), inner_->rendezvous_store());
}

void DebugModel::finalize() {
  diag_->detach_store();
  inner_->finalize();
}

DebugModel::Call DebugModel::begin(Collective c, DType dtype, std::size_t count, std::int64_t op, std::int64_t root,
                                   const Group& group) {
  Call call{{}, &group, group.is_world() ? std::string("world") : group.str(), 0};
  call.fp.collective = std::int64_t(c);
  call.fp.dtype = c == Collective::Barrier ? -1 : std::int64_t(dtype);
  call.fp.count = std::int64_t(count);
  call.fp.op = op;
  call.fp.root = root;
  call.fp.group_hash = group_hash(group);
  call.fp.rank = inner_->rank();
  diag_->assign_seq(call.fp);
  call.id = diag_->recorder().start(call.fp, call.name);
  return call;
}

template <class Run>
void DebugModel::run_blocking(Call& call, Run run) {
  try {
    if (diag_->settings().level == DebugLevel::Detail) check_same_call(*inner_, call.fp, *call.group, call.name);
    run();
  } catch (...) {
    fail_current(*diag_, call.id, call.fp, *call.group, world_size(), call.name);
  }
  diag_->recorder().finish(call.id, TraceState::Completed);
}

template <class Issue>
Work DebugModel::run_async(Call& call, Issue issue) {
  Work work;
  try {
    if (diag_->settings().level == DebugLevel::Detail) check_same_call(*inner_, call.fp, *call.group, call.name);
    work = issue();
  } catch (...) {
    fail_current(*diag_, call.id, call.fp, *call.group, world_size(), call.name);
  }
  auto impl =
      std::make_shared<TracedWork>(std::move(work), diag_, call.fp, *call.group, call.name, call.id, world_size());
  return Work(std::move(impl), to_string(Collective(call.fp.collective)), rank(), timeout() + kWorkGrace);
}

Work DebugModel::do_all_reduce(Buffer data, ReduceOp op, const Group& group) {
  Call call = begin(Collective::AllReduce, data.dtype, data.count, std::int64_t(op), -1, group);
  return run_async(call, [&] { return inner_->all_reduce(data, op, group); });
}
Work DebugModel::do_all_gather(ConstBuffer in, Buffer out, const Group& group) {
  Call call = begin(Collective::AllGather, in.dtype, in.count, -1, -1, group);
  return run_async(call, [&] { return inner_->all_gather(in, out, group); });
}
Work DebugModel::do_all_gather_v(ConstBuffer in, Buffer out, std::span<const std::size_t> counts, int,
                                 const Group& group) {
  // Lengths differ by rank on purpose: the group compares their sum (out.count, checked by the
  // front door), which every member knows.
  Call call = begin(Collective::AllGatherV, in.dtype, out.count, -1, -1, group);
  return run_async(call, [&] { return inner_->all_gather_v(in, out, counts, group); });
}
Work DebugModel::do_broadcast(Buffer data, int src, int, const Group& group) {
  Call call = begin(Collective::Broadcast, data.dtype, data.count, -1, src, group);
  return run_async(call, [&] { return inner_->broadcast(data, src, group); });
}
Work DebugModel::do_barrier(const Group& group) {
  Call call = begin(Collective::Barrier, DType::UInt8, 0, -1, -1, group);
  return run_async(call, [&] { return inner_->barrier(group); });
}
void DebugModel::do_all_reduce_blocking(Buffer data, ReduceOp op, const Group& group) {
  Call call = begin(Collective::AllReduce, data.dtype, data.count, std::int64_t(op), -1, group);
  run_blocking(call, [&] { inner_->all_reduce_blocking(data, op, group); });
}
void DebugModel::do_all_gather_blocking(ConstBuffer in, Buffer out, const Group& group) {
  Call call = begin(Collective::AllGather, in.dtype, in.count, -1, -1, group);
  run_blocking(call, [&] { inner_->all_gather_blocking(in, out, group); });
}
void DebugModel::do_broadcast_blocking(Buffer data, int src, int, const Group& group) {
  Call call = begin(Collective::Broadcast, data.dtype, data.count, -1, src, group);
  run_blocking(call, [&] { inner_->broadcast_blocking(data, src, group); });
}
void DebugModel::do_barrier_blocking(const Group& group) {
  Call call = begin(Collective::Barrier, DType::UInt8, 0, -1, -1, group);
  run_blocking(call, [&] { inner_->barrier_blocking(group); });
}
void DebugModel::do_monitored_barrier(const Group& group, std::chrono::milliseconds timeout, bool wait_all_ranks) {
  try {
    inner_->monitored_barrier(group, timeout, wait_all_ranks);
  } catch (const std::exception& e) {
    diag_->dump(e.what());
    throw;
  }
}

}  // namespace idist::core::debug
