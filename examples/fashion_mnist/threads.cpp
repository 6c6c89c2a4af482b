#include "threads.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace fashion_mnist {

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  // No affinity information: fall back to the machine's count.
  return std::max(1, int(std::thread::hardware_concurrency()));
}

std::optional<int> default_intra_op_threads(int ranks_on_node) {
  if (const char* env = std::getenv("OMP_NUM_THREADS"); env != nullptr && *env != '\0') return std::nullopt;
  return std::max(1, available_cores() / std::max(1, ranks_on_node));
}

}  // namespace fashion_mnist
