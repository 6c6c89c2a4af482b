#pragma once
// The compiled backends the benchmarks can run on (the host-memory ones: mpi, gloo).
#include <string>
#include <vector>

namespace idist_bench {

/// idist::available_backends() without nccl (the benchmarks measure host-memory collectives).
std::vector<std::string> cpu_backends();

/// When argv holds --list-backends: prints cpu_backends() space-separated and returns true (the
/// run scripts ask the binary what it was built with).
bool print_backends_if_asked(int argc, char** argv);

}  // namespace idist_bench
