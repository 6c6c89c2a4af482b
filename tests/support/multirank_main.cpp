// gtest main for multi-rank tests: initializes the backend named by IDIST_TEST_BACKEND with a short
// timeout (so a broken test fails instead of hanging), runs the tests on every rank, finalizes.
// Rank 0 prints the full report; other ranks print only their failures, prefixed with their rank.
//
// Launch modes:
// - the binary was started once per rank (mpirun, a torchrun-style launcher): each process
//   initializes the backend itself, ranks from the environment;
// - IDIST_TEST_SPAWN=N (gloo, nccl): the binary is started once and runs its tests in N workers
//   started by idist::spawn; it exits non-zero when a worker fails or any rank has a failed test.
// - IDIST_TEST_NNODES=N with IDIST_TEST_NODE_RANK, IDIST_TEST_NPROC_PER_NODE, IDIST_TEST_MASTER_ADDR and
//   IDIST_TEST_MASTER_PORT (gloo, nccl): ignite's multi-node form, idist::Parallel(backend, {nproc_per_node,
//   nnodes, node_rank, master_addr, master_port}); the same command runs on every node (the emulated
//   cluster's tests).
// IDIST_TEST_INIT_METHOD overrides the init method ("env://" by default); in it, "{port}" becomes a
// free TCP port and "{tmpdir}" a fresh temporary directory.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "idist/idist.hpp"
#include "support/free_port.hpp"
#include "support/multirank.hpp"
#include "support/rank_report.hpp"

namespace idist::test {

std::string backend_under_test() {
  const char* b = std::getenv("IDIST_TEST_BACKEND");
  return b && *b ? b : "serial";
}

namespace {

constexpr std::chrono::seconds kTestTimeout{60};

// Runs the tests on this (already initialized) rank; only rank 0 keeps gtest's full report.
int run_tests_on_this_rank() {
  report_only_failures_on_nonzero_rank(idist::get_rank());
  return RUN_ALL_TESTS();
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// IDIST_TEST_INIT_METHOD with its placeholders filled, or "env://".
std::string init_method_under_test() {
  const char* m = std::getenv("IDIST_TEST_INIT_METHOD");
  std::string method = m && *m ? m : "env://";
  if (method.find("{port}") != std::string::npos) replace_all(method, "{port}", std::to_string(free_tcp_port()));
  if (method.find("{tmpdir}") != std::string::npos) {
    char dir[] = "/tmp/idist-test-XXXXXX";
    if (!::mkdtemp(dir)) std::perror("mkdtemp");
    replace_all(method, "{tmpdir}", dir);
  }
  return method;
}

int spawn_and_run(const std::string& backend, int nproc) {
  idist::SpawnOptions opts;
  opts.nproc_per_node = nproc;
  opts.master_port = free_tcp_port();
  opts.init_method = init_method_under_test();
  opts.timeout = kTestTimeout;
  try {
    idist::spawn(
        backend,
        [](int) {
          if (run_tests_on_this_rank() != 0)
            throw idist::Error("rank " + std::to_string(idist::get_rank()) + " had failed tests");
        },
        opts);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// ignite's multi-node Parallel: this node's workers join the world served by node 0's master.
int parallel_multi_node(const std::string& backend) {
  idist::ParallelOptions opts;
  opts.nproc_per_node = env_int("IDIST_TEST_NPROC_PER_NODE", 1);
  opts.nnodes = env_int("IDIST_TEST_NNODES", 1);
  opts.node_rank = env_int("IDIST_TEST_NODE_RANK", 0);
  const char* addr = std::getenv("IDIST_TEST_MASTER_ADDR");
  opts.master_addr = addr && *addr ? addr : "127.0.0.1";
  opts.master_port = env_int("IDIST_TEST_MASTER_PORT", 2222);
  opts.timeout = kTestTimeout;
  try {
    idist::Parallel parallel(backend, opts);
    parallel.run([](int) {
      if (run_tests_on_this_rank() != 0)
        throw idist::Error("rank " + std::to_string(idist::get_rank()) + " had failed tests");
    });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace

}  // namespace idist::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const std::string backend = idist::test::backend_under_test();
  if (const char* n = std::getenv("IDIST_TEST_NNODES"); n && *n && backend != "serial") {
#if __has_include("idist/launcher.hpp") && (IDIST_HAVE_GLOO || IDIST_HAVE_NCCL)
    return idist::test::parallel_multi_node(backend);
#else
    std::fprintf(stderr, "IDIST_TEST_NNODES needs the launcher (a gloo or nccl build)\n");
    return 1;
#endif
  }
  if (const char* n = std::getenv("IDIST_TEST_SPAWN"); n && *n && backend != "serial") {
#if __has_include("idist/launcher.hpp") && (IDIST_HAVE_GLOO || IDIST_HAVE_NCCL)
    return idist::test::spawn_and_run(backend, std::atoi(n));
#else
    std::fprintf(stderr, "IDIST_TEST_SPAWN needs the launcher (a gloo or nccl build)\n");
    return 1;
#endif
  }
  if (backend != "serial") {
    idist::InitOptions opts;
    opts.timeout = idist::test::kTestTimeout;
    opts.init_method = idist::test::init_method_under_test();
    idist::initialize(backend, opts);
  }
  const int rc = idist::test::run_tests_on_this_rank();
  idist::finalize();
  return rc;
}
