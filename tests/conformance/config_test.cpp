// The distributed configuration seen by every rank (ignite's _test_distrib_config / _sanity_check).
#include <algorithm>
#include <map>
#include <numeric>

#include "conformance/conformance.hpp"
#include "support/multirank.hpp"

namespace idist::conformance {
namespace {

// Fixtures: every test reports, on every rank, the ranks where it failed.
class Config : public Conformance {};

TEST_F(Config, BackendAndModelNameMatchTheBackendUnderTest) {
  const std::string expected = idist::test::backend_under_test();
  if (expected == "serial") {
    EXPECT_EQ(idist::backend(), std::nullopt);
    EXPECT_EQ(idist::model_name(), "serial");
    EXPECT_EQ(world(), 1);
  } else {
    EXPECT_EQ(idist::backend(), std::optional<std::string>(expected));
    // ignite/distributed/comp_models/native.py: _NativeDistModel.name is "native-dist" for nccl, gloo
    // and mpi alike (programs compare it); the backend tells them apart.
    EXPECT_EQ(idist::model_name(), "native-dist");
  }
}

// ignite/distributed/utils.py, model_name() returns the current model class's `name`, one of
// registered_computation_models (comp_models/__init__.py), whose available_backends holds backend().
TEST_F(Config, CurrentModelIsARegisteredComputationModel) {
  const auto models = idist::registered_computation_models();
  const auto it = std::find_if(models.begin(), models.end(),
                               [](const idist::ComputationModelInfo& m) { return m.name == idist::model_name(); });
  ASSERT_NE(it, models.end()) << idist::model_name() << " is not registered";
  if (const auto b = idist::backend())
    EXPECT_NE(std::find(it->backends.begin(), it->backends.end(), *b), it->backends.end()) << *b;
  else
    EXPECT_TRUE(it->backends.empty());
}

// ignite/distributed/utils.py, sync(): with a context alive (here the one initialize() made), the
// model stays that context's; idist keeps the very model, so sync() is no collective call.
TEST_F(Config, SyncKeepsTheCurrentModel) {
  const idist::ComputationModel* before = &idist::current_model();
  idist::sync();
  EXPECT_EQ(&idist::current_model(), before);
  idist::sync(/*temporary=*/true);
  EXPECT_EQ(&idist::current_model(), before);
  EXPECT_EQ(idist::all_reduce(1), world());
}

TEST_F(Config, SanityOfRanksAndNodes) {
  const int ws = world(), r = rank();
  EXPECT_GE(r, 0);
  EXPECT_LT(r, ws);
  EXPECT_GE(idist::get_local_rank(), 0);
  EXPECT_LT(idist::get_local_rank(), idist::get_nproc_per_node());
  EXPECT_GE(idist::get_node_rank(), 0);
  EXPECT_LT(idist::get_node_rank(), idist::get_nnodes());
  EXPECT_EQ(ws, idist::get_nnodes() * idist::get_nproc_per_node());
}

TEST_F(Config, RanksAreDistinctAndCoverTheWorld) {
  std::vector<int> ranks = idist::all_gather(rank());
  std::vector<int> expected(static_cast<std::size_t>(world()));
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(ranks, expected);  // all_gather is in rank order
  EXPECT_EQ(idist::all_gather(world()), std::vector<int>(std::size_t(world()), world()));
}

// Local ranks on each host are 0..k-1 and node ranks agree among the ranks of a host.
TEST_F(Config, LocalRanksAndNodesAgreeWithHostnames) {
  const std::vector<std::string> hosts = hostnames();
  const std::vector<int> local = idist::all_gather(idist::get_local_rank());
  const std::vector<int> node = idist::all_gather(idist::get_node_rank());
  const std::vector<int> nproc = idist::all_gather(idist::get_nproc_per_node());
  std::map<std::string, std::vector<int>> locals_by_host;
  std::map<std::string, int> node_of_host;
  for (std::size_t r = 0; r < hosts.size(); ++r) {
    locals_by_host[hosts[r]].push_back(local[r]);
    auto [it, inserted] = node_of_host.emplace(hosts[r], node[r]);
    EXPECT_EQ(it->second, node[r]) << "ranks of host " << hosts[r] << " report different node ranks";
    EXPECT_EQ(nproc[r], nproc[0]) << "nproc_per_node differs on rank " << r;
  }
  for (auto& [host, locals] : locals_by_host) {
    std::sort(locals.begin(), locals.end());
    std::vector<int> expected(locals.size());
    std::iota(expected.begin(), expected.end(), 0);
    EXPECT_EQ(locals, expected) << "local ranks on " << host;
    EXPECT_EQ(int(locals.size()), idist::get_nproc_per_node()) << "ranks on " << host;
  }
  EXPECT_EQ(int(node_of_host.size()), idist::get_nnodes());
}

TEST_F(Config, DeviceIsCpuOrTheLocalCuda) {
  const idist::Device d = idist::device();
  if (idist::backend() == std::optional<std::string>("nccl")) {
    EXPECT_EQ(d, (idist::Device{idist::DeviceType::CUDA, idist::get_local_rank()}));
  } else if (d.type == idist::DeviceType::CUDA) {
    EXPECT_GE(d.index, 0);
  } else {
    EXPECT_EQ(d.str(), "cpu");
  }
}

}  // namespace
}  // namespace idist::conformance
