// Behaviour specific to the mpi backend, run under mpirun with np 2, 3 and 4 by the shared
// multi-rank main (which calls idist::initialize("mpi")). The backend-generic collective checks
// live in tests/conformance.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "backend_kit/cuda_probe.hpp"
#include "idist/collectives.hpp"
#include "idist/context.hpp"
#include "idist/error.hpp"
#include "mpi/mpi_backend.hpp"
#include "mpi_env.hpp"

namespace {

using idist::test::env_int;

// ---------------------------------------------------------------------------------------------
// configuration

TEST(MpiConfig, ModelAndBackendNames) {
  EXPECT_EQ(idist::model_name(), "native-dist");
  EXPECT_EQ(idist::backend(), std::optional<std::string>("mpi"));
}

TEST(MpiConfig, RanksMatchOpenMpiEnvironment) {
  EXPECT_EQ(idist::get_rank(), env_int("OMPI_COMM_WORLD_RANK"));
  EXPECT_EQ(idist::get_world_size(), env_int("OMPI_COMM_WORLD_SIZE"));
  EXPECT_EQ(idist::get_local_rank(), env_int("OMPI_COMM_WORLD_LOCAL_RANK"));
  EXPECT_EQ(idist::get_nproc_per_node(), env_int("OMPI_COMM_WORLD_LOCAL_SIZE"));
}

// Node numbering checked independently of idist: gather every rank's processor name with plain MPI
// and number the distinct names in order of their first (lowest) world rank.
TEST(MpiConfig, NodeRankAndCountMatchProcessorNames) {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  ASSERT_EQ(MPI_Get_processor_name(name, &len), MPI_SUCCESS);
  const int n = idist::get_world_size();
  std::vector<char> all(std::size_t(n) * MPI_MAX_PROCESSOR_NAME);
  ASSERT_EQ(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                          MPI_COMM_WORLD),
            MPI_SUCCESS);
  std::map<std::string, int> node_of;
  for (int r = 0; r < n; ++r) {
    const std::string host(all.data() + std::size_t(r) * MPI_MAX_PROCESSOR_NAME);
    node_of.emplace(host, int(node_of.size()));
  }
  EXPECT_EQ(idist::get_nnodes(), int(node_of.size()));
  EXPECT_EQ(idist::get_node_rank(), node_of.at(std::string(name)));
  EXPECT_EQ(idist::get_nnodes() * idist::get_nproc_per_node(), n) << "one node per host, all equally filled";
}

TEST(MpiConfig, DeviceFollowsCudaAvailability) {
  const idist::Device d = idist::device();
  if (idist::backend_kit::cuda_device_count() > 0) {
    EXPECT_EQ(d, (idist::Device{idist::DeviceType::CUDA, idist::get_local_rank()}));
  } else {
    EXPECT_EQ(d.str(), "cpu");
  }
}

TEST(MpiConfig, SetLocalRankOverridesTheMeasuredOne) {
  const int measured = idist::get_local_rank();
  idist::set_local_rank(measured + 7);
  EXPECT_EQ(idist::get_local_rank(), measured + 7);
  idist::set_local_rank(measured);
  EXPECT_EQ(idist::get_local_rank(), measured);
}

TEST(MpiConfig, InitializeTwiceIsValueError) {
  EXPECT_THROW(idist::initialize("mpi"), idist::ValueError);
  EXPECT_EQ(idist::model_name(), "native-dist") << "the failed call must leave the running backend alone";
}

TEST(MpiConfig, IdistInitializedMpiWithThreadMultiple) {
  auto* m = idist::core::backend_as<idist::mpi_backend::MPIBackend>(idist::current_model());
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->owns_mpi());
  int provided = -1;
  MPI_Query_thread(&provided);
  EXPECT_EQ(m->thread_level(), provided);
}

// ---------------------------------------------------------------------------------------------
// element types and reductions MPI lacks or maps specially

