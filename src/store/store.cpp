#include "store/store.hpp"

#include <charconv>

#include <fmt/format.h>

#include "idist/error.hpp"

namespace idist::store {

void Store::validate(std::span<const std::string> keys, std::size_t value_size) const {
  for (const auto& key : keys) {
    if (key.empty()) throw ValueError(fmt::format("{}: key should be a non-empty string, got ''", describe()));
    if (key.size() > kMaxKeyBytes)
      throw ValueError(fmt::format("{}: key '{}...' is {} bytes, more than the limit of {} bytes", describe(),
                                   key.substr(0, 32), key.size(), kMaxKeyBytes));
  }
  if (value_size > max_value_bytes())
    throw ValueError(fmt::format("{}: value of key '{}' is {} bytes, more than the limit of {} bytes", describe(),
                                 keys.front(), value_size, max_value_bytes()));
}

void Store::set(const std::string& key, const std::vector<char>& data) {
  validate({&key, 1}, data.size());
  do_set(key, data);
}

std::vector<char> Store::get(const std::string& key) {
  validate({&key, 1});
  return do_get(key);
}

std::int64_t Store::add(const std::string& key, std::int64_t delta) {
  validate({&key, 1});
  return do_add(key, delta);
}

bool Store::check(const std::vector<std::string>& keys) {
  validate(keys);
  return keys.empty() || do_check(keys);
}

void Store::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  validate(keys);
  if (timeout.count() < 0)
    throw ValueError(fmt::format("{}: wait timeout should be >= 0, got {} ms", describe(), timeout.count()));
  if (!keys.empty()) do_wait(keys, timeout);
}

void Store::set_string(const std::string& key, std::string_view value) {
  set(key, std::vector<char>(value.begin(), value.end()));
}

std::string Store::get_string(const std::string& key) {
  const auto v = get(key);
  return std::string(v.begin(), v.end());
}

std::int64_t parse_counter(const std::string& key, const std::vector<char>& value, const std::string& where) {
  std::int64_t out = 0;
  const char* first = value.data();
  const char* last = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(first, last, out);
  if (value.empty() || ec != std::errc() || ptr != last)
    throw ValueError(fmt::format("{}: add: key '{}' holds a value that is not a decimal integer", where, key));
  return out;
}

std::string quote_keys(const std::vector<std::string>& keys, std::size_t limit) {
  std::string out;
  for (std::size_t i = 0; i < keys.size() && i < limit; ++i) {
    if (i) out += ", ";
    out += fmt::format("'{}'", keys[i]);
  }
  if (keys.size() > limit) out += fmt::format(", ... ({} more)", keys.size() - limit);
  return out;
}

}  // namespace idist::store
