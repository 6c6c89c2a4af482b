#include "core/debug/debug_backend.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/debug/desync_check.hpp"
#include "core/work_impl.hpp"
#include "idist/error.hpp"

namespace idist::core::debug {

namespace {

// A Work's own deadline is the backend's timeout plus this, so that a backend's precise failure
// (gloo names the lost peer after a bounded probe) arrives before the wrapper gives up.
constexpr std::chrono::milliseconds kWorkGrace{2500};

// Called inside a catch block: records how the operation ended, dumps the recorder and rethrows;
// a timeout's message gains the ranks that never reached the operation.
[[noreturn]] void fail_current(Diagnostics& d, std::uint64_t id, const Fingerprint& fp, const std::vector<int>& members,
                               const std::string& group) {
  try {
    throw;
  } catch (const DesyncError& e) {
    d.recorder().finish(id, TraceState::Desync);
    d.dump(e.what());
    throw;
  } catch (const TimeoutError& e) {
    d.recorder().finish(id, TraceState::TimedOut);
    const std::string msg = e.what() + d.laggards(fp, members, group);
    d.dump(msg);
    throw TimeoutError(msg);
  } catch (const std::exception& e) {
    d.recorder().finish(id, TraceState::Failed);
    d.dump(e.what());
    throw;
  }
}

// The Work of a non-blocking operation: waits on the backend's Work and records how it ended.
class TracedWork final : public idist::core::WorkImpl {
 public:
  TracedWork(Work inner, std::shared_ptr<Diagnostics> d, Fingerprint fp, std::vector<int> members, std::string group,
             std::uint64_t id)
      : inner_(std::move(inner)),
        d_(std::move(d)),
        fp_(fp),
        members_(std::move(members)),
        group_(std::move(group)),
        id_(id) {}

  bool test() override { return inner_.is_completed(); }

  bool wait_until(std::chrono::steady_clock::time_point deadline) override {
    using namespace std::chrono;
    try {
      if (deadline == steady_clock::time_point::max())
        inner_.wait();
      else
        inner_.wait(std::max(milliseconds(0), duration_cast<milliseconds>(deadline - steady_clock::now())));
    } catch (...) {
      fail_current(*d_, id_, fp_, members_, group_);
    }
    d_->recorder().finish(id_, TraceState::Completed);
    return true;
  }

 private:
  Work inner_;
  std::shared_ptr<Diagnostics> d_;
  Fingerprint fp_;
  std::vector<int> members_;
  std::string group_;
  std::uint64_t id_;
};

}  // namespace

std::unique_ptr<Backend> wrap(std::unique_ptr<Backend> backend, const Settings& settings) {
  if (!settings.wrapped()) return backend;
  return std::make_unique<DebugBackend>(std::move(backend), settings);
}

DebugLevel level_of(ComputationModel& model) {
  const auto* d = dynamic_cast<const DebugBackend*>(&Backend::of(model));
  return d ? d->level() : DebugLevel::Off;
}

DebugBackend::DebugBackend(std::unique_ptr<Backend> inner, const Settings& settings)
    : Backend(inner->timeout()), inner_(std::move(inner)) {
  // The decorator resolves groups through the inner backend and shares its identity and world group.
  mirror(*inner_);
  diag_ = std::make_shared<Diagnostics>(settings, inner_->rank(), inner_->world_size(),
                                        inner_->backend().value_or("serial"), inner_->progress_board());
}

void DebugBackend::set_local_rank(int local_rank) {
  inner_->set_local_rank(local_rank);
  set_layout_local_rank(inner_->local_rank());
}

void DebugBackend::finalize() {
  diag_->detach_board();
  inner_->finalize();
}

void DebugBackend::check_device_buffer(OpType op, std::string_view arg, const Device& device) const {
  inner_->check_device_buffer(op, arg, device);
}

std::shared_ptr<ProcessGroup> DebugBackend::create_group(std::vector<int> sorted_ranks) {
  return inner_->create_group(std::move(sorted_ranks));
}

void DebugBackend::check_same_call(const Fingerprint& fp, const ProcessGroup& group) {
  std::vector<Fingerprint> all(std::size_t(group.size()));
  const Gathering exchange{OpType::AllGather,
                           ConstBuffer{&fp, Fingerprint::kWords, DType::Int64},
                           Buffer{all.data(), all.size() * Fingerprint::kWords, DType::Int64},
                           {},
                           -1,
                           group};
  inner_->do_gather(exchange, Completion::Blocking);
  debug::check_same_call(all, fp, group.name());
}

// The fingerprints cannot hold all_to_all_v's per-pair counts (each rank receives its own total), and a
// pair that disagrees corrupts the receiver's buffer or, on gloo, aborts the process on Gloo's transport
// thread. So DETAIL exchanges them first: an all_to_all of the counts each rank sends, compared with
// the counts each rank expects, then an all_gather of each rank's first disagreement so that every
// rank raises the same DesyncError before anything is executed.
void DebugBackend::check_pair_counts(const Distribution& d, const Fingerprint& fp) {
  const ProcessGroup& group = d.group;
  const std::size_t n = std::size_t(group.size());
  std::vector<std::uint64_t> sends(n), announced(n);
  for (std::size_t j = 0; j < n; ++j) sends[j] = d.in_counts[j];
  inner_->do_distribute(Distribution{OpType::AllToAll,
                                     ConstBuffer{sends.data(), n, DType::UInt64},
                                     Buffer{announced.data(), n, DType::UInt64},
                                     {},
                                     -1,
                                     group},
                        Completion::Blocking);
  // (sender's group rank, elements it sends, elements this rank expects), or all ones when they agree.
  std::uint64_t mine[3] = {~0ULL, 0, 0};
  for (std::size_t j = 0; j < n; ++j)
    if (announced[j] != d.counts[j]) {
      mine[0] = j;
      mine[1] = announced[j];
      mine[2] = d.counts[j];
      break;
    }
  std::vector<std::uint64_t> all(3 * n);
  inner_->do_gather(Gathering{OpType::AllGather,
                              ConstBuffer{mine, 3, DType::UInt64},
                              Buffer{all.data(), all.size(), DType::UInt64},
                              {},
                              -1,
                              group},
                    Completion::Blocking);
  std::vector<std::string> pairs;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t* r = &all[3 * i];
    if (r[0] == ~0ULL) continue;
    pairs.push_back(fmt::format("rank {}: sends {} elements to rank {}, which expects {}",
                                group.ranks()[std::size_t(r[0])], r[1], group.ranks()[i], r[2]));
  }
  if (!pairs.empty())
    throw DesyncError(
        fmt::format("{} on rank {}: the ranks of group {} disagree on the counts of all_to_all_v ({}); "
                    "nothing was executed (IDIST_DISTRIBUTED_DEBUG=DETAIL)",
                    fp.name(), rank(), group.name(), fmt::join(pairs, "; ")));
}

