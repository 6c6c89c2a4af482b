// Behaviour specific to the gloo backend, on every rank of a world started by spawn (or mpirun /
// a torchrun-style launcher): identity, topology, every element type and reduction through Gloo's
// all-reduce and our reduce functions, ordering of non-blocking operations on the per-group lanes,
// short waits that leave the operation running, group communicators that non-members never join,
// zero-length and large (multi-segment) buffers, and that MPI is never initialized.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <thread>
#include <vector>

#include "idist/idist.hpp"

namespace {

int rank() { return idist::get_rank(); }
int world() { return idist::get_world_size(); }

TEST(GlooBackend, Identity) {
  EXPECT_EQ(idist::backend(), std::optional<std::string>("gloo"));
  EXPECT_EQ(idist::model_name(), "native-dist");
  const idist::Device d = idist::device();
  if (d.type == idist::DeviceType::CUDA)
    EXPECT_EQ(d.index, idist::get_local_rank());
  else
    EXPECT_EQ(d.str(), "cpu");
}

TEST(GlooBackend, TopologyMatchesTheEnvironment) {
  const char* r = std::getenv("RANK");
  ASSERT_NE(r, nullptr) << "the backend exports RANK while initialized";
  EXPECT_EQ(std::atoi(r), rank());
  EXPECT_EQ(idist::get_nproc_per_node() * idist::get_nnodes(), world());
  EXPECT_EQ(idist::get_node_rank(), rank() / idist::get_nproc_per_node());
  // Every rank agrees on the topology.
  const std::vector<int> nproc = idist::all_gather(idist::get_nproc_per_node());
  for (int v : nproc) EXPECT_EQ(v, idist::get_nproc_per_node());
}

// With IDIST_GLOO_LOOP_NICE unset, exactly one thread of a rank runs at nice 19 on one node (Gloo's
// transport loop) and none across nodes; the test's own thread keeps its priority.
TEST(GlooBackend, TransportThreadRunsAtLowestPriorityOnOneNode) {
  ASSERT_EQ(std::getenv("IDIST_GLOO_LOOP_NICE"), nullptr) << "this test checks the default";
  errno = 0;
  const int own = ::getpriority(PRIO_PROCESS, id_t(::gettid()));
  ASSERT_EQ(errno, 0);
  ASSERT_LT(own, 19) << "the test runs at nice " << own;
  int at_19 = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    const auto tid = id_t(std::stol(e.path().filename().string()));
    errno = 0;
    const int n = ::getpriority(PRIO_PROCESS, tid);
    if (errno == 0 && n == 19) ++at_19;
  }
  EXPECT_EQ(at_19, idist::get_nnodes() == 1 ? 1 : 0)
      << "threads at nice 19 in a world of " << idist::get_nnodes() << " node(s)";
}

TEST(GlooBackend, MpiIsNeverInitialized) {
  using Query = int (*)(int*);
  auto initialized = reinterpret_cast<Query>(dlsym(RTLD_DEFAULT, "MPI_Initialized"));
  if (!initialized) GTEST_SKIP() << "MPI is not loaded in this process at all";
  int flag = -1;
  initialized(&flag);
  EXPECT_EQ(flag, 0) << "the gloo backend must not initialize MPI";
}

template <class T>
std::vector<T> per_rank(int r, std::size_t n) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = T((r + 1) * 3 + int(i % 5));
  return v;
}

TEST(GlooBackend, IntegerReductionsIncludingBitwise) {
  const int n = world();
  std::vector<std::int32_t> sum = per_rank<std::int32_t>(rank(), 7), prod = sum, mn = sum, mx = sum;
  std::vector<std::int64_t> band(3), bor(3);
  for (std::size_t i = 0; i < 3; ++i) {
    band[i] = std::int64_t(0xFF0) | (std::int64_t(1) << (rank() + 20)) | std::int64_t(i);
    bor[i] = std::int64_t(1) << (rank() + 4 * int(i));
  }
  idist::all_reduce(sum, idist::ReduceOp::Sum);
  idist::all_reduce(prod, "PRODUCT");
  idist::all_reduce(mn, idist::ReduceOp::Min);
  idist::all_reduce(mx, idist::ReduceOp::Max);
  idist::all_reduce(band, "AND");
  idist::all_reduce(bor, idist::ReduceOp::Or);
  for (std::size_t i = 0; i < 7; ++i) {
    std::int32_t s = 0, p = 1, lo = INT32_MAX, hi = INT32_MIN;
    for (int r = 0; r < n; ++r) {
      const std::int32_t v = per_rank<std::int32_t>(r, 7)[i];
      s += v, p *= v, lo = std::min(lo, v), hi = std::max(hi, v);
    }
    EXPECT_EQ(sum[i], s);
    EXPECT_EQ(prod[i], p);
    EXPECT_EQ(mn[i], lo);
    EXPECT_EQ(mx[i], hi);
  }
  for (std::size_t i = 0; i < 3; ++i) {
    std::int64_t a = ~std::int64_t(0), o = 0;
    for (int r = 0; r < n; ++r) {
      a &= std::int64_t(0xFF0) | (std::int64_t(1) << (r + 20)) | std::int64_t(i);
      o |= std::int64_t(1) << (r + 4 * int(i));
    }
    EXPECT_EQ(band[i], a);
    EXPECT_EQ(bor[i], o);
  }
}

