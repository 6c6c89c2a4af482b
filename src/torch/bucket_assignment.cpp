// DDP's bucket assignment (see idist/torch/bucket_assignment.hpp).
#include "torch/bucket_assignment.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "idist/error.hpp"

namespace idist::detail {

std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<std::size_t>& bytes,
                                                     const std::vector<std::string>& keys, std::size_t first_cap,
                                                     std::size_t cap) {
  std::vector<std::size_t> order(bytes.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = order.size() - 1 - k;
  return assign_buckets_in_order(order, bytes, keys, first_cap, cap);
}

std::vector<std::vector<std::size_t>> assign_buckets_in_order(const std::vector<std::size_t>& order,
                                                              const std::vector<std::size_t>& bytes,
                                                              const std::vector<std::string>& keys,
                                                              std::size_t first_cap, std::size_t cap) {
  if (bytes.size() != keys.size())
    throw ValueError(fmt::format("assign_buckets: bytes has {} entries but keys has {}", bytes.size(), keys.size()));
  std::vector<bool> seen_index(bytes.size(), false);
  for (std::size_t k : order) {
    if (k >= bytes.size() || seen_index[k])
      throw ValueError(
          fmt::format("assign_buckets: the visiting order is not a permutation of the {} parameters", bytes.size()));
    seen_index[k] = true;
  }
  if (order.size() != bytes.size())
    throw ValueError(
        fmt::format("assign_buckets: the visiting order has {} entries, expected {}", order.size(), bytes.size()));
  struct Open {
    std::vector<std::size_t> params;
    std::size_t size = 0;
    std::size_t limit = 0;
    std::size_t first_visit = 0;
  };
  std::map<std::string, Open> open;
  std::vector<std::pair<std::size_t, std::vector<std::size_t>>> closed;  // (first visit, params)
  std::size_t visit = 0;
  for (std::size_t k : order) {
    auto [it, fresh] = open.try_emplace(keys[k]);
    Open& b = it->second;
    if (fresh) b.limit = first_cap;
    if (b.params.empty()) b.first_visit = visit;
    b.params.push_back(k);
    b.size += bytes[k];
    if (b.size >= b.limit) {
      closed.emplace_back(b.first_visit, std::move(b.params));
      b.params.clear();
      b.size = 0;
      b.limit = cap;
    }
    ++visit;
  }
  for (auto& [key, b] : open)
    if (!b.params.empty()) closed.emplace_back(b.first_visit, std::move(b.params));
  std::sort(closed.begin(), closed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::vector<std::size_t>> out;
  out.reserve(closed.size());
  for (auto& c : closed) out.push_back(std::move(c.second));
  return out;
}

}  // namespace idist::detail