template <class Run>
Work DebugBackend::traced(Fingerprint fp, const ProcessGroup& group, Completion how, Run run) {
  return traced(fp, group.name(), group.ranks(), &group, how, run);
}

template <class Run>
Work DebugBackend::traced(Fingerprint fp, const std::string& name, const std::vector<int>& members,
                          const ProcessGroup* checked, Completion how, Run run) {
  fp.rank = rank();
  diag_->assign_seq(fp);
  const std::uint64_t id = diag_->recorder().start(fp, name);
  Work work;
  try {
    if (checked && diag_->settings().level == DebugLevel::Detail) check_same_call(fp, *checked);
    work = run(how);
  } catch (...) {
    fail_current(*diag_, id, fp, members, name);
  }
  if (how == Completion::Blocking) {
    diag_->recorder().finish(id, TraceState::Completed);
    return work;
  }
  return Work(std::make_shared<TracedWork>(std::move(work), diag_, fp, members, name, id), OpType(fp.collective),
              rank(), timeout() + kWorkGrace);
}

Work DebugBackend::do_reduce(const Reduction& r, Completion how) {
  return traced(fingerprint_of(r), r.group, how, [&](Completion c) { return inner_->do_reduce(r, c); });
}

Work DebugBackend::do_gather(const Gathering& g, Completion how) {
  return traced(fingerprint_of(g), g.group, how, [&](Completion c) { return inner_->do_gather(g, c); });
}

Work DebugBackend::do_distribute(const Distribution& d, Completion how) {
  const Fingerprint fp = fingerprint_of(d);
  return traced(fp, d.group, how, [&](Completion c) {
    if (d.op == OpType::AllToAllV && diag_->settings().level == DebugLevel::Detail) check_pair_counts(d, fp);
    return inner_->do_distribute(d, c);
  });
}

Work DebugBackend::do_point_to_point(const PointToPoint& p, Completion how) {
  // Two ranks take part: numbered per pair, never checked by the group (the others do not call it).
  const int a = std::min(rank(), p.peer);
  const int b = std::max(rank(), p.peer);
  return traced(fingerprint_of(p, rank()), fmt::format("p2p {}<->{}", a, b), std::vector<int>{a, b}, nullptr, how,
                [&](Completion c) { return inner_->do_point_to_point(p, c); });
}

Work DebugBackend::do_barrier(const ProcessGroup& group, Completion how) {
  return traced(barrier_fingerprint(group), group, how, [&](Completion c) { return inner_->do_barrier(group, c); });
}

void DebugBackend::do_monitored_barrier(const ProcessGroup& group, std::chrono::milliseconds timeout,
                                        bool wait_all_ranks) {
  try {
    inner_->do_monitored_barrier(group, timeout, wait_all_ranks);
  } catch (const std::exception& e) {
    diag_->dump(e.what());
    throw;
  }
}

}  // namespace idist::core::debug
