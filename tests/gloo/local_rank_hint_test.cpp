// ignite's set_local_rank() given before the context exists: initialize("gloo") takes the hint where
// the environment gives no local rank (explicit ranks without LOCAL_RANK), instead of guessing it
// from the host names. Two real processes rendezvous over TCP.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "idist/idist.hpp"
#include "launcher/process_helpers.hpp"

namespace {

using idist::test::require;

// Local ranks of the two processes of one host: with `hint`, the reverse of the host-name guess.
std::vector<int> codes_of_world(bool hint) {
  const int port = idist::test::free_tcp_port();
  return idist::test::run_in_processes(2, [&](int i) {
    for (const char* name : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"}) unsetenv(name);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    const int want = hint ? 1 - i : i;
    if (hint) idist::set_local_rank(want);
    idist::initialize("gloo", {.timeout = std::chrono::seconds(30), .rank = i, .world_size = 2});
    const std::string who = "rank " + std::to_string(i) + ": ";
    require(idist::get_local_rank() == want,
            who + "local rank " + std::to_string(idist::get_local_rank()) + ", expected " + std::to_string(want));
    require(idist::get_nproc_per_node() == 2, who + "nproc_per_node " + std::to_string(idist::get_nproc_per_node()));
    require(idist::all_reduce(idist::get_local_rank()) == 1, who + "local ranks do not add up to 1");
    idist::finalize();
  });
}

TEST(LocalRankHint, InitializeTakesTheHintWhereTheEnvironmentHasNone) {
  EXPECT_EQ(codes_of_world(/*hint=*/true), (std::vector<int>{0, 0}));
}

TEST(LocalRankHint, WithoutHintTheHostNameGuessApplies) {
  EXPECT_EQ(codes_of_world(/*hint=*/false), (std::vector<int>{0, 0}));
}

}  // namespace
