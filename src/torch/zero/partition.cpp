// zero_partition: PyTorch's sorted-greedy assignment of parameters to ranks (see idist/torch/zero.hpp).
#include <algorithm>
#include <cstddef>
#include <numeric>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "idist/torch/zero.hpp"

namespace idist {

std::vector<int> zero_partition(std::span<const std::int64_t> numels, int ranks) {
  if (ranks < 1) throw ValueError(fmt::format("zero_partition: ranks should be at least 1, but given {}", ranks));
  for (std::size_t i = 0; i < numels.size(); ++i)
    if (numels[i] < 0)
      throw ValueError(fmt::format("zero_partition: numels[{}] is {}; expected a non-negative count", i, numels[i]));
  std::vector<std::size_t> order(numels.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  // Largest first; equal sizes keep their given order (Python's sorted(reverse=True) is stable).
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return numels[a] > numels[b]; });
  std::vector<std::int64_t> load(std::size_t(ranks), 0);
  std::vector<int> owner(numels.size());
  for (std::size_t i : order) {
    const auto lightest = std::min_element(load.begin(), load.end());  // the first of equal minima
    owner[i] = int(lightest - load.begin());
    *lightest += numels[i];
  }
  return owner;
}

}  // namespace idist
