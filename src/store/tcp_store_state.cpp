// The TCPStore server's key-value state (see tcp_store_state.hpp).
#include "store/tcp_store_state.hpp"

#include "store/store_join.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <utility>

#include <fmt/format.h>

namespace idist::store::detail {

namespace {

// Strict decimal parse of a counter value.
std::optional<std::int64_t> parse_i64(const std::vector<char>& v) {
  std::int64_t out = 0;
  const char* first = v.data();
  const char* last = v.data() + v.size();
  auto [ptr, ec] = std::from_chars(first, last, out);
  if (v.empty() || ec != std::errc() || ptr != last) return std::nullopt;
  return out;
}

std::vector<char> decimal(std::int64_t v) {
  const auto text = std::to_string(v);
  return std::vector<char>(text.begin(), text.end());
}

std::string reserved_message(const char* op, const std::string& key) {
  return fmt::format("{}: key '{}' is the store's own bookkeeping (prefix '{}'), which no client may change", op, key,
                     kReservedPrefix);
}

}  // namespace

KeyValueState::KeyValueState(int world_size) : world_size_(world_size) {
  if (world_size_ > 0) data_[kWorldSizeKey] = decimal(world_size_);
}

std::uint32_t KeyValueState::joined() const {
  const auto it = data_.find(kJoinCountKey);
  if (it == data_.end()) return 0;
  const auto v = parse_i64(it->second);
  return v && *v > 0 ? static_cast<std::uint32_t>(std::min<std::int64_t>(*v, std::numeric_limits<std::uint32_t>::max()))
                     : 0;
}

std::optional<std::string> KeyValueState::set(const std::string& key, std::vector<char> value) {
  if (is_reserved_key(key)) return reserved_message("set", key);
  store(key, std::move(value));
  return std::nullopt;
}

KeyValueState::Count KeyValueState::add(const std::string& key, std::int64_t delta) {
  if (delta != 0 && is_reserved_key(key)) return reserved_message("add", key);
  std::int64_t current = 0;
  if (auto it = data_.find(key); it != data_.end()) {
    const auto parsed = parse_i64(it->second);
    if (!parsed) return fmt::format("add: key '{}' holds a value that is not a decimal integer", key);
    current = *parsed;
  }
  std::int64_t result = 0;
  if (__builtin_add_overflow(current, delta, &result))
    return fmt::format("add: counter '{}' = {} + {} overflows int64", key, current, delta);
  // A read (delta 0) of a reserved key creates nothing: the server's bookkeeping stays its own.
  if (!is_reserved_key(key)) store(key, decimal(result));
  return result;
}

bool KeyValueState::all_present(const std::vector<std::string>& keys) const {
  return std::all_of(keys.begin(), keys.end(), [&](const auto& k) { return data_.count(k) > 0; });
}

std::shared_ptr<PendingWait> KeyValueState::wait(Op op, std::vector<std::string> keys, WaitListener* listener) {
  auto w = std::make_shared<PendingWait>();
  w->op = op;
  w->get_key = op == Op::Get ? keys.front() : std::string{};
  for (auto& k : keys)
    if (!data_.count(k)) w->missing.push_back(std::move(k));
  w->start = Clock::now();
  w->listener = listener;
  if (!w->missing.empty()) waiters_.push_back(w);
  return w;
}

void KeyValueState::cancel(const std::shared_ptr<PendingWait>& w) {
  w->listener = nullptr;
  waiters_.remove(w);
}

Writer KeyValueState::ok_reply(const PendingWait& w) const {
  Writer out;
  if (w.op == Op::Get) {
    const auto& value = data_.at(w.get_key);
    out.bytes(value.data(), value.size());
  }
  return out;
}

Writer KeyValueState::timeout_reply(const PendingWait& w, Clock::time_point now) const {
  Writer out;
  out.u64(static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(now - w.start).count()));
  out.u32(joined());
  out.u32(world_size());
  out.u32(static_cast<std::uint32_t>(w.missing.size()));
  const auto n = std::min(w.missing.size(), kMaxTimeoutReplyKeys);
  out.u32(static_cast<std::uint32_t>(n));
  for (std::size_t i = 0; i < n; ++i) out.str(w.missing[i]);
  return out;
}

void KeyValueState::store(const std::string& key, std::vector<char> value) {
  data_[key] = std::move(value);
  notify(key);
}

void KeyValueState::notify(const std::string& key) {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    auto w = *it;
    std::erase(w->missing, key);
    if (!w->missing.empty()) {
      ++it;
      continue;
    }
    it = waiters_.erase(it);
    if (WaitListener* l = std::exchange(w->listener, nullptr)) l->keys_present();
  }
}

}  // namespace idist::store::detail
