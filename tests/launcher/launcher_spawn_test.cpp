// spawn() and Parallel with real worker processes: ranks, environment, arguments, thread budget,
// Parallel inside a torchrun-style environment, and ignite's 2-node emulation on one machine.
// Workers check their own state and throw on a mismatch (spawn then fails with the worker's rank and
// message); what the test process must see is written to files in a scratch directory.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "idist/idist.hpp"
#include "launcher/process_helpers.hpp"
#include "launcher/worker.hpp"
#include "support/scoped_env.hpp"

namespace {

using idist::test::ScopedEnv;

using idist::test::free_tcp_port;
using idist::test::read_text;
using idist::test::require;
using idist::test::run_in_processes;
using idist::test::ScratchDir;
using idist::test::write_text;

constexpr auto kTimeout = std::chrono::seconds(30);

idist::SpawnOptions options(int nproc) {
  idist::SpawnOptions o;
  o.nproc_per_node = nproc;
  o.master_port = free_tcp_port();
  o.timeout = kTimeout;
  return o;
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

// Checks a worker's view of a world of `world` ranks, `nproc` per node.
void check_worker(int local_rank, int world, int nproc) {
  const int rank = idist::get_rank();
  const std::string who = "rank " + std::to_string(rank) + ": ";
  require(idist::backend() == std::optional<std::string>("gloo"), who + "backend is not gloo");
  require(idist::model_name() == "native-dist", who + "model_name is " + idist::model_name());
  require(idist::get_world_size() == world, who + "world size " + std::to_string(idist::get_world_size()));
  require(idist::get_local_rank() == local_rank,
          who + "local rank " + std::to_string(idist::get_local_rank()) + " but fn got " + std::to_string(local_rank));
  require(idist::get_nproc_per_node() == nproc, who + "nproc_per_node " + std::to_string(idist::get_nproc_per_node()));
  require(idist::get_nnodes() == world / nproc, who + "nnodes " + std::to_string(idist::get_nnodes()));
  require(idist::get_node_rank() == rank / nproc, who + "node rank " + std::to_string(idist::get_node_rank()));
  require(env_or("RANK", "") == std::to_string(rank), who + "RANK=" + env_or("RANK", "<unset>"));
  require(env_or("LOCAL_RANK", "") == std::to_string(local_rank),
          who + "LOCAL_RANK=" + env_or("LOCAL_RANK", "<unset>"));
  require(env_or("WORLD_SIZE", "") == std::to_string(world), who + "WORLD_SIZE=" + env_or("WORLD_SIZE", "<unset>"));
  const int sum = idist::all_reduce(rank);
  require(sum == world * (world - 1) / 2, who + "all_reduce of ranks gave " + std::to_string(sum));
}

TEST(Spawn, EveryWorkerGetsItsRankAndTheArguments) {
  ScratchDir dir;
  const std::string tag = "cfg-42";
  idist::spawn(
      "gloo",
      [](int local_rank, const std::string& out, const std::string& t, int n) {
        check_worker(local_rank, 3, 3);
        write_text(out + "/rank" + std::to_string(idist::get_rank()), t + ":" + std::to_string(n));
      },
      dir.path(), tag, 7, options(3));
  for (int r = 0; r < 3; ++r) EXPECT_EQ(read_text(dir.file("rank" + std::to_string(r))), "cfg-42:7") << "rank " << r;
  EXPECT_TRUE(idist::test::no_children_left());
  EXPECT_FALSE(idist::backend().has_value()) << "the launching process must stay serial";
}

TEST(Spawn, DefaultsToOneWorker) {
  ScratchDir dir;
  idist::spawn(
      "gloo",
      [](int local_rank, const std::string& out) {
        check_worker(local_rank, 1, 1);
        write_text(out + "/ran", "yes");
      },
      dir.path(), idist::SpawnOptions{.master_port = free_tcp_port(), .timeout = kTimeout});
  EXPECT_EQ(read_text(dir.file("ran")), "yes");
}

TEST(Spawn, MoveOnlyArgumentsReachEveryWorker) {
  ScratchDir dir;
  auto value = std::make_unique<int>(17);
  idist::spawn(
      "gloo",
      [](int, std::unique_ptr<int> p, const std::string& out) {
        require(p && *p == 17, "the unique_ptr argument did not arrive");
        write_text(out + "/rank" + std::to_string(idist::get_rank()), std::to_string(*p));
      },
      std::move(value), dir.path(), options(2));
  EXPECT_EQ(read_text(dir.file("rank0")), "17");
  EXPECT_EQ(read_text(dir.file("rank1")), "17");
}

TEST(Spawn, WorkersGetAThreadBudgetUnlessTheUserSetOne) {
  ScratchDir dir;
  const char* saved = std::getenv("OMP_NUM_THREADS");
  const std::string saved_value = saved ? saved : "";
  unsetenv("OMP_NUM_THREADS");
  const auto record = [](int, const std::string& out) {
    write_text(out + "/omp" + std::to_string(idist::get_rank()), env_or("OMP_NUM_THREADS", "<unset>"));
  };
  idist::spawn("gloo", record, dir.path(), options(2));
  const int cores = int(idist::launcher::allowed_cpus().size());  // the CPUs the launcher may run on
  const std::string expected = std::to_string(std::max(1, cores / 2));
  EXPECT_EQ(read_text(dir.file("omp0")), expected);
  EXPECT_EQ(read_text(dir.file("omp1")), expected);

  setenv("OMP_NUM_THREADS", "7", 1);
  idist::spawn("gloo", record, dir.path(), options(2));
  EXPECT_EQ(read_text(dir.file("omp0")), "7");
  EXPECT_EQ(read_text(dir.file("omp1")), "7");
  if (saved)
    setenv("OMP_NUM_THREADS", saved_value.c_str(), 1);
  else
    unsetenv("OMP_NUM_THREADS");
}

std::string cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (int c : cpus) out += (out.empty() ? "" : ",") + std::to_string(c);
  return out;
}

TEST(Spawn, PinsEachWorkerToItsShareOfTheCpusLikeMpirun) {
  ScratchDir dir;
  const std::vector<int> mine = idist::launcher::allowed_cpus();
  ASSERT_FALSE(mine.empty());
  const auto record = [](int, const std::string& out) {
    write_text(out + "/cpus" + std::to_string(idist::get_rank()), cpu_list(idist::launcher::allowed_cpus()));
  };
  ScopedEnv env;
  env.set("IDIST_SPAWN_BIND", "1");  // the default, whatever the caller's environment holds
  idist::spawn("gloo", record, dir.path(), options(2));
  for (int r = 0; r < 2; ++r) {
    std::vector<int> expected = idist::launcher::cpu_share(mine, r, 2);
    if (expected.empty()) expected = mine;  // fewer CPUs than workers: left to the scheduler
    EXPECT_EQ(read_text(dir.file("cpus" + std::to_string(r))), cpu_list(expected)) << "worker " << r;
  }
  // Turned off by the option, or by IDIST_SPAWN_BIND=0: every worker keeps the launcher's CPUs.
  idist::SpawnOptions unpinned = options(2);
  unpinned.bind_cores = false;
  idist::spawn("gloo", record, dir.path(), unpinned);
  EXPECT_EQ(read_text(dir.file("cpus1")), cpu_list(mine));
  env.set("IDIST_SPAWN_BIND", "0");
  idist::spawn("gloo", record, dir.path(), options(2));
  EXPECT_EQ(read_text(dir.file("cpus0")), cpu_list(mine));
  EXPECT_EQ(read_text(dir.file("cpus1")), cpu_list(mine));
  env.set("IDIST_SPAWN_BIND", "yes");
  try {
    idist::spawn("gloo", record, dir.path(), options(2));
    ADD_FAILURE() << "IDIST_SPAWN_BIND=yes was accepted";
  } catch (const idist::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("IDIST_SPAWN_BIND is 'yes'; expected 0"), std::string::npos) << e.what();
  }
}

