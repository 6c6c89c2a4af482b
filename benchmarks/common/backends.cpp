#include "common/backends.hpp"

#include <cstring>

#include <fmt/core.h>

#include "idist/context.hpp"

namespace idist_bench {

std::vector<std::string> cpu_backends() {
  std::vector<std::string> out;
  for (const auto& b : idist::available_backends())
    if (b != "nccl") out.push_back(b);
  return out;
}

bool print_backends_if_asked(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--list-backends") == 0) {
      std::string line;
      for (const auto& b : cpu_backends()) line += (line.empty() ? "" : " ") + b;
      fmt::print("{}\n", line);
      return true;
    }
  }
  return false;
}

}  // namespace idist_bench
