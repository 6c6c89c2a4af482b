// Run on the emulated cluster (tests/cluster/*.sh): every rank checks where it sits. The scripts set
// IDIST_TEST_EXPECT_NNODES / IDIST_TEST_EXPECT_NPROC and IDIST_TEST_HOST_PREFIX (node k runs on host
// "<prefix><k+1>").
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "idist/idist.hpp"
#include "support/multirank.hpp"

namespace {

int expected(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : -1;
}

}  // namespace

TEST(ClusterLayout, RankLocalRankNodeRankAgree) {
  idist::show_config();  // rank 0's lines, the network interface among them, go to the test's log
  const int nnodes = expected("IDIST_TEST_EXPECT_NNODES");
  const int nproc = expected("IDIST_TEST_EXPECT_NPROC");
  ASSERT_GT(nnodes, 0) << "IDIST_TEST_EXPECT_NNODES is not set";
  ASSERT_GT(nproc, 0) << "IDIST_TEST_EXPECT_NPROC is not set";
  EXPECT_EQ(idist::get_world_size(), nnodes * nproc);
  EXPECT_EQ(idist::get_nnodes(), nnodes);
  EXPECT_EQ(idist::get_nproc_per_node(), nproc);
  EXPECT_EQ(idist::get_rank(), idist::get_node_rank() * nproc + idist::get_local_rank());
  EXPECT_LT(idist::get_local_rank(), nproc);
  EXPECT_LT(idist::get_node_rank(), nnodes);
}

TEST(ClusterLayout, HostnamesFollowNodeRanks) {
  const std::vector<std::string> hosts = idist::all_gather(std::string_view(idist::hostname()));
  const std::vector<int> nodes = idist::all_gather(idist::get_node_rank());
  ASSERT_EQ(hosts.size(), std::size_t(idist::get_world_size()));
  for (std::size_t a = 0; a < hosts.size(); ++a)
    for (std::size_t b = 0; b < hosts.size(); ++b)
      EXPECT_EQ(hosts[a] == hosts[b], nodes[a] == nodes[b])
          << "ranks " << a << " and " << b << ": hosts " << hosts[a] << ", " << hosts[b] << "; nodes " << nodes[a]
          << ", " << nodes[b];
  if (const char* prefix = std::getenv("IDIST_TEST_HOST_PREFIX"); prefix && *prefix)
    EXPECT_EQ(idist::hostname(), prefix + std::to_string(idist::get_node_rank() + 1));
}

TEST(ClusterLayout, TransportAvoidsTheLoopbackAcrossHosts) {
  const auto where = idist::current_model().network_interface();
  if (idist::backend() == "mpi") {
    EXPECT_FALSE(where) << "Open MPI selects its own transports";
    return;
  }
  ASSERT_TRUE(where);
  // "<interface> <address> (<why>)": across hosts, every rank listens on its cluster address.
  const std::size_t space = where->find(' ');
  const std::string address = where->substr(space + 1, where->find(' ', space + 1) - space - 1);
  if (idist::get_nnodes() > 1) EXPECT_EQ(address.rfind("198.18.0.", 0), 0u) << *where;
}