TEST(GlooBackend, HalfAndBFloat16) {
  const int n = world();
  std::vector<idist::Half> h = {idist::Half(0.5f * float(rank() + 1)), idist::Half(-1.0f), idist::Half(float(rank()))};
  std::vector<idist::BFloat16> b = {idist::BFloat16(0.25f * float(rank() + 1)), idist::BFloat16(2.0f),
                                    idist::BFloat16(float(-rank()))};
  std::vector<idist::BFloat16> bmax = b, bmin = b, bprod = b;
  idist::all_reduce(h, idist::ReduceOp::Sum);
  idist::all_reduce(b, idist::ReduceOp::Sum);
  idist::all_reduce(bmax, idist::ReduceOp::Max);
  idist::all_reduce(bmin, idist::ReduceOp::Min);
  idist::all_reduce(bprod, idist::ReduceOp::Product);
  const float tri = float(n * (n + 1)) / 2.0f;  // sum of 1..n
  EXPECT_EQ(float(h[0]), 0.5f * tri);
  EXPECT_EQ(float(h[1]), -float(n));
  EXPECT_EQ(float(h[2]), tri - float(n));
  EXPECT_EQ(float(b[0]), 0.25f * tri);
  EXPECT_EQ(float(b[1]), 2.0f * float(n));
  EXPECT_EQ(float(bmax[0]), 0.25f * float(n));
  EXPECT_EQ(float(bmin[2]), float(-(n - 1)));
  EXPECT_EQ(float(bprod[1]), float(1 << n));
}

TEST(GlooBackend, BoolReductionsStayBool) {
  const bool mine = rank() == 0;
  EXPECT_TRUE(idist::all_reduce(mine, idist::ReduceOp::Or));
  EXPECT_EQ(idist::all_reduce(mine, idist::ReduceOp::And), world() == 1);
  EXPECT_TRUE(idist::all_reduce(mine, idist::ReduceOp::Sum));  // Sum acts as Or
  EXPECT_EQ(idist::all_reduce(mine, idist::ReduceOp::Product), world() == 1);
  EXPECT_EQ(idist::all_reduce(true, idist::ReduceOp::Min), true);
}

TEST(GlooBackend, FloatAndOrIsAValueErrorBeforeCommunicating) {
  std::vector<float> v(3, 1.0f);
  EXPECT_THROW(idist::all_reduce(v, idist::ReduceOp::And), idist::ValueError);
  EXPECT_THROW(idist::all_reduce(v, "OR"), idist::ValueError);
  // The world is still usable: nothing was issued.
  EXPECT_EQ(idist::all_reduce(1), world());
}

TEST(GlooBackend, AsyncOperationsCompleteInIssueOrderWhateverTheWaitOrder) {
  constexpr int kOps = 24;
  std::vector<std::vector<double>> bufs(kOps);
  std::vector<idist::Work> works;
  for (int i = 0; i < kOps; ++i) {
    bufs[std::size_t(i)].assign(std::size_t(1 + i * 37), double(rank() + i));
    works.push_back(idist::all_reduce_async(std::span<double>(bufs[std::size_t(i)])));
  }
  for (int i = kOps - 1; i >= 0; --i) works[std::size_t(i)].wait();
  const double ranks_sum = double(world() * (world() - 1)) / 2.0;
  for (int i = 0; i < kOps; ++i)
    for (double v : bufs[std::size_t(i)]) ASSERT_EQ(v, ranks_sum + double(world() * i)) << "op " << i;
}

