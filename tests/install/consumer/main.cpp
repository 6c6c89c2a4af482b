// Consumer of an installed idist: checks a few calls and exits non-zero on any mismatch.
//   app                      serial checks
//   app mpi <world size>     the same under mpirun, on the mpi backend
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <idist/idist.hpp>

namespace {
int failures = 0;
void check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "consumer: FAILED: %s\n", what.c_str());
    ++failures;
  }
}
}  // namespace

int main(int argc, char** argv) {
  const std::string backend = argc > 1 ? argv[1] : "serial";
  const int expected_world = argc > 2 ? std::atoi(argv[2]) : 1;
  int rank = 0;
  try {
    check(std::string(IDIST_VERSION).size() >= 5, "IDIST_VERSION");
    const auto backends = idist::available_backends();
    bool has_mpi = false;
    for (const auto& b : backends) has_mpi = has_mpi || b == "mpi";
    check(has_mpi == bool(IDIST_HAVE_MPI), "available_backends() agrees with IDIST_HAVE_MPI");
    check(idist::parse_reduce_op("MAX") == idist::ReduceOp::Max, "parse_reduce_op(\"MAX\")");
    try {
      idist::initialize("no-such-backend");
      check(false, "initialize(\"no-such-backend\") did not throw");
    } catch (const idist::ValueError&) {
    }

    if (backend != "serial") idist::initialize(backend);
    rank = idist::get_rank();
    const int ws = idist::get_world_size();
    check(ws == expected_world, "get_world_size() == " + std::to_string(expected_world));
    // ignite's _NativeDistModel.name is "native-dist" for every torch.distributed backend.
    check(idist::model_name() == (backend == "serial" ? "serial" : "native-dist"), "model_name()");
    check(idist::all_reduce(rank + 1) == ws * (ws + 1) / 2, "all_reduce(rank + 1)");
    check(idist::all_reduce(double(rank), idist::ReduceOp::Max) == double(ws - 1), "all_reduce(rank, MAX)");
    const auto names = idist::all_gather(std::string_view(rank == 0 ? "abc" : "test-test"));
    check(names.size() == std::size_t(ws) && names[0] == "abc" && (ws == 1 || names[1] == "test-test"),
          "all_gather of strings");
    check(idist::broadcast(std::string(rank == 0 ? "from rank 0" : ""), 0) == "from rank 0", "broadcast of a string");
    std::vector<float> v{float(rank), 1.0f};
    idist::all_reduce(v);
    check(v[1] == float(ws), "all_reduce of a vector");
    idist::barrier();
    if (backend != "serial") idist::finalize();
    check(idist::model_name() == "serial", "serial after finalize()");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer: exception: %s\n", e.what());
    return 2;
  }
  if (failures == 0) std::printf("consumer: rank %d: all checks passed\n", rank);
  return failures == 0 ? 0 : 1;
}