TEST(Spawn, CpuSharesAreEqualContiguousAndDisjoint) {
  const std::vector<int> cpus{0, 1, 2, 3, 4, 6, 7};  // 5 is not allowed
  EXPECT_EQ(idist::launcher::cpu_share(cpus, 0, 2), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(idist::launcher::cpu_share(cpus, 1, 2), (std::vector<int>{3, 4, 6}));  // 7 left over
  EXPECT_EQ(idist::launcher::cpu_share(cpus, 6, 7), (std::vector<int>{7}));
  EXPECT_TRUE(idist::launcher::cpu_share(cpus, 0, 8).empty());  // fewer CPUs than workers
  EXPECT_TRUE(idist::launcher::cpu_share(cpus, 2, 2).empty());
}

TEST(Spawn, WorkersShareARandomStoreTokenOrTheUsersOne) {
  ScratchDir dir;
  const auto record = [](int, const std::string& out) {
    write_text(out + "/token" + std::to_string(idist::get_rank()), env_or("IDIST_STORE_TOKEN", "<unset>"));
  };
  unsetenv("IDIST_STORE_TOKEN");
  idist::spawn("gloo", record, dir.path(), options(2));
  const std::string first = read_text(dir.file("token0"));
  EXPECT_EQ(first.size(), 32u) << first;
  EXPECT_EQ(first.find_first_not_of("0123456789abcdef"), std::string::npos) << first;
  EXPECT_EQ(read_text(dir.file("token1")), first);
  idist::spawn("gloo", record, dir.path(), options(2));
  EXPECT_NE(read_text(dir.file("token0")), first) << "a new job needs a new token";
  setenv("IDIST_STORE_TOKEN", "users-own", 1);
  idist::spawn("gloo", record, dir.path(), options(2));
  EXPECT_EQ(read_text(dir.file("token0")), "users-own");
  EXPECT_EQ(read_text(dir.file("token1")), "users-own");
  unsetenv("IDIST_STORE_TOKEN");
}

TEST(Spawn, FileAndTcpInitMethods) {
  ScratchDir dir;
  for (const std::string method :
       {"file://" + dir.file("store"), "tcp://127.0.0.1:" + std::to_string(free_tcp_port())}) {
    idist::SpawnOptions o = options(2);
    o.init_method = method;
    idist::spawn(
        "gloo",
        [](int local_rank, const std::string& out) {
          check_worker(local_rank, 2, 2);
          write_text(out + "/m" + std::to_string(idist::get_rank()), "ok");
        },
        dir.path(), o);
    EXPECT_EQ(read_text(dir.file("m0")), "ok") << method;
    EXPECT_EQ(read_text(dir.file("m1")), "ok") << method;
    std::filesystem::remove(dir.file("m0"));
    std::filesystem::remove(dir.file("m1"));
  }
}

// ignite's spawn: master_addr / master_port default to MASTER_ADDR / MASTER_PORT, then 127.0.0.1:2222.
TEST(Spawn, MasterAddressAndPortDefaultToTheEnvironment) {
  const int port = free_tcp_port();
  ScopedEnv env;
  env.set("MASTER_ADDR", "localhost").set("MASTER_PORT", std::to_string(port));
  idist::spawn(
      "gloo",
      [port](int local_rank) {
        check_worker(local_rank, 2, 2);
        require(env_or("MASTER_ADDR", "") == "localhost", "MASTER_ADDR=" + env_or("MASTER_ADDR", "<unset>"));
        require(env_or("MASTER_PORT", "") == std::to_string(port), "MASTER_PORT=" + env_or("MASTER_PORT", "<unset>"));
      },
      idist::SpawnOptions{.nproc_per_node = 2, .timeout = kTimeout});
  // Given values win over the environment.
  const int given = free_tcp_port();
  idist::spawn(
      "gloo",
      [given](int) {
        require(env_or("MASTER_ADDR", "") == "127.0.0.1", "MASTER_ADDR=" + env_or("MASTER_ADDR", "<unset>"));
        require(env_or("MASTER_PORT", "") == std::to_string(given), "MASTER_PORT=" + env_or("MASTER_PORT", "<unset>"));
      },
      idist::SpawnOptions{.master_addr = "127.0.0.1", .master_port = given, .timeout = kTimeout});
  EXPECT_TRUE(idist::test::no_children_left());
}

TEST(Spawn, MasterDefaultsWithoutEnvironmentAreIgnites) {
  unsetenv("MASTER_ADDR");
  unsetenv("MASTER_PORT");
  const idist::SpawnOptions o = idist::detail::with_master_defaults({});
  EXPECT_EQ(o.master_addr, std::optional<std::string>("127.0.0.1"));
  EXPECT_EQ(o.master_port, std::optional<int>(2222));
  ScopedEnv env;
  env.set("MASTER_PORT", "http");
  try {
    idist::detail::with_master_defaults({});
    ADD_FAILURE() << "MASTER_PORT=http accepted";
  } catch (const idist::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("MASTER_PORT should be a port in [1, 65535], but given 'http'"),
              std::string::npos)
        << e.what();
  }
}

