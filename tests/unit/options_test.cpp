// The public option structs of the core library take designated initializers that name only some
// fields, without -Wmissing-field-initializers (an error in this file): every member has a default
// member initializer, and the omitted ones keep their documented defaults.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>

#include "idist/context.hpp"
#include "idist/launcher.hpp"

#pragma GCC diagnostic error "-Wmissing-field-initializers"

namespace {

using namespace std::chrono_literals;

TEST(OptionStructs, InitOptionsNamingOneFieldKeepsTheOthersDefaults) {
  const idist::InitOptions o{.timeout = 5s};
  EXPECT_EQ(o.timeout, 5s);
  EXPECT_EQ(o.init_method, "env://");
  EXPECT_EQ(o.rank, -1);
  EXPECT_EQ(o.world_size, -1);
  EXPECT_EQ(o.local_rank, -1);
  EXPECT_EQ(o.mpi_blocking_collectives, std::nullopt);
  EXPECT_EQ(o.mpi_progress_thread, std::nullopt);
  EXPECT_EQ(o.debug, std::nullopt);
  const idist::InitOptions d{.rank = 1, .debug = idist::DebugLevel::Detail};
  EXPECT_EQ(d.timeout, std::chrono::milliseconds(std::chrono::minutes(30)));
  EXPECT_EQ(d.debug, idist::DebugLevel::Detail);
}

TEST(OptionStructs, LauncherOptionsNamingOneFieldKeepTheOthersDefaults) {
  const idist::SpawnOptions s{.nproc_per_node = 2};
  EXPECT_EQ(s.nproc_per_node, 2);
  EXPECT_EQ(s.nnodes, 1);
  EXPECT_EQ(s.master_addr, std::nullopt);
  EXPECT_EQ(s.master_port, std::nullopt);
  EXPECT_EQ(s.init_method, "env://");
  EXPECT_TRUE(s.bind_cores);
  const idist::ParallelOptions p{.nproc_per_node = 2, .timeout = 10s};
  EXPECT_EQ(p.nproc_per_node, 2);
  EXPECT_EQ(p.nnodes, std::nullopt);
  EXPECT_EQ(p.master_addr, std::nullopt);
  EXPECT_EQ(p.init_method, std::nullopt);
  EXPECT_EQ(p.timeout, std::chrono::milliseconds(10s));
}

}  // namespace
