// A real desynchronised job for the flight recorder and idist_trace: 3 matching all_reduces, then
//   diverge: the last rank broadcasts while the others all-reduce (every rank times out and dumps);
//   missing: the last rank stops issuing collectives (the others time out, naming it at INFO).
// Each rank prints "rank R: <outcome>". Backend from IDIST_TEST_BACKEND (gloo: IDIST_TEST_SPAWN
// workers; mpi: under mpirun); IDIST_DISTRIBUTED_DEBUG and IDIST_TRACE_DIR come from the environment.
//
//   idist_trace_scenario <diverge|missing> [timeout_ms]
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "idist/idist.hpp"
#include "support/free_port.hpp"

namespace {

void scenario(const std::string& name, std::chrono::milliseconds timeout) {
  const bool last = idist::get_rank() == idist::get_world_size() - 1;
  std::vector<float> v(4, 1.0f);
  std::string outcome = "returned";
  try {
    for (int i = 0; i < 3; ++i) idist::all_reduce(v);
    if (name == "diverge") {
      last ? idist::broadcast(v, 0) : idist::all_reduce(v);
    } else if (last) {
      std::this_thread::sleep_for(2 * timeout + std::chrono::seconds(3));  // "stuck" outside idist
    } else {
      idist::all_reduce(v);
    }
  } catch (const idist::Error& e) {
    outcome = std::string("raised: ") + e.what();
  }
  std::printf("rank %d: %s\n", idist::get_rank(), outcome.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "diverge";
  const std::chrono::milliseconds timeout(argc > 2 ? std::atoi(argv[2]) : 2000);
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
          backend, [name, timeout](int) { scenario(name, timeout); }, opts);
      return 0;
#endif
    }
    idist::InitOptions opts;
    opts.timeout = timeout;
    idist::initialize(backend, opts);
    scenario(name, timeout);
    idist::finalize();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
