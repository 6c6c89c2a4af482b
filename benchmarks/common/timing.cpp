#include "common/timing.hpp"

#include <fstream>
#include <span>

#include <fmt/core.h>

#include "idist/collectives.hpp"

namespace idist_bench {

void max_over_ranks(std::vector<double>& samples) {
  if (idist::get_world_size() > 1 && !samples.empty())
    idist::all_reduce(std::span<double>(samples), idist::ReduceOp::Max);
}

std::string fixed(double v, int digits) { return fmt::format("{:.{}f}", v, digits); }

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  if (!(f >> a >> b >> c)) return "unknown";
  return a + " " + b + " " + c;
}

}  // namespace idist_bench
