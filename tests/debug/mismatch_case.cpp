// One case of the mismatch matrix, run in any debug mode: the last rank issues a different collective
// from the others, or the same one with another shape (the collectives ignite does not have:
// mismatch_beyond_ignite.cpp). Each rank prints what happened ("returned" or "raised <type>: <message>") and
// exits 0; a rank killed by a signal fails the launch (spawn's SpawnError, mpirun's exit status).
// Every rank contributes rank + 1, so a rank that returned also says whether its buffer holds what the
// collective of the other ranks (the agreed one) would have given it ("returned the agreed result" or
// "returned another result: ..."): where nothing raised, the mismatch must show in the data.
//
//   idist_mismatch_case <case> [timeout_ms]
// Backend from IDIST_TEST_BACKEND; gloo starts IDIST_TEST_SPAWN workers itself, mpi runs under mpirun.
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "debug/mismatch_case.hpp"
#include "idist/idist.hpp"
#include "support/free_port.hpp"

namespace {

bool odd_one() { return idist::get_rank() == idist::get_world_size() - 1; }

using idist::test::Outcome;

template <class T>
std::vector<double> first4(const std::vector<T>& v) {
  return {v.begin(), v.begin() + 4};
}

// Runs the case; returns the first 4 values of the buffer this rank got and those the agreed collective
// would have given it.
Outcome run_case(const std::string& name) {
  const int n = idist::get_world_size();
  const float mine = float(idist::get_rank() + 1);
  std::vector<float> f4(4, mine), f8(8, mine), out(4 * std::size_t(n));
  std::vector<double> d4(4, mine);
  const double sum = n * (n + 1) / 2.0;  // an agreed SUM of every rank's rank + 1
  const bool odd = odd_one();
  if (name == "length") {
    odd ? idist::all_reduce(f8) : idist::all_reduce(f4);
    return {odd ? first4(f8) : first4(f4), std::vector<double>(4, sum)};
  }
  if (name == "dtype") {
    odd ? idist::all_reduce(d4) : idist::all_reduce(f4);
    return {odd ? first4(d4) : first4(f4), std::vector<double>(4, sum)};
  }
  if (name == "same_bytes") {
    odd ? idist::all_reduce(d4) : idist::all_reduce(f8);
    return {odd ? first4(d4) : first4(f8), std::vector<double>(4, sum)};
  }
  if (name == "reduce_op") {
    idist::all_reduce(f4, odd ? "MAX" : "SUM");
    return {first4(f4), std::vector<double>(4, sum)};
  }
  if (name == "broadcast_root") {
    // The last rank names itself as the root: as a root it keeps its own value, so MPI, which cannot
    // see a root mismatch, shows it in the data (a root it is not could pass rank 0's value on).
    idist::broadcast(f4, odd ? n - 1 : 0);
    return {first4(f4), std::vector<double>(4, 1.0)};  // rank 0's value
  }
  if (name == "all_reduce_vs_broadcast") {
    odd ? idist::broadcast(f4, 0) : idist::all_reduce(f4);
    return {first4(f4), std::vector<double>(4, sum)};
  }
  if (name == "all_gather_vs_all_reduce") {
    odd ? idist::all_reduce(f4) : idist::all_gather_into(std::span<const float>(f4), std::span<float>(out));
    return {odd ? first4(f4) : first4(out), std::vector<double>(4, 1.0)};  // rank 0's block first
  }
  if (std::optional<Outcome> o = idist::test::run_beyond_ignite_case(name)) return *o;
  throw idist::ValueError("unknown case '" + name + "'");
}

// Runs the case on this initialized rank and reports; never throws.
void report(const std::string& name) {
  std::string what;
  try {
    const Outcome o = run_case(name);
    what = o.got == o.agreed
               ? std::string("returned the agreed result")
               : fmt::format("returned another result: {} {} {} {}", o.got[0], o.got[1], o.got[2], o.got[3]);
  } catch (const idist::DesyncError& e) {
    what = fmt::format("raised DesyncError: {}", e.what());
  } catch (const idist::TimeoutError& e) {
    what = fmt::format("raised TimeoutError: {}", e.what());
  } catch (const idist::BackendError& e) {
    what = fmt::format("raised BackendError: {}", e.what());
  } catch (const idist::Error& e) {
    what = fmt::format("raised Error: {}", e.what());
  }
  std::fprintf(stdout, "case %s rank %d: %s\n", name.c_str(), idist::get_rank(), what.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <case> [timeout_ms]\n", argv[0]);
    return 2;
  }
  const std::string name = argv[1];
  const std::chrono::milliseconds timeout(argc > 2 ? std::atoi(argv[2]) : 3000);
  const char* b = std::getenv("IDIST_TEST_BACKEND");
  const std::string backend = b && *b ? b : "gloo";
  try {
    if (const char* n = std::getenv("IDIST_TEST_SPAWN"); n && *n) {
#if __has_include("idist/launcher.hpp")
      idist::SpawnOptions opts;
      opts.nproc_per_node = std::atoi(n);
      opts.master_port = idist::test::free_tcp_port();
      opts.timeout = timeout;
      idist::spawn(
          backend, [name](int) { report(name); }, opts);
      return 0;
#endif
    }
    idist::InitOptions opts;
    opts.timeout = timeout;
    idist::initialize(backend, opts);
    report(name);
    idist::finalize();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "case %s: %s\n", name.c_str(), e.what());
    return 1;
  }
  return 0;
}