// ignite's multi-node Parallel with init_method "env://" and no master address: accepted, the
// address and port coming from the environment. Two launches with node_rank 0 and 1 form one world.
TEST(Parallel, TwoNodesWithEnvInitMethodTakeTheMasterFromTheEnvironment) {
  ScratchDir dir;
  const int port = free_tcp_port();
  const auto codes = run_in_processes(2, [&](int node) {
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    idist::Parallel parallel(
        "gloo", {.nproc_per_node = 1, .nnodes = 2, .node_rank = node, .init_method = "env://", .timeout = kTimeout});
    parallel.run([&](int local_rank) {
      check_worker(local_rank, 2, 1);
      write_text(dir.file("e" + std::to_string(idist::get_rank())), env_or("MASTER_PORT", ""));
    });
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
  EXPECT_EQ(read_text(dir.file("e0")), std::to_string(port));
  EXPECT_EQ(read_text(dir.file("e1")), std::to_string(port));
}

// ignite's Parallel logs: the launcher and its spawn parameters, the run, its end.
TEST(Parallel, LogsLikeIgnitesLauncherWhenSpawning) {
  testing::internal::CaptureStderr();
  {
    idist::Parallel parallel("gloo", {.nproc_per_node = 2, .master_port = free_tcp_port(), .timeout = kTimeout});
    parallel.run([](int) {});
  }
  const std::string err = testing::internal::GetCapturedStderr();
  for (const char* line :
       {"idist.distributed.launcher.Parallel INFO: Initialized distributed launcher with backend: 'gloo'",
        "INFO: - Parameters to spawn processes: \n\tnproc_per_node: 2\n\tnnodes: 1\n\tnode_rank: 0",
        "INFO: Spawn function '", "' in 2 processes", "INFO: End of run"})
    EXPECT_NE(err.find(line), std::string::npos) << "missing '" << line << "' in:\n" << err;
}

TEST(Parallel, SpawnsWithNprocPerNode) {
  ScratchDir dir;
  {
    idist::Parallel parallel("gloo", {.nproc_per_node = 2, .master_port = free_tcp_port(), .timeout = kTimeout});
    parallel.run(
        [](int local_rank, const std::string& out) {
          check_worker(local_rank, 2, 2);
          write_text(out + "/p" + std::to_string(idist::get_rank()), "ok");
        },
        dir.path());
    EXPECT_FALSE(idist::backend().has_value());
  }
  EXPECT_EQ(read_text(dir.file("p0")), "ok");
  EXPECT_EQ(read_text(dir.file("p1")), "ok");
  EXPECT_TRUE(idist::test::no_children_left());
}

TEST(Parallel, InitializesInsideATorchrunEnvironment) {
  ScratchDir dir;
  const int port = free_tcp_port();
  const auto codes = run_in_processes(2, [&](int i) {
    setenv("RANK", std::to_string(i).c_str(), 1);
    setenv("LOCAL_RANK", std::to_string(i).c_str(), 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    testing::internal::CaptureStderr();
    {
      idist::Parallel parallel("gloo", {.timeout = kTimeout});
      require(idist::backend() == std::optional<std::string>("gloo"), "Parallel did not initialize gloo");
      parallel.run(
          [&](int local_rank, int extra) {
            check_worker(local_rank, 2, 2);
            write_text(dir.file("t" + std::to_string(idist::get_rank())), std::to_string(extra));
          },
          5);
    }
    const std::string log = testing::internal::GetCapturedStderr();
    require(!idist::backend().has_value(), "Parallel's destructor did not finalize");
    // ignite's lines, on rank 0 only (ignite's loggers are silent on other ranks).
    for (const char* line :
         {"INFO: Initialized processing group with backend: 'gloo'", "INFO: - Run '", "' in 2 processes",
          "INFO: End of run", "INFO: Finalized processing group with backend: 'gloo'"})
      require((log.find(line) != std::string::npos) == (i == 0),
              "rank " + std::to_string(i) + ": line '" + line + "' in log:\n" + log);
    require(env_or("RANK", "") == std::to_string(i), "RANK was not restored");
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
  EXPECT_EQ(read_text(dir.file("t0")), "5");
  EXPECT_EQ(read_text(dir.file("t1")), "5");
}

// ignite's multi-node emulation: two launches of spawn (node_rank 0 and 1, 2 workers each) on
// localhost form one world of 4.
TEST(Spawn, TwoNodeEmulationFormsOneWorldOfFour) {
  ScratchDir dir;
  const int port = free_tcp_port();
  const auto codes = run_in_processes(2, [&](int node) {
    idist::SpawnOptions o;
    o.nproc_per_node = 2;
    o.nnodes = 2;
    o.node_rank = node;
    o.master_addr = "127.0.0.1";
    o.master_port = port;
    o.timeout = kTimeout;
    idist::spawn(
        "gloo",
        [&](int local_rank) {
          check_worker(local_rank, 4, 2);
          require(idist::get_rank() == node * 2 + local_rank, "rank " + std::to_string(idist::get_rank()) +
                                                                  " on node " + std::to_string(node) + ", local rank " +
                                                                  std::to_string(local_rank));
          const std::vector<int> nodes = idist::all_gather(idist::get_node_rank());
          require(nodes == std::vector<int>({0, 0, 1, 1}), "node ranks gathered in rank order are wrong");
          write_text(dir.file("n" + std::to_string(idist::get_rank())), idist::hostname());
        },
        o);
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(read_text(dir.file("n" + std::to_string(r))), idist::hostname()) << "rank " << r;
  EXPECT_TRUE(idist::test::no_children_left());
}

// Workers die with the process that spawned them (PR_SET_PDEATHSIG): kill a launcher with SIGKILL
// while its workers sleep, and every worker must be gone shortly after.
TEST(Spawn, WorkersDieWithTheLauncher) {
  ScratchDir dir;
  const int port = free_tcp_port();
  std::fflush(nullptr);
  const pid_t launcher = fork();
  if (launcher == 0) {
    try {
      idist::spawn(
          "gloo",
          [&](int) {
            write_text(dir.file("pid" + std::to_string(idist::get_rank())), std::to_string(getpid()));
            std::this_thread::sleep_for(std::chrono::seconds(120));
          },
          idist::SpawnOptions{.nproc_per_node = 2, .master_port = port, .timeout = kTimeout});
    } catch (...) {
    }
    _exit(0);
  }
  std::vector<int> pids;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (pids.size() < 2 && std::chrono::steady_clock::now() < deadline) {
    pids.clear();
    for (int r = 0; r < 2; ++r) {
      const std::string text = read_text(dir.file("pid" + std::to_string(r)));
      if (text != "<missing>") pids.push_back(std::stoi(text));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(pids.size(), 2u) << "the workers did not start";
  kill(launcher, SIGKILL);
  waitpid(launcher, nullptr, 0);
  // A worker is gone when its /proc entry disappeared or it is a zombie waiting for its new parent.
  const auto gone = [](int pid) {
    const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
    if (stat == "<missing>") return true;
    const auto close = stat.rfind(')');
    return close != std::string::npos && stat.size() > close + 2 && stat[close + 2] == 'Z';
  };
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!(gone(pids[0]) && gone(pids[1])) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(gone(pids[0])) << "worker " << pids[0] << " outlived its launcher";
  EXPECT_TRUE(gone(pids[1])) << "worker " << pids[1] << " outlived its launcher";
  for (int pid : pids)
    if (!gone(pid)) kill(pid, SIGKILL);  // do not leave it behind if the test failed
}

}  // namespace