// Values chosen so that every partial result is exact in 16 bits: the expected value does not
// depend on the order in which MPI combines the ranks.
template <class T16>
void check_float16_all_reduce() {
  const int rank = idist::get_rank();
  const int n = idist::get_world_size();
  constexpr std::size_t kCount = 1000;
  const auto value = [](int r, std::size_t i) { return float(int(i % 7) - 3) * 0.25f + float(r); };
  const auto factor = [](int r, std::size_t i) { return float(int(i % 3) + 1) * (r % 2 ? -1.0f : 1.0f); };
  for (idist::ReduceOp op :
       {idist::ReduceOp::Sum, idist::ReduceOp::Product, idist::ReduceOp::Min, idist::ReduceOp::Max}) {
    SCOPED_TRACE(std::string(idist::to_string(op)));
    std::vector<T16> data(kCount);
    for (std::size_t i = 0; i < kCount; ++i)
      data[i] = T16(op == idist::ReduceOp::Product ? factor(rank, i) : value(rank, i));
    idist::all_reduce(std::span<T16>(data), op);
    for (std::size_t i = 0; i < kCount; ++i) {
      float expected = op == idist::ReduceOp::Product ? 1.0f : value(0, i);
      if (op == idist::ReduceOp::Sum) expected = 0.0f;
      for (int r = 0; r < n; ++r) {
        switch (op) {
          case idist::ReduceOp::Sum: expected += value(r, i); break;
          case idist::ReduceOp::Product: expected *= factor(r, i); break;
          case idist::ReduceOp::Min: expected = std::min(expected, value(r, i)); break;
          default: expected = std::max(expected, value(r, i)); break;
        }
      }
      ASSERT_EQ(float(data[i]), expected) << "element " << i;
    }
  }
  // A NaN on any rank wins Min and Max (as torch does).
  for (idist::ReduceOp op : {idist::ReduceOp::Min, idist::ReduceOp::Max}) {
    T16 x(rank == n - 1 ? std::numeric_limits<float>::quiet_NaN() : float(rank));
    x = idist::all_reduce(x, op);
    EXPECT_TRUE(std::isnan(float(x))) << idist::to_string(op);
  }
  // Rounding happens in 16 bits: 1 + 2^-12 is 1 in half and bfloat16.
  T16 y(rank == 0 ? 1.0f : 0.000244140625f / float(n));
  y = idist::all_reduce(y, idist::ReduceOp::Max);
  EXPECT_EQ(float(y), 1.0f);
}

TEST(MpiTypes, HalfAllReduceUnderEachOp) { check_float16_all_reduce<idist::Half>(); }
TEST(MpiTypes, BFloat16AllReduceUnderEachOp) { check_float16_all_reduce<idist::BFloat16>(); }

TEST(MpiTypes, Float16AndOrAreRejected) {
  std::vector<idist::Half> h(3);
  EXPECT_THROW(idist::all_reduce(std::span<idist::Half>(h), idist::ReduceOp::And), idist::ValueError);
  std::vector<idist::BFloat16> b(3);
  EXPECT_THROW(idist::all_reduce(std::span<idist::BFloat16>(b), idist::ReduceOp::Or), idist::ValueError);
}

TEST(MpiTypes, BoolReductionsAreLogical) {
  const int rank = idist::get_rank();
  const int n = idist::get_world_size();
  // Element 0: true only on rank 0; element 1: true everywhere; element 2: false everywhere.
  const auto run = [&](idist::ReduceOp op) {
    bool v[3] = {rank == 0, true, false};
    idist::all_reduce(std::span<bool>(v, 3), op);
    return std::vector<bool>(v, v + 3);
  };
  const bool all0 = n == 1;
  EXPECT_EQ(run(idist::ReduceOp::Sum), (std::vector<bool>{true, true, false}));
  EXPECT_EQ(run(idist::ReduceOp::Or), (std::vector<bool>{true, true, false}));
  EXPECT_EQ(run(idist::ReduceOp::Max), (std::vector<bool>{true, true, false}));
  EXPECT_EQ(run(idist::ReduceOp::Product), (std::vector<bool>{all0, true, false}));
  EXPECT_EQ(run(idist::ReduceOp::And), (std::vector<bool>{all0, true, false}));
  EXPECT_EQ(run(idist::ReduceOp::Min), (std::vector<bool>{all0, true, false}));
}

