// One case of the mismatch matrix, run in any debug mode: the last rank issues a different collective
// from the others. Each rank prints what happened ("returned" or "raised <type>: <message>") and
// exits 0; a rank killed by a signal fails the launch (spawn's SpawnError, mpirun's exit status).
//
//   idist_mismatch_case <case> [timeout_ms]
// Backend from IDIST_TEST_BACKEND; gloo starts IDIST_TEST_SPAWN workers itself, mpi runs under mpirun.
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "idist/idist.hpp"
#include "support/free_port.hpp"

namespace {

bool odd_one() { return idist::get_rank() == idist::get_world_size() - 1; }

void run_case(const std::string& name) {
  std::vector<float> f4(4, 1.0f), f8(8, 1.0f), out(4 * std::size_t(idist::get_world_size()));
  std::vector<double> d4(4, 1.0);
  if (name == "length")
    odd_one() ? idist::all_reduce(f8) : idist::all_reduce(f4);
  else if (name == "dtype")
    odd_one() ? idist::all_reduce(d4) : idist::all_reduce(f4);
  else if (name == "same_bytes")
    odd_one() ? idist::all_reduce(d4) : idist::all_reduce(f8);
  else if (name == "reduce_op")
    idist::all_reduce(f4, odd_one() ? "MAX" : "SUM");
  else if (name == "broadcast_root")
    idist::broadcast(f4, odd_one() ? 1 : 0);
  else if (name == "all_reduce_vs_broadcast")
    odd_one() ? idist::broadcast(f4, 0) : idist::all_reduce(f4);
  else if (name == "all_gather_vs_all_reduce")
    odd_one() ? idist::all_reduce(f4) : idist::all_gather_into(std::span<const float>(f4), std::span<float>(out));
  else
    throw idist::ValueError("unknown case '" + name + "'");
}

// Runs the case on this initialized rank and reports; never throws.
void report(const std::string& name) {
  std::string what;
  try {
    run_case(name);
    what = "returned";
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
