// EnvOverride: what it sets, and that every variable comes back as it was.
#include <cstdlib>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "rendezvous/discovery.hpp"
#include "rendezvous/env.hpp"

namespace {
using idist::rendezvous::EnvOverride;

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::optional<std::string>(v) : std::nullopt;
}

class EnvOverrideTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* n : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "IDIST_T_A", "IDIST_T_B"})
      ::unsetenv(n);
  }
};
}  // namespace

TEST_F(EnvOverrideTest, ExportsTheWorldInfoAndRestoresUnsetVariables) {
  idist::rendezvous::WorldInfo info;
  info.rank = 3;
  info.local_rank = 1;
  info.world_size = 4;
  info.master_addr = "node1";
  info.master_port = 17345;
  {
    EnvOverride guard(info);
    EXPECT_EQ(env("RANK"), "3");
    EXPECT_EQ(env("LOCAL_RANK"), "1");
    EXPECT_EQ(env("WORLD_SIZE"), "4");
    EXPECT_EQ(env("MASTER_ADDR"), "node1");
    EXPECT_EQ(env("MASTER_PORT"), "17345");
    EXPECT_TRUE(guard.active());
  }
  for (const char* n : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})
    EXPECT_EQ(env(n), std::nullopt) << n;
}

TEST_F(EnvOverrideTest, RestoresPreviousValuesFromBeforeTheFirstChange) {
  ::setenv("IDIST_T_A", "original", 1);
  EnvOverride guard;
  guard.set("IDIST_T_A", "first");
  guard.set("IDIST_T_A", "second");  // the value to restore stays "original"
  guard.unset("IDIST_T_A");
  EXPECT_EQ(env("IDIST_T_A"), std::nullopt);
  guard.set("IDIST_T_B", "new");
  guard.restore();
  EXPECT_EQ(env("IDIST_T_A"), "original");
  EXPECT_EQ(env("IDIST_T_B"), std::nullopt);
  EXPECT_FALSE(guard.active());
  ::setenv("IDIST_T_A", "changed-later", 1);
  guard.restore();  // idempotent: nothing is remembered any more
  EXPECT_EQ(env("IDIST_T_A"), "changed-later");
}

TEST_F(EnvOverrideTest, MoveTransfersTheDutyToRestore) {
  ::setenv("IDIST_T_A", "before", 1);
  EnvOverride outer;
  {
    EnvOverride inner;
    inner.set("IDIST_T_A", "during");
    outer = std::move(inner);
  }  // the moved-from guard restores nothing
  EXPECT_EQ(env("IDIST_T_A"), "during");
  EnvOverride moved(std::move(outer));
  EXPECT_FALSE(outer.active());
  moved.restore();
  EXPECT_EQ(env("IDIST_T_A"), "before");
}

TEST_F(EnvOverrideTest, MoveAssignmentRestoresWhatTheTargetHeld) {
  EnvOverride target;
  target.set("IDIST_T_A", "held-by-target");
  EnvOverride source;
  source.set("IDIST_T_B", "held-by-source");
  target = std::move(source);
  EXPECT_EQ(env("IDIST_T_A"), std::nullopt);  // the target's old change was undone
  EXPECT_EQ(env("IDIST_T_B"), "held-by-source");
  target.restore();
  EXPECT_EQ(env("IDIST_T_B"), std::nullopt);
}
