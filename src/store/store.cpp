#include "store/store.hpp"

#include <charconv>

#include <fmt/format.h>

#include "idist/error.hpp"

namespace idist::store {

void Store::set_string(const std::string& key, std::string_view value) {
  set(key, std::vector<char>(value.begin(), value.end()));
}

std::string Store::get_string(const std::string& key) {
  const auto v = get(key);
  return std::string(v.begin(), v.end());
}

void validate_key(const std::string& key, const std::string& where) {
  if (key.empty()) throw ValueError(fmt::format("{}: key should be a non-empty string, got ''", where));
  if (key.size() > kMaxKeyBytes)
    throw ValueError(fmt::format("{}: key '{}...' is {} bytes, more than the limit of {} bytes", where,
                                 key.substr(0, 32), key.size(), kMaxKeyBytes));
}

void validate_value(const std::string& key, std::size_t value_size, const std::string& where) {
  if (value_size > kMaxValueBytes)
    throw ValueError(fmt::format("{}: value of key '{}' is {} bytes, more than the limit of {} bytes", where, key,
                                 value_size, kMaxValueBytes));
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