TEST(GlooBackend, ShortWaitTimesOutAndTheOperationStillCompletes) {
  // Rank 0 issues first and polls with a 1 ms timeout while the others join 300 ms later: the short
  // wait must throw TimeoutError without abandoning the operation, and a later wait must succeed.
  if (world() < 2) GTEST_SKIP() << "needs two ranks";
  std::vector<float> v(5, float(rank() + 1));
  if (rank() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  idist::Work w = idist::all_reduce_async(std::span<float>(v));
  if (rank() == 0) {
    EXPECT_THROW(w.wait(std::chrono::milliseconds(1)), idist::TimeoutError);
  }
  w.wait();
  EXPECT_TRUE(w.is_completed());
  for (float x : v) EXPECT_EQ(x, float(world() * (world() + 1) / 2));
}

TEST(GlooBackend, IsCompletedPollingDrivesTheWorker) {
  std::vector<std::int64_t> v(1000, rank());
  idist::Work w = idist::all_reduce_async(std::span<std::int64_t>(v), idist::ReduceOp::Max);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!w.is_completed() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  ASSERT_TRUE(w.is_completed()) << "an operation nobody waits for must still progress on the worker";
  w.wait();
  for (auto x : v) EXPECT_EQ(x, world() - 1);
}

TEST(GlooBackend, GroupCommunicatorsAreJoinedOnlyByMembers) {
  if (world() < 3) GTEST_SKIP() << "needs three ranks";
  // Group of the even ranks; odd ranks never touch it, and do world work meanwhile.
  std::vector<int> evens;
  for (int r = 0; r < world(); r += 2) evens.push_back(r);
  const bool member = rank() % 2 == 0;
  int got = idist::all_reduce(rank() + 1, idist::ReduceOp::Sum, evens);
  int expected = 0;
  for (int r : evens) expected += r + 1;
  EXPECT_EQ(got, member ? expected : rank() + 1) << "a non-member gets its input back";
  // A second, overlapping group, then async work on both groups and the world, interleaved.
  const std::vector<int> tail = {1, 2};
  std::vector<int> a(4, rank()), b(4, rank()), c(4, rank());
  idist::Work wa = idist::all_reduce_async(std::span<int>(a), idist::ReduceOp::Max, evens);
  idist::Work wb = idist::all_reduce_async(std::span<int>(b), idist::ReduceOp::Min, tail);
  idist::Work wc = idist::all_reduce_async(std::span<int>(c), idist::ReduceOp::Sum);
  wc.wait();
  wb.wait();
  wa.wait();
  EXPECT_EQ(a[0], member ? evens.back() : rank());
  EXPECT_EQ(b[0], (rank() == 1 || rank() == 2) ? 1 : rank());
  EXPECT_EQ(c[0], world() * (world() - 1) / 2);
  idist::barrier();
}

TEST(GlooBackend, GroupBarrierAndBroadcastUseGroupRanks) {
  if (world() < 3) GTEST_SKIP() << "needs three ranks";
  const std::vector<int> group = {1, world() - 1};
  idist::barrier(group);
  idist::Group g = idist::new_group(group);
  std::vector<std::int16_t> v(3, std::int16_t(rank() * 10));
  if (rank() == 1 || rank() == world() - 1) {
    idist::current_model().broadcast(idist::Buffer{v.data(), v.size(), idist::DType::Int16}, world() - 1, g).wait();
    EXPECT_EQ(v[2], std::int16_t((world() - 1) * 10));
  } else {
    EXPECT_FALSE(idist::current_model().process_group(g).is_member());
  }
  idist::barrier();
}

TEST(GlooBackend, ZeroLengthContributionsInAllGather) {
  // Rank r contributes r elements: rank 0 contributes none.
  std::vector<float> mine(static_cast<std::size_t>(rank()), static_cast<float>(rank()));
  const std::vector<float> all = idist::all_gather(std::span<const float>(mine));
  std::vector<float> expected;
  for (int r = 0; r < world(); ++r) expected.insert(expected.end(), std::size_t(r), float(r));
  EXPECT_EQ(all, expected);
  std::vector<double> empty;
  EXPECT_TRUE(idist::all_gather(std::span<const double>(empty)).empty());
  idist::all_reduce(empty);  // zero elements: a no-op on every rank
}

TEST(GlooBackend, LargeAllReduceSpansSeveralRingSegments) {
  // 3 M floats = 12 MiB: many of the ring's 1 MiB segments, with a ragged tail.
  std::vector<float> v(3'000'001);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = float((i % 1000) + std::size_t(rank()));
  idist::all_reduce(v);
  const float ranks_sum = float(world() * (world() - 1) / 2);
  for (std::size_t i = 0; i < v.size(); i += 99'991) ASSERT_EQ(v[i], float(world()) * float(i % 1000) + ranks_sum) << i;
  ASSERT_EQ(v.back(), float(world()) * float((v.size() - 1) % 1000) + ranks_sum);
}

TEST(GlooBackend, CallsFromSeveralThreadsOnDifferentGroups) {
  if (world() < 3) GTEST_SKIP() << "needs three ranks (a group that is not the whole world)";
  // Each thread uses its own communicator (so the issue order within each is the same on all
  // ranks); their lanes keep them apart.
  const std::vector<int> g1 = {0, 1};
  idist::new_group(g1);
  std::vector<int> r1(50), r2(50);
  std::thread t1([&] {
    if (rank() <= 1)
      for (int i = 0; i < 50; ++i) r1[std::size_t(i)] = idist::all_reduce(i + rank(), idist::ReduceOp::Sum, g1);
  });
  std::thread t2([&] {
    for (int i = 0; i < 50; ++i) r2[std::size_t(i)] = idist::all_reduce(i, idist::ReduceOp::Max);
  });
  t1.join();
  t2.join();
  for (int i = 0; i < 50; ++i) {
    if (rank() <= 1) EXPECT_EQ(r1[std::size_t(i)], 2 * i + 1);
    EXPECT_EQ(r2[std::size_t(i)], i);
  }
}

}  // namespace
