// The nccl bootstrap's interface: without NCCL_SOCKET_IFNAME, rendezvous() exports the interface that
// routes to MASTER_ADDR (exact match, "=name") for NCCL's bootstrap, and restores the variable after.
// Two forked processes form a world of 2 through the TCP store; no GPU is needed.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "idist/config.hpp"
#include "nccl/rendezvous.hpp"

namespace {

int free_port() { return 20000 + int(::getpid() % 20000); }

// Runs rendezvous() as `rank` of 2 and checks the variable; 0 on success.
int run_rank(int rank, int port) {
  ::unsetenv("NCCL_SOCKET_IFNAME");
  idist::InitOptions opts;
  opts.rank = rank;
  opts.world_size = 2;
  opts.init_method = "tcp://127.0.0.1:" + std::to_string(port);
  opts.timeout = std::chrono::seconds(20);
  {
    auto rv = idist::nccl_backend::rendezvous(opts);
    const char* v = std::getenv("NCCL_SOCKET_IFNAME");
    if (!v || std::string(v) != "=lo") return 2;  // a one-node world whose master is local: the loopback
    if (!rv.interface || rv.interface->find("127.0.0.1") == std::string::npos) return 3;
  }
  return std::getenv("NCCL_SOCKET_IFNAME") ? 4 : 0;  // restored (unset) with the rendezvous
}

}  // namespace

TEST(NcclBootstrap, ExportsTheChosenInterfaceAndRestoresIt) {
  const int port = free_port();
  pid_t pids[2];
  for (int r = 0; r < 2; ++r) {
    pids[r] = ::fork();
    ASSERT_GE(pids[r], 0);
    if (pids[r] == 0) ::_exit(run_rank(r, port));
  }
  for (int r = 0; r < 2; ++r) {
    int status = 0;
    ASSERT_EQ(::waitpid(pids[r], &status, 0), pids[r]);
    ASSERT_TRUE(WIFEXITED(status)) << "rank " << r;
    EXPECT_EQ(WEXITSTATUS(status), 0) << "rank " << r
                                      << " (2: variable not exported, 3: no description, 4: not restored)";
  }
}

TEST(NcclBootstrap, AUserChoiceIsKept) {
  ::setenv("NCCL_SOCKET_IFNAME", "eth", 1);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    idist::InitOptions opts;
    opts.world_size = 1;
    opts.rank = 0;
    auto rv = idist::nccl_backend::rendezvous(opts);
    ::_exit(std::string(std::getenv("NCCL_SOCKET_IFNAME")) == "eth" && !rv.interface ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ::unsetenv("NCCL_SOCKET_IFNAME");
}
