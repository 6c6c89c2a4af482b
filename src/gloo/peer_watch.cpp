#include "gloo/peer_watch.hpp"

#include <pthread.h>

#include <algorithm>

#include <fmt/format.h>

#include "gloo/peer_diagnosis.hpp"
#include "idist/error.hpp"
#include "launch/settings.hpp"

namespace idist::gloo_backend {
namespace {

using Clock = std::chrono::steady_clock;
// How often the thread looks for operations that have waited `delay`.
constexpr auto kTick = std::chrono::milliseconds(50);

}  // namespace

std::optional<PeerWatch::Settings> PeerWatch::from_env() {
  const launch::PeerWatchSetting set = launch::gloo_peer_watch();
  if (!set.on) return std::nullopt;
  if (!set.times) return Settings{};
  return Settings{set.times->delay, set.times->probe_timeout, set.times->rounds};
}

PeerWatch::PeerWatch(Settings settings) : settings_(settings) {}

PeerWatch::~PeerWatch() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PeerWatch::add(Subject& subject) {
  std::lock_guard lock(mutex_);
  State& state = subjects_[&subject];
  state.id = next_id_++;
  state.failures.assign(subject.hosts.size(), 0);
  if (!thread_.joinable() && !stopping_) {
    thread_ = std::thread([this] { run(); });
    pthread_setname_np(thread_.native_handle(), "idist-peerwatch");
  }
}

void PeerWatch::remove(Subject& subject) {
  std::lock_guard lock(mutex_);  // on_lost runs under this lock
  subjects_.erase(&subject);
}

void PeerWatch::run() {
  const auto delay = std::chrono::duration_cast<Clock::duration>(settings_.delay).count();
  Clock::time_point last_round{};
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, kTick);
    if (stopping_) break;
    const auto now = Clock::now();
    struct Pending {
      Subject* subject;
      std::uint64_t id;
      std::int64_t op;
    };
    std::vector<Pending> pending;
    std::vector<Endpoint> probes;  // one per host address
    for (auto& [subject, state] : subjects_) {
      const std::int64_t since = subject->busy_since.load(std::memory_order_acquire);
      if (since != state.op) {  // another operation (or none): its own count
        state.op = since;
        std::fill(state.failures.begin(), state.failures.end(), 0);
      }
      if (since == 0 || state.fired || now.time_since_epoch().count() - since < delay) continue;
      pending.push_back({subject, state.id, since});
      for (const Host& h : subject->hosts)
        if (std::none_of(probes.begin(), probes.end(), [&](const Endpoint& e) { return e.address == h.probe.address; }))
          probes.push_back(h.probe);
    }
    if (pending.empty() || probes.empty() || now - last_round < settings_.probe_timeout) continue;
    last_round = now;
    lock.unlock();
    const std::vector<bool> answered = hosts_answering(probes, settings_.probe_timeout);
    lock.lock();
    const auto answered_at = [&](const std::string& address) {
      for (std::size_t i = 0; i < probes.size(); ++i)
        if (probes[i].address == address) return bool(answered[i]);
      return true;
    };
    for (const Pending& p : pending) {
      const auto it = subjects_.find(p.subject);
      if (it == subjects_.end() || it->second.id != p.id || it->second.fired || it->second.op != p.op) continue;
      if (p.subject->busy_since.load(std::memory_order_acquire) != p.op) continue;  // it ended meanwhile
      State& state = it->second;
      std::vector<std::size_t> lost;
      for (std::size_t h = 0; h < p.subject->hosts.size(); ++h) {
        if (answered_at(p.subject->hosts[h].probe.address))
          state.failures[h] = 0;
        else if (++state.failures[h] >= settings_.rounds)
          lost.push_back(h);
      }
      if (lost.empty()) continue;
      state.fired = true;
      try {
        if (p.subject->on_lost) p.subject->on_lost(lost);
      } catch (...) {  // the operation then ends at its timeout, as without the watch
      }
    }
  }
}

}  // namespace idist::gloo_backend
