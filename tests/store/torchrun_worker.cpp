// A worker for the real torchrun (tests/store/torchrun_test.sh): gloo through torchrun's rendezvous.
//
//   torchrun_worker ok <dir>        initialize, all-reduce, show_config; writes <dir>/rank<R>.txt
//   torchrun_worker fail <rank>     initialize, barrier; rank <rank> then raises an idist error (a broadcast
//                                   from a rank that does not exist) while the others wait to be stopped
//   torchrun_worker restart <dir>   attempt 0 (TORCHELASTIC_RESTART_COUNT=0): initialize, all-reduce, then
//                                   rank 1 fails; a later attempt: as "ok", and rank 0 checks that each
//                                   attempt's keys live under their own prefix of the agent's store
// Every mode runs under idist::elastic::record, so a failure lands in torchrun's error file.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include <fmt/format.h>

#define IDIST_NO_TORCH
#include <idist/idist.hpp>

#include "store/c10d/c10d_store.hpp"

namespace {
using namespace std::chrono_literals;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

void initialize() {
  idist::InitOptions opts;
  opts.timeout = 60s;
  idist::initialize("gloo", opts);
}

// The all-reduce every mode starts with: the world really formed.
void check_world() {
  const int n = idist::get_world_size();
  const int sum = idist::all_reduce(idist::get_rank() + 1);
  if (sum != n * (n + 1) / 2)
    throw idist::BackendError(fmt::format("all_reduce gave {}, expected {}", sum, n * (n + 1) / 2));
}

void report(const std::string& dir) {
  const auto line = fmt::format("rank {} world {} local {} nproc {} node {} nnodes {} restart {}\n", idist::get_rank(),
                                idist::get_world_size(), idist::get_local_rank(), idist::get_nproc_per_node(),
                                idist::get_node_rank(), idist::get_nnodes(), env_int("TORCHELASTIC_RESTART_COUNT", -1));
  std::ofstream(fmt::format("{}/rank{}.txt", dir, idist::get_rank())) << line;
  std::fputs(line.c_str(), stdout);
}

// Stopped by torchrun's agent once another worker failed; the bound keeps a broken test from hanging.
void wait_to_be_stopped() {
  std::this_thread::sleep_for(120s);
  throw idist::TimeoutError("torchrun_worker: the agent did not stop this worker within 120 s");
}

// Rank 0 of a later attempt: attempt 0's join verdict and this attempt's both exist, each under its own
// "/worker/attempt_<n>" prefix of the one agent store.
void check_attempt_prefixes() {
  idist::store::C10dStore agent(std::getenv("MASTER_ADDR"), env_int("MASTER_PORT", 0), 10s,
                                {.label = "torchrun agent store", .version = std::nullopt});
  const int attempt = env_int("TORCHELASTIC_RESTART_COUNT", 0);
  for (int a : {0, attempt}) {
    const auto key = fmt::format("/worker/attempt_{}/idist/init_0/idist/join/verdict", a);
    if (!agent.check({key})) throw idist::BackendError(fmt::format("no key '{}' on {}", key, agent.describe()));
    if (agent.get_string(key) != "ok") throw idist::BackendError(fmt::format("key '{}' is not 'ok'", key));
  }
  std::printf("attempt prefixes: attempt_0 and attempt_%d both joined\n", attempt);
}

int run(int argc, char** argv) {
  if (argc < 3) throw idist::ValueError("usage: torchrun_worker ok|fail|restart <dir or rank>");
  const std::string mode = argv[1];
  initialize();
  check_world();
  if (mode == "ok") {
    idist::show_config();
    report(argv[2]);
  } else if (mode == "fail") {
    idist::barrier();
    if (idist::get_rank() == std::atoi(argv[2])) idist::broadcast(1, idist::get_world_size());  // ValueError
    wait_to_be_stopped();
  } else if (mode == "restart") {
    if (env_int("TORCHELASTIC_RESTART_COUNT", 0) == 0) {
      if (idist::get_rank() == 1) throw idist::BackendError("torchrun_worker: rank 1 fails in attempt 0 on purpose");
      wait_to_be_stopped();
    }
    idist::show_config();
    report(argv[2]);
    if (idist::get_rank() == 0) check_attempt_prefixes();
  } else {
    throw idist::ValueError(fmt::format("torchrun_worker: unknown mode '{}'", mode));
  }
  idist::finalize();
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return idist::elastic::record([&] { return run(argc, argv); });
}
