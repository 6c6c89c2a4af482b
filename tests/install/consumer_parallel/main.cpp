// idist::Parallel in a single-backend build of idist (scripts/check-configurations.sh).
//   app serial      Parallel() runs the function here, world of 1
//   app mpi         under `mpirun -np 2`: Parallel("mpi") initializes from MPI, world of 2
//   app gloo        Parallel("gloo", {.nproc_per_node = 2}) spawns 2 workers
//   app nccl        Parallel() (no GPU is needed to link and run it serially)
// Each mode also checks that spawning a backend this build cannot spawn raises ValueError with the
// reason. Exits non-zero on any failed check.
#include <cstdio>
#include <optional>
#include <string>

#include <idist/idist.hpp>

namespace {
int failures = 0;
void check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "consumer_parallel: FAILED: %s\n", what.c_str());
    ++failures;
  }
}

// Runs on every rank: the sum of (rank + 1) over the world.
void training(int local_rank, int expected_world) {
  const int ws = idist::get_world_size();
  if (ws != expected_world || local_rank != idist::get_local_rank())
    throw idist::Error("world of " + std::to_string(ws) + " (local rank " + std::to_string(local_rank) +
                       "), expected " + std::to_string(expected_world));
  const int sum = idist::all_reduce(idist::get_rank() + 1);
  if (sum != ws * (ws + 1) / 2) throw idist::Error("all_reduce gave " + std::to_string(sum));
}

// `backend` with nproc_per_node must raise ValueError whose text contains `expected`.
void expect_spawn_refused(const std::string& backend, const std::string& expected) {
  try {
    idist::Parallel p(backend, {.nproc_per_node = 2});
    p.run(training, 2);
    check(false, "Parallel(\"" + backend + "\", nproc_per_node=2) was not refused");
  } catch (const idist::ValueError& e) {
    check(std::string(e.what()).find(expected) != std::string::npos,
          "the refusal of '" + backend + "' names '" + expected + "': " + e.what());
  }
}
}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "serial";
  try {
    bool has_gloo = false;
    for (const auto& b : idist::available_backends()) has_gloo = has_gloo || b == "gloo";
    check(has_gloo == bool(IDIST_HAVE_GLOO), "available_backends() agrees with IDIST_HAVE_GLOO");
    expect_spawn_refused("mpi", IDIST_HAVE_MPI ? "cannot be spawned" : "Unknown backend 'mpi'");
    if (!IDIST_HAVE_GLOO) expect_spawn_refused("gloo", "Unknown backend 'gloo'");

    if (mode == "serial" || mode == "nccl") {
      idist::Parallel p;
      p.run(training, 1);
    } else if (mode == "mpi") {
      idist::Parallel p("mpi");
      p.run(training, 2);
    } else if (mode == "gloo") {
      idist::Parallel p("gloo", {.nproc_per_node = 2});
      p.run(training, 2);
    } else {
      std::fprintf(stderr, "usage: app serial|mpi|gloo|nccl\n");
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer_parallel: exception: %s\n", e.what());
    return 2;
  }
  if (failures == 0) std::printf("consumer_parallel (%s): all checks passed\n", mode.c_str());
  return failures == 0 ? 0 : 1;
}
