// All-reduce bandwidth sweep of the nccl backend: idist::all_reduce_async on device memory (float32,
// Sum), sizes doubling from --min-bytes to --max-bytes. One process per GPU; ranks from the
// environment (RANK / LOCAL_RANK / WORLD_SIZE, mpirun, ...). Rank 0 prints one row per size:
//   bytes, elements, time per all-reduce (us, max over ranks), algbw and busbw (GB/s, 10^9 bytes),
//   #wrong (elements that differ from the expected sum after the timed loop).
// busbw = algbw * 2 (n - 1) / n, the factor nccl-tests uses for all-reduce.
// A check of the GPU script (tests/gpu/run.sh), not a benchmark of record: benchmarks/ has those.
//
// --count-devices prints the number of CUDA devices this process sees (0 without a GPU) and exits.
// Exit status: 0 on success, 1 when a result was wrong, 77 when no CUDA device is visible.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "idist/idist.hpp"

namespace {

struct Options {
  std::size_t min_bytes = 8;
  std::size_t max_bytes = std::size_t(256) << 20;
  int warmup = 5;
  int iters = 20;
};

std::size_t parse_size(std::string_view arg, std::string_view flag) {
  const std::string s(arg);
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  std::size_t mult = 1;
  if (end && *end) {
    const std::string_view unit(end);
    if (unit == "K" || unit == "KiB")
      mult = std::size_t(1) << 10;
    else if (unit == "M" || unit == "MiB")
      mult = std::size_t(1) << 20;
    else if (unit == "G" || unit == "GiB")
      mult = std::size_t(1) << 30;
    else {
      std::fprintf(stderr, "%.*s: expected a size such as 8, 64K, 256M or 1G, got '%s'\n", int(flag.size()),
                   flag.data(), s.c_str());
      std::exit(2);
    }
  }
  return std::size_t(v) * mult;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::string_view {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--count-devices") {
      int n = 0;
      if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
      std::printf("%d\n", n);
      std::exit(0);
    } else if (a == "--min-bytes")
      o.min_bytes = parse_size(value(), a);
    else if (a == "--max-bytes")
      o.max_bytes = parse_size(value(), a);
    else if (a == "--warmup")
      o.warmup = std::atoi(std::string(value()).c_str());
    else if (a == "--iters")
      o.iters = std::max(1, std::atoi(std::string(value()).c_str()));
    else {
      std::fprintf(stderr, "usage: %s [--min-bytes N] [--max-bytes N] [--warmup N] [--iters N] | --count-devices\n",
                   argv[0]);
      std::exit(a == "--help" ? 0 : 2);
    }
  }
  o.min_bytes = std::max<std::size_t>(o.min_bytes, sizeof(float));
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("allreduce_bw: skipped, no CUDA device is visible\n");
    return 77;
  }
  idist::initialize("nccl", idist::InitOptions{.timeout = std::chrono::minutes(2)});
  const int n = idist::get_world_size();
  const int rank = idist::get_rank();
  const std::size_t max_elems = opt.max_bytes / sizeof(float);
  float* buf = nullptr;
  if (cudaMalloc(&buf, max_elems * sizeof(float)) != cudaSuccess) {
    std::fprintf(stderr, "cudaMalloc of %zu bytes failed\n", opt.max_bytes);
    return 1;
  }
  if (rank == 0) {
    std::printf("# idist nccl all_reduce (float32, sum), %d rank(s), warmup %d, iters %d\n", n, opt.warmup, opt.iters);
    std::printf("%12s %12s %12s %10s %10s %7s\n", "bytes", "elements", "time_us", "algbw_GBs", "busbw_GBs", "#wrong");
  }
  long long wrong_total = 0;
  std::vector<float> host;
  for (std::size_t bytes = opt.min_bytes; bytes <= opt.max_bytes; bytes *= 2) {
    const std::size_t count = bytes / sizeof(float);
    const std::span<float> data(buf, count);
    // Values 0 so that repeated sums stay exact; the check below uses a fresh fill.
    cudaMemset(buf, 0, count * sizeof(float));
    for (int i = 0; i < opt.warmup; ++i) idist::all_reduce(data);
    idist::barrier();
    const auto start = std::chrono::steady_clock::now();
    std::vector<idist::Work> works;
    works.reserve(std::size_t(opt.iters));
    for (int i = 0; i < opt.iters; ++i) works.push_back(idist::all_reduce_async(data));
    for (auto& w : works) w.wait();
    const double local_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / opt.iters;
    const double us = idist::all_reduce(local_us, idist::ReduceOp::Max);
    // Correctness: rank r contributes r + 1 everywhere; the sum is n (n + 1) / 2.
    host.assign(count, float(rank + 1));
    cudaMemcpy(buf, host.data(), count * sizeof(float), cudaMemcpyHostToDevice);
    idist::all_reduce(data);
    cudaMemcpy(host.data(), buf, count * sizeof(float), cudaMemcpyDeviceToHost);
    const float expected = float(n * (n + 1) / 2);
    const long long wrong = std::count_if(host.begin(), host.end(), [&](float v) { return v != expected; });
    const long long wrong_all = idist::all_reduce(wrong);
    wrong_total += wrong_all;
    if (rank == 0) {
      const double algbw = double(bytes) / (us * 1e-6) / 1e9;
      const double busbw = algbw * 2.0 * double(n - 1) / double(n);
      std::printf("%12zu %12zu %12.2f %10.2f %10.2f %7lld\n", bytes, count, us, algbw, busbw, wrong_all);
      std::fflush(stdout);
    }
  }
  cudaFree(buf);
  idist::finalize();
  return wrong_total == 0 ? 0 : 1;
}
