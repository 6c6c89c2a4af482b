// All-reduce bandwidth sweep of the nccl backend: idist::all_reduce_async on device memory (float32,
// Sum), sizes doubling from --min-bytes to --max-bytes. One process per GPU; ranks from the
// environment (RANK / LOCAL_RANK / WORLD_SIZE, mpirun, ...). Rank 0 prints one row per size:
//   bytes, elements, time per all-reduce (us, max over ranks), algbw and busbw (GB/s, 10^9 bytes),
//   #wrong (elements that differ from the expected sum after the timed loop).
// busbw = algbw * 2 (n - 1) / n, the factor nccl-tests uses for all-reduce.
//
// --compare-raw: per-call latency instead, the blocking idist::all_reduce against ncclAllReduce +
// cudaStreamSynchronize on a communicator and stream of the tool's own (its unique id broadcast
// through idist), calls alternating one by one; rank 0 prints the p50 of each (us, max over ranks of
// the per-rank p50) and their ratio: what idist's front door, work object and watchdog cost a call.
// A third column, `ordered`, is the raw call with the stream ordering idist (like c10d) provides: an
// event on the caller's stream that the communication stream waits for, an end event polled by the
// host, and the caller's stream made to wait for it; events created once. idist / ordered is then
// idist's own cost beyond the CUDA calls that ordering needs.
// A check of the GPU script (tests/gpu/run.sh), not a benchmark of record: benchmarks/ has those.
//
// --count-devices prints the number of CUDA devices this process sees (0 without a GPU) and exits.
// Exit status: 0 on success, 1 when a result was wrong, 77 when no CUDA device is visible.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
  bool compare_raw = false;
  int samples = 200;
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
    else if (a == "--compare-raw")
      o.compare_raw = true;
    else if (a == "--samples")
      o.samples = std::max(1, std::atoi(std::string(value()).c_str()));
    else {
      std::fprintf(stderr,
                   "usage: %s [--min-bytes N] [--max-bytes N] [--warmup N] [--iters N] [--compare-raw [--samples N]] | "
                   "--count-devices\n",
                   argv[0]);
      std::exit(a == "--help" ? 0 : 2);
    }
  }
  o.min_bytes = std::max<std::size_t>(o.min_bytes, sizeof(float));
  return o;
}