TEST(MpiTypes, IntegerAndOrAreBitwise) {
  const int rank = idist::get_rank();
  const int n = idist::get_world_size();
  std::int64_t expected_or = 0;
  std::int64_t expected_and = -1;
  for (int r = 0; r < n; ++r) {
    expected_or |= std::int64_t(1) << (40 + r) | 0x3;
    expected_and &= (std::int64_t(1) << (40 + r)) | 0x3;
  }
  const std::int64_t mine = (std::int64_t(1) << (40 + rank)) | 0x3;
  EXPECT_EQ(idist::all_reduce(mine, idist::ReduceOp::Or), expected_or);
  EXPECT_EQ(idist::all_reduce(mine, idist::ReduceOp::And), expected_and);
  std::int16_t and16 = -1, or16 = 0;
  for (int r = 0; r < n; ++r) {
    and16 = std::int16_t(and16 & (0x00ff | (0x0100 << r)));
    or16 = std::int16_t(or16 | (0x00ff | (0x0100 << r)));
  }
  const auto small = std::int16_t(0x00ff | (0x0100 << rank));
  EXPECT_EQ(idist::all_reduce(small, "AND"), and16);
  EXPECT_EQ(idist::all_reduce(small, "OR"), or16);
  std::int8_t i8 = std::int8_t(-1 - rank);
  EXPECT_EQ(idist::all_reduce(i8, idist::ReduceOp::Min), std::int8_t(-n));
  std::uint8_t u8 = std::uint8_t(200 + rank);
  EXPECT_EQ(idist::all_reduce(u8, idist::ReduceOp::Max), std::uint8_t(200 + n - 1));
}

// ---------------------------------------------------------------------------------------------
// all_gather with different lengths

TEST(MpiAllGatherV, LargeUnevenCounts) {
  const int rank = idist::get_rank();
  const int n = idist::get_world_size();
  // Rank r contributes 1'000'003 * (r + 1) - r elements (about 4 MB per rank step), zero for none.
  const auto count_of = [](int r) { return std::size_t(1'000'003) * std::size_t(r + 1) - std::size_t(r); };
  std::vector<std::int32_t> mine(count_of(rank));
  for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = std::int32_t(rank * 10'000'000 + int(i % 9'999'991));
  const std::vector<std::int32_t> all = idist::all_gather(std::span<const std::int32_t>(mine));
  std::size_t expected_total = 0;
  for (int r = 0; r < n; ++r) expected_total += count_of(r);
  ASSERT_EQ(all.size(), expected_total);
  std::size_t pos = 0;
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < count_of(r); ++i, ++pos)
      ASSERT_EQ(all[pos], std::int32_t(r * 10'000'000 + int(i % 9'999'991))) << "rank " << r << " element " << i;
}

TEST(MpiAllGatherV, EmptyContributionsAndDoubles) {
  const int rank = idist::get_rank();
  const int n = idist::get_world_size();
  // Only odd ranks contribute; rank r gives r elements of value r + 0.5.
  std::vector<double> mine(rank % 2 ? std::size_t(rank) : 0, rank + 0.5);
  const std::vector<double> all = idist::all_gather(mine);
  std::vector<double> expected;
  for (int r = 1; r < n; r += 2) expected.insert(expected.end(), std::size_t(r), r + 0.5);
  EXPECT_EQ(all, expected);
}

TEST(MpiAllGatherV, ModelRejectsInconsistentCounts) {
  idist::ComputationModel& m = idist::current_model();
  const int n = idist::get_world_size();
  std::vector<float> in(2), out(std::size_t(2 * n));
  std::vector<std::size_t> wrong_size(std::size_t(n + 1), 2);
  EXPECT_THROW(m.all_gather_v(idist::ConstBuffer{in.data(), 2, idist::DType::Float32},
                              idist::Buffer{out.data(), out.size(), idist::DType::Float32}, wrong_size, {}),
               idist::ValueError);
  std::vector<std::size_t> wrong_mine(std::size_t(n), 3);
  EXPECT_THROW(m.all_gather_v(idist::ConstBuffer{in.data(), 2, idist::DType::Float32},
                              idist::Buffer{out.data(), out.size(), idist::DType::Float32}, wrong_mine, {}),
               idist::ValueError);
  std::vector<std::size_t> ok(std::size_t(n), 2);
  EXPECT_THROW(m.all_gather_v(idist::ConstBuffer{in.data(), 2, idist::DType::Float32},
                              idist::Buffer{out.data(), out.size() - 1, idist::DType::Float32}, ok, {}),
               idist::ValueError);
  EXPECT_THROW(m.all_gather_v(idist::ConstBuffer{in.data(), 2, idist::DType::Float32},
                              idist::Buffer{out.data(), out.size(), idist::DType::Int32}, ok, {}),
               idist::ValueError);
}

// ---------------------------------------------------------------------------------------------
// large buffers (with IDIST_MPI_MAX_COUNT set, these take the chunked paths)

TEST(MpiLargeBuffers, AllReduceAndBroadcastOfManyElements) {
  const int rank = idist::get_rank();
  const int n = idist::get_world_size();
  constexpr std::size_t kCount = 250'007;
  std::vector<std::int64_t> v(kCount);
  for (std::size_t i = 0; i < kCount; ++i) v[i] = std::int64_t(i) * (rank + 1);
  idist::all_reduce(v);
  const std::int64_t factor = std::int64_t(n) * (n + 1) / 2;
  for (std::size_t i = 0; i < kCount; ++i) ASSERT_EQ(v[i], std::int64_t(i) * factor) << i;

  const int src = n - 1;
  std::vector<float> b(kCount, float(rank));
  if (rank == src)
    for (std::size_t i = 0; i < kCount; ++i) b[i] = float(i % 1000) + 0.5f;
  idist::broadcast(b, src);
  for (std::size_t i = 0; i < kCount; ++i) ASSERT_EQ(b[i], float(i % 1000) + 0.5f) << i;

  // Equal-length gather of many elements per rank.
  std::vector<std::uint8_t> in(kCount, std::uint8_t(rank + 1));
  std::vector<std::uint8_t> out(kCount * std::size_t(n));
  idist::all_gather_async(std::span<const std::uint8_t>(in), std::span<std::uint8_t>(out)).wait();
  for (int r = 0; r < n; ++r)
    ASSERT_TRUE(std::all_of(out.begin() + std::ptrdiff_t(kCount) * r, out.begin() + std::ptrdiff_t(kCount) * (r + 1),
                            [&](std::uint8_t x) { return x == std::uint8_t(r + 1); }))
        << "block of rank " << r;
}