#define CHECK_RAW(call)                                                                       \
  do {                                                                                        \
    if (auto rc_ = (call); rc_ != decltype(rc_)(0)) {                                         \
      std::fprintf(stderr, "%s failed (%d) at %s:%d\n", #call, int(rc_), __FILE__, __LINE__); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

// Correctness of one all-reduce of `count` floats at `buf`: rank r contributes r + 1 everywhere, so
// every element must become n (n + 1) / 2. Returns the wrong elements over all ranks.
long long wrong_elements(float* buf, std::size_t count) {
  const int n = idist::get_world_size();
  std::vector<float> host(count, float(idist::get_rank() + 1));
  cudaMemcpy(buf, host.data(), count * sizeof(float), cudaMemcpyHostToDevice);
  idist::all_reduce(std::span<float>(buf, count));
  cudaMemcpy(host.data(), buf, count * sizeof(float), cudaMemcpyDeviceToHost);
  const float expected = float(n * (n + 1) / 2);
  const long long wrong = std::count_if(host.begin(), host.end(), [&](float v) { return v != expected; });
  return idist::all_reduce(wrong);
}

double p50(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// The latency comparison (--compare-raw); returns the number of wrong elements seen.
long long compare_raw(const Options& opt, float* buf) {
  const int n = idist::get_world_size();
  const int rank = idist::get_rank();
  ncclUniqueId id{};
  if (rank == 0) CHECK_RAW(ncclGetUniqueId(&id));
  std::vector<std::uint8_t> id_bytes(sizeof(id));
  std::memcpy(id_bytes.data(), &id, sizeof(id));
  idist::broadcast(std::span<std::uint8_t>(id_bytes), 0);  // host memory: staged by the nccl backend
  std::memcpy(&id, id_bytes.data(), sizeof(id));
  ncclComm_t raw = nullptr;
  CHECK_RAW(ncclCommInitRank(&raw, n, id, rank));
  cudaStream_t stream = nullptr;
  CHECK_RAW(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  using clock = std::chrono::steady_clock;
  cudaEvent_t ready = nullptr, end = nullptr;
  CHECK_RAW(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  CHECK_RAW(cudaEventCreateWithFlags(&end, cudaEventDisableTiming));
  const auto ordered_all_reduce = [&](std::size_t count) {
    CHECK_RAW(cudaEventRecord(ready, nullptr));  // the caller's (default) stream
    CHECK_RAW(cudaStreamWaitEvent(stream, ready, 0));
    CHECK_RAW(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, raw, stream));
    CHECK_RAW(cudaEventRecord(end, stream));
    cudaError_t q;
    while ((q = cudaEventQuery(end)) == cudaErrorNotReady) {
    }
    CHECK_RAW(q);
    CHECK_RAW(cudaStreamWaitEvent(nullptr, end, 0));
  };
  if (rank == 0) {
    // What the CUDA calls on idist's path cost one by one (p50 over samples), to read the table with.
    const auto cost = [&](const char* what, auto&& call) {
      std::vector<double> t;
      for (int i = 0; i < opt.samples; ++i) {
        const auto a = clock::now();
        call();
        t.push_back(std::chrono::duration<double, std::micro>(clock::now() - a).count());
      }
      std::printf("# %-46s %8.3f us\n", what, p50(t));
    };
    cost("cudaEventRecord", [&] { CHECK_RAW(cudaEventRecord(ready, nullptr)); });
    cost("cudaStreamWaitEvent", [&] { CHECK_RAW(cudaStreamWaitEvent(stream, ready, 0)); });
    cost("cudaEventQuery (fired)", [&] { CHECK_RAW(cudaEventQuery(ready)); });
    cost("cudaEventCreateWithFlags + cudaEventDestroy", [&] {
      cudaEvent_t e = nullptr;
      CHECK_RAW(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      CHECK_RAW(cudaEventDestroy(e));
    });
    cost("cudaPointerGetAttributes", [&] {
      cudaPointerAttributes attr{};
      CHECK_RAW(cudaPointerGetAttributes(&attr, buf));
    });
    cost("ncclAllReduce (8 B, enqueue only)",
         [&] { CHECK_RAW(ncclAllReduce(buf, buf, 2, ncclFloat32, ncclSum, raw, stream)); });
    CHECK_RAW(cudaStreamSynchronize(stream));
    cost("cudaStreamSynchronize (idle stream)", [&] { CHECK_RAW(cudaStreamSynchronize(stream)); });
  }
  if (rank == 0) {
    std::printf(
        "# blocking all_reduce (float32, sum), %d rank(s): idist::all_reduce against ncclAllReduce + "
        "cudaStreamSynchronize, alternating, %d samples each\n",
        n, opt.samples);
    std::printf("%12s %12s %12s %14s %8s %14s\n", "bytes", "idist_p50_us", "raw_p50_us", "ordered_p50_us", "ratio",
                "ratio_ordered");
  }
  long long wrong_total = 0;
  const auto us = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double, std::micro>(b - a).count();
  };
  for (std::size_t bytes = opt.min_bytes; bytes <= opt.max_bytes; bytes *= 2) {
    const std::size_t count = bytes / sizeof(float);
    const std::span<float> data(buf, count);
    CHECK_RAW(cudaMemset(buf, 0, count * sizeof(float)));
    CHECK_RAW(cudaDeviceSynchronize());
    for (int i = 0; i < opt.warmup; ++i) {
      idist::all_reduce(data);
      CHECK_RAW(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, raw, stream));
      CHECK_RAW(cudaStreamSynchronize(stream));
    }
    for (int i = 0; i < opt.warmup; ++i) ordered_all_reduce(count);
    std::vector<double> ours, theirs, ordered;
    for (int i = 0; i < opt.samples; ++i) {
      const auto t0 = clock::now();
      idist::all_reduce(data);
      const auto t1 = clock::now();
      CHECK_RAW(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, raw, stream));
      CHECK_RAW(cudaStreamSynchronize(stream));
      const auto t2 = clock::now();
      ordered_all_reduce(count);
      const auto t3 = clock::now();
      ours.push_back(us(t0, t1));
      theirs.push_back(us(t1, t2));
      ordered.push_back(us(t2, t3));
    }
    const double a = idist::all_reduce(p50(ours), idist::ReduceOp::Max);
    const double b = idist::all_reduce(p50(theirs), idist::ReduceOp::Max);
    const double c = idist::all_reduce(p50(ordered), idist::ReduceOp::Max);
    const long long wrong_all = wrong_elements(buf, count);
    wrong_total += wrong_all;
    if (rank == 0) {
      std::printf("%12zu %12.2f %12.2f %14.2f %8.3f %14.3f%s\n", bytes, a, b, c, a / b, a / c,
                  wrong_all ? "  WRONG RESULT" : "");
      std::fflush(stdout);
    }
  }
  CHECK_RAW(cudaEventDestroy(ready));
  CHECK_RAW(cudaEventDestroy(end));
  CHECK_RAW(cudaStreamDestroy(stream));
  CHECK_RAW(ncclCommDestroy(raw));
  return wrong_total;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("allreduce_bw: skipped, no CUDA device is visible\n");
    return 77;
  }
  idist::InitOptions init;
  init.timeout = std::chrono::minutes(2);
  idist::initialize("nccl", init);
  const int n = idist::get_world_size();
  const int rank = idist::get_rank();
  const std::size_t max_elems = opt.max_bytes / sizeof(float);
  float* buf = nullptr;
  if (cudaMalloc(&buf, max_elems * sizeof(float)) != cudaSuccess) {
    std::fprintf(stderr, "cudaMalloc of %zu bytes failed\n", opt.max_bytes);
    return 1;
  }
  if (opt.compare_raw) {
    const long long wrong = compare_raw(opt, buf);
    cudaFree(buf);
    idist::finalize();
    return wrong == 0 ? 0 : 1;
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
    const long long wrong_all = wrong_elements(buf, count);
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