// Blocks beyond IDIST_MPI_MAX_COUNT (mpi_backend_chunked_np3), and across nodes blocks of
// kExchangeMinBlockBytes and more, go as a direct exchange of point-to-point messages on the group's
// communicator: with ranks arriving apart, several in flight at once, and a user message of the
// exchange's tag on the way, every block still lands where it belongs.
TEST(MpiLargeBuffers, ExchangedAllGathersStayInOrderBesideUserMessages) {
  idist::ComputationModel& m = idist::current_model();
  const int rank = idist::get_rank();
  const int n = idist::get_world_size();
  const std::size_t count = idist::mpi_backend::kExchangeMinBlockBytes / sizeof(float) + 3;
  std::vector<float> a(count), b(2 * count), gathered_a(count * std::size_t(n)), gathered_b(2 * count * std::size_t(n));
  for (std::size_t i = 0; i < count; ++i) a[i] = float(rank * 1000 + int(i % 997));
  for (std::size_t i = 0; i < 2 * count; ++i) b[i] = float(-rank * 1000 - int(i % 991));
  std::vector<std::size_t> counts_b(std::size_t(n), 2 * count);
  // The ranks arrive in reverse order, tens of milliseconds apart.
  std::this_thread::sleep_for(std::chrono::milliseconds(20 * (n - 1 - rank)));
  idist::Work wa = m.all_gather(idist::ConstBuffer{a.data(), count, idist::DType::Float32},
                                idist::Buffer{gathered_a.data(), gathered_a.size(), idist::DType::Float32});
  idist::Work wb = m.all_gather_v(idist::ConstBuffer{b.data(), b.size(), idist::DType::Float32},
                                  idist::Buffer{gathered_b.data(), gathered_b.size(), idist::DType::Float32}, counts_b);
  // A user message of the exchange's tag between ranks 0 and 1 while both gathers are in flight.
  std::vector<std::int32_t> note(3, rank == 0 ? 41 : -1);
  if (rank == 0)
    m.send(idist::ConstBuffer{note.data(), note.size(), idist::DType::Int32}, 1, idist::mpi_backend::kExchangeTag)
        .wait();
  if (rank == 1)
    m.recv(idist::Buffer{note.data(), note.size(), idist::DType::Int32}, 0, idist::mpi_backend::kExchangeTag).wait();
  wb.wait();
  wa.wait();
  if (rank <= 1) EXPECT_EQ(note, std::vector<std::int32_t>(3, 41));
  for (int r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < count; ++i)
      ASSERT_EQ(gathered_a[std::size_t(r) * count + i], float(r * 1000 + int(i % 997))) << "rank " << r << " " << i;
    for (std::size_t i = 0; i < 2 * count; ++i)
      ASSERT_EQ(gathered_b[std::size_t(r) * 2 * count + i], float(-r * 1000 - int(i % 991)))
          << "rank " << r << " " << i;
  }
}

// ---------------------------------------------------------------------------------------------
// groups

TEST(MpiGroups, GroupRankIsPositionInSortedList) {
  const int rank = idist::get_rank();
  const int n = idist::get_world_size();
  idist::ComputationModel& m = idist::current_model();
  // The odd ranks, listed in descending order: positions follow ascending world rank.
  std::vector<int> odd;
  for (int r = n - 1; r >= 0; --r)
    if (r % 2) odd.push_back(r);
  const idist::ProcessGroup& pg = m.process_group(odd);
  if (rank % 2)
    EXPECT_EQ(pg.rank(), rank / 2);
  else
    EXPECT_FALSE(pg.is_member());
  EXPECT_EQ(&m.process_group(odd), &pg) << "a rank list is resolved once";
  EXPECT_EQ(m.process_group(idist::Group{}).rank(), rank);
  EXPECT_THROW(m.process_group(std::vector<int>{0, n}), idist::ValueError);
  EXPECT_THROW(m.process_group(std::vector<int>{0, 0}), idist::ValueError);
}

TEST(MpiGroups, BroadcastFromWorldRankInsideGroup) {
  const int rank = idist::get_rank();
  const int n = idist::get_world_size();
  std::vector<int> tail;
  for (int r = 1; r < n; ++r) tail.push_back(r);
  const idist::Group group = idist::new_group(tail);
  const int src = n - 1;  // world rank n-1 is group rank n-2
  double x = rank * 1.25;
  idist::broadcast_async(std::span<double>(&x, 1), src, group).wait();
  EXPECT_EQ(x, rank == 0 ? 0.0 : src * 1.25) << "rank 0 is outside and keeps its value";

  // src outside the group: every member knows it is wrong before communicating.
  if (rank != 0) {
    double y = 0;
    EXPECT_THROW(idist::current_model().broadcast(idist::Buffer{&y, 1, idist::DType::Float64}, 0, group),
                 idist::ValueError);
  }
}

TEST(MpiGroups, NonMemberCollectiveOnModelReturnsItsInput) {
  idist::ComputationModel& m = idist::current_model();
  const idist::Group only1{1};
  const idist::ProcessGroup& pg = m.process_group(only1);  // every rank creates it, collectively
  if (idist::get_rank() == 1) return;
  EXPECT_FALSE(pg.is_member());
  float v = 1;
  idist::Work w = m.all_reduce(idist::Buffer{&v, 1, idist::DType::Float32}, idist::ReduceOp::Sum, only1);
  EXPECT_TRUE(w.is_completed());
  EXPECT_EQ(v, 1.0f);
}

TEST(MpiGroups, ConcurrentCollectivesOnTwoCommunicatorsFromTwoThreads) {
  const int n = idist::get_world_size();
  std::vector<int> everyone(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) everyone[std::size_t(r)] = r;
  const idist::Group world_as_list = idist::new_group(everyone);  // its own communicator
  constexpr int kIters = 200;
  std::int64_t sum_a = 0, sum_b = 0;
  std::thread a([&] {
    for (int i = 0; i < kIters; ++i) sum_a += idist::all_reduce(std::int64_t(i), idist::ReduceOp::Sum);
  });
  std::thread b([&] {
    for (int i = 0; i < kIters; ++i)
      sum_b += idist::all_reduce(std::int64_t(2 * i), idist::ReduceOp::Sum, world_as_list);
  });
  a.join();
  b.join();
  const std::int64_t base = std::int64_t(kIters) * (kIters - 1) / 2 * n;
  EXPECT_EQ(sum_a, base);
  EXPECT_EQ(sum_b, 2 * base);
}

// ---------------------------------------------------------------------------------------------
// memory and errors

TEST(MpiBuffers, NonHostBufferIsValueError) {
  idist::ComputationModel& m = idist::current_model();
  const idist::Device cuda{idist::DeviceType::CUDA, 0};
  float v[4] = {};
  try {
    m.all_reduce(idist::Buffer{v, 4, idist::DType::Float32, cuda}, idist::ReduceOp::Sum, {});
    ADD_FAILURE() << "no exception";
  } catch (const idist::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(m.broadcast(idist::Buffer{v, 4, idist::DType::Float32, cuda}, 0, {}), idist::ValueError);
  EXPECT_THROW(m.all_gather(idist::ConstBuffer{v, 1, idist::DType::Float32, cuda},
                            idist::Buffer{v, 4, idist::DType::Float32}, {}),
               idist::ValueError);
  // The rejected calls issued nothing: a collective afterwards still matches on every rank.
  EXPECT_EQ(idist::all_reduce(1), idist::get_world_size());
}

TEST(MpiWork, AsyncHandlesCompleteInIssueOrderAndCanBePolled) {
  const int n = idist::get_world_size();
  std::vector<std::int32_t> a(1000, 1), b(10, 2);
  idist::Work wa = idist::all_reduce_async(std::span<std::int32_t>(a));
  idist::Work wb = idist::all_reduce_async(std::span<std::int32_t>(b), idist::ReduceOp::Max);
  while (!wb.is_completed()) std::this_thread::yield();
  wb.wait();
  wa.wait();
  EXPECT_TRUE(wa.is_completed());
  EXPECT_EQ(wa.op(), "all_reduce");
  EXPECT_TRUE(std::all_of(a.begin(), a.end(), [&](std::int32_t x) { return x == n; }));
  EXPECT_TRUE(std::all_of(b.begin(), b.end(), [](std::int32_t x) { return x == 2; }));
}

}  // namespace
