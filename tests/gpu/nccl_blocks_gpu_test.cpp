// The nccl backend's rooted, block and point-to-point operations on device memory: reduce, gather,
// scatter, reduce_scatter, reduce_scatter_v, all_to_all, all_to_all_v, send / recv (blocking) and
// their non-blocking forms, at any world size (one process per GPU). Every expectation is computed on
// the host from the rank and the world size.
//
// Results are read with DeviceBuffer::host(), a cudaMemcpy on the legacy default stream (the caller's
// stream here): it is ordered after Work::wait() both where wait() blocks the host and where it only
// makes the caller's stream wait for the operation, as ProcessGroupNCCL's work.wait() does.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "gpu_support.hpp"
#include "idist/idist.hpp"

namespace idist::gpu_test {
namespace {

int ws() { return get_world_size(); }
int rk() { return get_rank(); }
ComputationModel& model() { return current_model(); }

template <class T>
Buffer on_device(const DeviceBuffer<T>& d) {
  return Buffer{d.data(), d.size(), dtype_of<T>, device()};
}
template <class T>
ConstBuffer const_on_device(const DeviceBuffer<T>& d) {
  return ConstBuffer(on_device(d));
}
template <class T>
Buffer on_host(std::vector<T>& v) {
  return Buffer{v.data(), v.size(), dtype_of<T>, Device{}};
}

constexpr Completion kCompletions[] = {Completion::Async, Completion::Blocking};
const char* name_of(Completion how) { return how == Completion::Async ? "async" : "blocking"; }

// Rank r's element i for the reductions: 1, 2 or 3, so that a product over many ranks stays exact.
std::int64_t reduce_input(int r, std::size_t i) { return 1 + std::int64_t((std::size_t(r) + i) % 3); }

std::int64_t reduce_oracle(ReduceOp op, std::size_t i) {
  std::int64_t acc = reduce_input(0, i);
  for (int r = 1; r < ws(); ++r) {
    const std::int64_t v = reduce_input(r, i);
    if (op == ReduceOp::Sum) acc += v;
    if (op == ReduceOp::Product) acc *= v;
    if (op == ReduceOp::Min) acc = std::min(acc, v);
    if (op == ReduceOp::Max) acc = std::max(acc, v);
  }
  return acc;
}

// What rank `from` sends to rank `to` in the block exchanges: element e is from * 10000 + to * 100 + e.
std::vector<double> block_of(int from, int to, std::size_t count) {
  std::vector<double> v(count);
  for (std::size_t e = 0; e < count; ++e) v[e] = double(from) * 10000 + double(to) * 100 + double(e);
  return v;
}

void append(std::vector<double>& to, const std::vector<double>& more) { to.insert(to.end(), more.begin(), more.end()); }

class NcclBlocks : public GpuTest {};

TEST_F(NcclBlocks, ReduceToEveryDestinationWithEveryOp) {
  const std::size_t n = 1003;
  std::vector<std::int64_t> mine(n);
  for (std::size_t i = 0; i < n; ++i) mine[i] = reduce_input(rk(), i);
  for (int dst = 0; dst < ws(); ++dst)
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max})
      for (Completion how : kCompletions) {
        DeviceBuffer<std::int64_t> d(mine);
        model().reduce(on_device(d), op, dst, Group{}, how).wait();
        const std::vector<std::int64_t> out = d.host();
        for (std::size_t i = 0; i < n; ++i)  // the other ranks keep their input
          ASSERT_EQ(out[i], rk() == dst ? reduce_oracle(op, i) : mine[i])
              << to_string(op) << " dst " << dst << " " << name_of(how) << " element " << i;
      }
}

TEST_F(NcclBlocks, ReduceOfFloatingTypesAndBool) {
  const int dst = ws() - 1;
  const bool root = rk() == dst;
  const float ranks_sum = float(ws() * (ws() + 1) / 2);
  std::vector<float> f(777);
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = float(rk() + 1) + float(i);
  DeviceBuffer<float> df(f);
  model().reduce(on_device(df), ReduceOp::Sum, dst).wait();
  const std::vector<float> fo = df.host();
  for (std::size_t i = 0; i < f.size(); ++i) ASSERT_EQ(fo[i], root ? ranks_sum + float(ws()) * float(i) : f[i]) << i;

  DeviceBuffer<Half> h(std::vector<Half>(64, Half(float(rk() + 1))));
  model().reduce(on_device(h), ReduceOp::Sum, dst).wait();
  for (Half v : h.host()) ASSERT_EQ(float(v), root ? ranks_sum : float(rk() + 1));

  DeviceBuffer<BFloat16> b(std::vector<BFloat16>(64, BFloat16(float(rk() + 1))));
  model().reduce(on_device(b), ReduceOp::Max, dst).wait();
  for (BFloat16 v : b.host()) ASSERT_EQ(float(v), root ? float(ws()) : float(rk() + 1));

  // true on even ranks only: "any" is true, "all" only in a world of 1.
  const bool even = rk() % 2 == 0;
  DeviceBuffer<bool> any(std::vector<bool>{even, false}), all(std::vector<bool>{even, true});
  model().reduce(on_device(any), ReduceOp::Or, dst).wait();
  model().reduce(on_device(all), ReduceOp::And, dst).wait();
  EXPECT_EQ(any.host(), root ? std::vector<bool>({true, false}) : std::vector<bool>({even, false}));
  EXPECT_EQ(all.host(), root ? std::vector<bool>({ws() == 1, true}) : std::vector<bool>({even, true}));
}

TEST_F(NcclBlocks, GatherToEveryDestinationInRankOrder) {
  const std::size_t k = 3;
  std::vector<double> expected;
  for (int r = 0; r < ws(); ++r) append(expected, block_of(r, 0, k));
  DeviceBuffer<double> in(block_of(rk(), 0, k));
  for (int dst = 0; dst < ws(); ++dst)
    for (Completion how : kCompletions)
      for (bool out_everywhere : {true, false}) {
        // `out` is not used off the root: there it is either left as it was or not passed at all.
        DeviceBuffer<double> out(std::vector<double>(k * std::size_t(ws()), -1.0));
        const Buffer dout = rk() == dst || out_everywhere ? on_device(out) : Buffer{};
        model().gather(const_on_device(in), dout, dst, Group{}, how).wait();
        EXPECT_EQ(out.host(), rk() == dst ? expected : std::vector<double>(k * std::size_t(ws()), -1.0))
            << "dst " << dst << " " << name_of(how);
      }
}

TEST_F(NcclBlocks, ScatterFromEverySourceGivesBlockIToRankI) {
  const std::size_t k = 4;
  for (int src = 0; src < ws(); ++src)
    for (Completion how : kCompletions) {
      std::vector<double> blocks;
      for (int r = 0; r < ws(); ++r) append(blocks, block_of(src, r, k));
      // `in` is not used off the source: nothing is passed there.
      DeviceBuffer<double> in(rk() == src ? blocks : std::vector<double>{});
      DeviceBuffer<double> out(std::vector<double>(k, -1.0));
      model().scatter(rk() == src ? const_on_device(in) : ConstBuffer{}, on_device(out), src, Group{}, how).wait();
      EXPECT_EQ(out.host(), block_of(src, rk(), k)) << "src " << src << " " << name_of(how);
    }
}

TEST_F(NcclBlocks, ReduceScatterGivesEachRankItsReducedBlock) {
  const std::size_t k = 1000;
  const std::size_t n = k * std::size_t(ws());
  // Element q of rank r: (r + 1) * (q % 7 + 1).
  std::vector<float> in(n);
  for (std::size_t q = 0; q < n; ++q) in[q] = float(rk() + 1) * float(q % 7 + 1);
  const float ranks_sum = float(ws() * (ws() + 1) / 2);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min})
    for (Completion how : kCompletions) {
      DeviceBuffer<float> din(in);
      DeviceBuffer<float> out(std::vector<float>(k, -1.0f));
      model().reduce_scatter(const_on_device(din), on_device(out), op, Group{}, how).wait();
      const std::vector<float> got = out.host();
      const float factor = op == ReduceOp::Sum ? ranks_sum : op == ReduceOp::Max ? float(ws()) : 1.0f;
      for (std::size_t i = 0; i < k; ++i)
        ASSERT_EQ(got[i], factor * float((std::size_t(rk()) * k + i) % 7 + 1))
            << to_string(op) << " " << name_of(how) << " element " << i;
      EXPECT_EQ(din.host(), in) << "the input is left as it was";
    }
  // A 16-bit type NCCL reduces natively.
  DeviceBuffer<BFloat16> b(std::vector<BFloat16>(2 * std::size_t(ws()), BFloat16(float(rk() + 1))));
  DeviceBuffer<BFloat16> bo(2);
  model().reduce_scatter(const_on_device(b), on_device(bo), ReduceOp::Sum).wait();
  for (BFloat16 v : bo.host()) EXPECT_EQ(float(v), ranks_sum);
}

TEST_F(NcclBlocks, ReduceScatterVOfUnevenAndEmptyBlocks) {
  // Group rank r receives 2r + 3 elements, rank 1 none.
  std::vector<std::size_t> counts;
  for (int r = 0; r < ws(); ++r) counts.push_back(r == 1 ? 0 : std::size_t(2 * r + 3));
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t(0));
  const std::size_t offset =
      std::accumulate(counts.begin(), counts.begin() + rk(), std::size_t(0));  // where this rank's block starts
  const std::size_t mine = counts[std::size_t(rk())];
  std::vector<double> in(total);
  for (std::size_t q = 0; q < total; ++q) in[q] = double(rk() + 1) + double(q);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max})
    for (Completion how : kCompletions) {
      DeviceBuffer<double> din(in);
      DeviceBuffer<double> out(std::vector<double>(mine, -1.0));
      model().reduce_scatter_v(const_on_device(din), on_device(out), counts, op, Group{}, how).wait();
      std::vector<double> expected(mine);
      for (std::size_t i = 0; i < mine; ++i)
        expected[i] = op == ReduceOp::Sum ? double(ws() * (ws() + 1) / 2) + double(ws()) * double(offset + i)
                                          : double(ws()) + double(offset + i);
      EXPECT_EQ(out.host(), expected) << to_string(op) << " " << name_of(how);
    }
}

TEST_F(NcclBlocks, AllToAllSendsBlockJToRankJ) {
  const std::size_t k = 5;
  std::vector<double> in, expected;
  for (int j = 0; j < ws(); ++j) append(in, block_of(rk(), j, k));
  for (int i = 0; i < ws(); ++i) append(expected, block_of(i, rk(), k));
  for (Completion how : kCompletions) {
    DeviceBuffer<double> din(in);
    DeviceBuffer<double> out(std::vector<double>(in.size(), -1.0));
    model().all_to_all(const_on_device(din), on_device(out), Group{}, how).wait();
    EXPECT_EQ(out.host(), expected) << name_of(how);
  }
  // Blocks of an odd number of bytes: the exchange moves bytes, whatever the element type.
  const std::size_t b = 3;
  std::vector<std::uint8_t> bytes_in, bytes_expected;
  for (int j = 0; j < ws(); ++j)
    for (std::size_t e = 0; e < b; ++e) bytes_in.push_back(std::uint8_t(rk() * 16 + j * 4 + int(e)));
  for (int i = 0; i < ws(); ++i)
    for (std::size_t e = 0; e < b; ++e) bytes_expected.push_back(std::uint8_t(i * 16 + rk() * 4 + int(e)));
  DeviceBuffer<std::uint8_t> bin(bytes_in), bout(bytes_in.size());
  model().all_to_all(const_on_device(bin), on_device(bout)).wait();
  EXPECT_EQ(bout.host(), bytes_expected);
}

TEST_F(NcclBlocks, AllToAllVWithUnevenAndEmptyBlocks) {
  // Two schemes of how many elements rank `from` sends to rank `to`: never none, and none at times.
  const std::vector<std::size_t (*)(int, int)> schemes = {
      [](int from, int to) { return std::size_t(from + to + 1); },
      [](int from, int to) { return std::size_t((from + 2 * to) % 3); }};
  for (std::size_t s = 0; s < schemes.size(); ++s)
    for (Completion how : kCompletions) {
      const auto sends = schemes[s];
      std::vector<std::size_t> in_counts, out_counts;
      std::vector<double> in, expected;
      for (int j = 0; j < ws(); ++j) {
        in_counts.push_back(sends(rk(), j));
        append(in, block_of(rk(), j, in_counts.back()));
        out_counts.push_back(sends(j, rk()));
        append(expected, block_of(j, rk(), out_counts.back()));
      }
      DeviceBuffer<double> din(in);
      DeviceBuffer<double> out(std::vector<double>(expected.size(), -1.0));
      model().all_to_all_v(const_on_device(din), on_device(out), out_counts, in_counts, Group{}, how).wait();
      EXPECT_EQ(out.host(), expected) << "scheme " << s << " " << name_of(how);
    }
}

TEST_F(NcclBlocks, BlockingSendAndRecvBetweenRankZeroAndEveryOther) {
  if (ws() < 2)
    GTEST_SKIP()
        << "needs 2 ranks (a message to this rank is refused: see BadArgumentsAreRefusedBeforeAnyCommunication)";
  const std::size_t n = std::size_t(1) << 18;  // 1 MiB of floats, past NCCL's small-message path
  const auto values = [n](int seed) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = float(seed) * 1000.0f + float(i % 1000);
    return v;
  };
  for (int peer = 1; peer < ws(); ++peer) {
    if (rk() == 0) {
      DeviceBuffer<float> out(values(peer));
      model().send(const_on_device(out), peer, 0, Completion::Blocking);
      DeviceBuffer<float> back(n);
      model().recv(on_device(back), peer, 0, Completion::Blocking);
      EXPECT_EQ(back.host(), values(peer + 100)) << "reply of rank " << peer;
    } else if (rk() == peer) {
      DeviceBuffer<float> got(n);
      model().recv(on_device(got), 0, 0, Completion::Blocking);
      EXPECT_EQ(got.host(), values(peer));
      DeviceBuffer<float> reply(values(peer + 100));
      model().send(const_on_device(reply), 0, 0, Completion::Blocking);
    }
  }
}

TEST_F(NcclBlocks, IsendAndIrecvAroundTheRingOnDeviceAndHostMemory) {
  if (ws() < 2)
    GTEST_SKIP()
        << "needs 2 ranks (a message to this rank is refused: see BadArgumentsAreRefusedBeforeAnyCommunication)";
  const int next = (rk() + 1) % ws();
  const int prev = (rk() + ws() - 1) % ws();
  const std::size_t n = 300000;
  const auto values = [n](int r) {
    std::vector<std::int32_t> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = std::int32_t(r * 1000000 + int(i));
    return v;
  };
  for (bool host : {false, true}) {
    std::vector<std::int32_t> mine = values(rk());
    std::vector<std::int32_t> got_host(n, -1);
    DeviceBuffer<std::int32_t> send_buf(mine), recv_buf(std::vector<std::int32_t>(n, -1));
    const ConstBuffer out = host ? ConstBuffer(on_host(mine)) : const_on_device(send_buf);
    const Buffer in = host ? on_host(got_host) : on_device(recv_buf);
    // Both go to one stream in issue order: if every rank posted its send first, a send could wait
    // for a receive queued behind the peer's own send. Even ranks send first, odd ranks receive first.
    Work first, second;
    if (rk() % 2 == 0) {
      first = model().send(out, next, 3);
      second = model().recv(in, prev, 3);
    } else {
      first = model().recv(in, prev, 3);
      second = model().send(out, next, 3);
    }
    second.wait();
    first.wait();
    EXPECT_EQ(host ? got_host : recv_buf.host(), values(prev)) << (host ? "host" : "device") << " memory";
  }
}

TEST_F(NcclBlocks, RootsAreWorldRanksInAGroupWithoutRankZero) {
  // Ranks 1 .. ws - 1 (rank 0 alone in a world of 1); group rank g is world rank first + g.
  const int first = ws() > 1 ? 1 : 0;
  std::vector<int> members(std::size_t(ws() - first));
  std::iota(members.begin(), members.end(), first);
  const Group g = new_group(members);
  const std::size_t size = members.size();
  const bool member = rk() >= first;
  const int root = ws() - 1;  // a world rank: the group's last

  DeviceBuffer<std::int32_t> d(std::vector<std::int32_t>(8, rk() + 1));
  model().reduce(on_device(d), ReduceOp::Sum, root, g).wait();
  std::int32_t members_sum = 0;
  for (int r : members) members_sum += r + 1;
  EXPECT_EQ(d.host(), std::vector<std::int32_t>(8, rk() == root ? members_sum : rk() + 1)) << "reduce";

  std::vector<double> blocks;
  for (int r : members) append(blocks, block_of(root, r, 2));
  DeviceBuffer<double> in(rk() == root ? blocks : std::vector<double>{});
  DeviceBuffer<double> out(std::vector<double>(2, -1.0));
  model().scatter(rk() == root ? const_on_device(in) : ConstBuffer{}, on_device(out), root, g).wait();
  EXPECT_EQ(out.host(), member ? block_of(root, rk(), 2) : std::vector<double>(2, -1.0)) << "scatter";

  DeviceBuffer<double> mine(block_of(rk(), root, 2));
  DeviceBuffer<double> gathered(std::vector<double>(2 * size, -1.0));
  model().gather(const_on_device(mine), on_device(gathered), root, g).wait();
  std::vector<double> expected;
  for (int r : members) append(expected, block_of(r, root, 2));
  EXPECT_EQ(gathered.host(), rk() == root ? expected : std::vector<double>(2 * size, -1.0)) << "gather";

  // Block j goes to group rank j: world rank first + j.
  std::vector<double> exchange, exchanged;
  for (int r : members) append(exchange, block_of(rk(), r, 3));
  for (int r : members) append(exchanged, block_of(r, rk(), 3));
  DeviceBuffer<double> ein(exchange), eout(std::vector<double>(exchange.size(), -1.0));
  model().all_to_all(const_on_device(ein), on_device(eout), g).wait();
  EXPECT_EQ(eout.host(), member ? exchanged : std::vector<double>(exchange.size(), -1.0)) << "all_to_all";
}

TEST_F(NcclBlocks, HostBuffersAreStagedThroughTheDevice) {
  // Host results are copied out when the Work completes: readable right after wait().
  const std::size_t k = 6;
  std::vector<double> in, rs_expected(k, 0.0), a2a_expected;
  for (int j = 0; j < ws(); ++j) append(in, block_of(rk(), j, k));
  for (int r = 0; r < ws(); ++r) {
    const std::vector<double> theirs = block_of(r, rk(), k);
    for (std::size_t e = 0; e < k; ++e) rs_expected[e] += theirs[e];
    append(a2a_expected, theirs);
  }
  std::vector<double> rs_out(k, -1.0), a2a_out(in.size(), -1.0), gathered(in.size(), -1.0);
  model().reduce_scatter(ConstBuffer(on_host(in)), on_host(rs_out), ReduceOp::Sum).wait();
  EXPECT_EQ(rs_out, rs_expected) << "reduce_scatter";
  model().all_to_all(ConstBuffer(on_host(in)), on_host(a2a_out)).wait();
  EXPECT_EQ(a2a_out, a2a_expected) << "all_to_all";
  std::vector<double> piece = block_of(rk(), 0, k);
  model().gather(ConstBuffer(on_host(piece)), on_host(gathered), 0).wait();
  std::vector<double> g_expected;
  for (int r = 0; r < ws(); ++r) append(g_expected, block_of(r, 0, k));
  EXPECT_EQ(gathered, rk() == 0 ? g_expected : std::vector<double>(in.size(), -1.0)) << "gather";
}

TEST_F(NcclBlocks, OperationsInFlightTogetherAllComplete) {
  // Five kinds issued before any wait, then waited for in reverse order.
  const std::size_t k = 4096;
  const std::size_t n = k * std::size_t(ws());
  std::vector<double> in;
  for (int j = 0; j < ws(); ++j) append(in, block_of(rk(), j, k));
  DeviceBuffer<double> din(in);
  DeviceBuffer<double> rs(k), a2a(n), gathered(n), scattered(k);
  DeviceBuffer<std::int64_t> reduced(std::vector<std::int64_t>(k, rk() + 1));
  std::vector<Work> works;
  works.push_back(model().reduce_scatter(const_on_device(din), on_device(rs), ReduceOp::Sum));
  works.push_back(model().all_to_all(const_on_device(din), on_device(a2a)));
  // The gather sends din's first block: block_of(rank, 0, k).
  works.push_back(model().gather(ConstBuffer(din.data(), k, DType::Float64, device()), on_device(gathered), 0));
  works.push_back(
      model().scatter(rk() == ws() - 1 ? const_on_device(din) : ConstBuffer{}, on_device(scattered), ws() - 1));
  works.push_back(model().reduce(on_device(reduced), ReduceOp::Sum, 0));
  for (auto w = works.rbegin(); w != works.rend(); ++w) w->wait();

  std::vector<double> rs_expected(k, 0.0), a2a_expected, g_expected;
  for (int r = 0; r < ws(); ++r) {
    const std::vector<double> theirs = block_of(r, rk(), k);
    for (std::size_t e = 0; e < k; ++e) rs_expected[e] += theirs[e];
    append(a2a_expected, theirs);
    append(g_expected, block_of(r, 0, k));
  }
  EXPECT_EQ(rs.host(), rs_expected) << "reduce_scatter";
  EXPECT_EQ(a2a.host(), a2a_expected) << "all_to_all";
  if (rk() == 0) {
    EXPECT_EQ(gathered.host(), g_expected) << "gather";
  }
  EXPECT_EQ(scattered.host(), block_of(ws() - 1, rk(), k)) << "scatter";
  EXPECT_EQ(reduced.host(), std::vector<std::int64_t>(k, rk() == 0 ? ws() * (ws() + 1) / 2 : rk() + 1)) << "reduce";
}

TEST_F(NcclBlocks, BadArgumentsAreRefusedBeforeAnyCommunication) {
  // Each call fails on every rank before it reaches NCCL, so the ranks stay in step.
  DeviceBuffer<float> six(std::vector<float>(6, 1.0f)), one(1);
  EXPECT_THROW(model().reduce(on_device(six), ReduceOp::Sum, ws()), ValueError);
  EXPECT_THROW(model().reduce(on_device(six), ReduceOp::Sum, -1), ValueError);
  EXPECT_THROW(model().reduce(on_device(six), ReduceOp::And, 0), ValueError);
  // This rank as the root, with a buffer of the wrong size there.
  EXPECT_THROW(model().gather(const_on_device(six), on_device(one), rk()), ValueError);
  EXPECT_THROW(model().scatter(const_on_device(one), on_device(six), rk()), ValueError);
  EXPECT_THROW(model().reduce_scatter(const_on_device(one), on_device(six), ReduceOp::Sum), ValueError);
  EXPECT_THROW(model().all_to_all(const_on_device(six), on_device(one)), ValueError);
  const std::vector<std::size_t> too_many(std::size_t(ws() + 1), 1);
  EXPECT_THROW(model().reduce_scatter_v(const_on_device(six), on_device(one), too_many, ReduceOp::Sum), ValueError);
  EXPECT_THROW(model().all_to_all_v(const_on_device(six), on_device(six), too_many, too_many), ValueError);
  EXPECT_THROW(model().send(const_on_device(six), rk()), ValueError);
  EXPECT_THROW(model().recv(on_device(six), rk()), ValueError);
  EXPECT_THROW(model().send(const_on_device(six), ws()), ValueError);
  EXPECT_THROW(model().recv(on_device(six), -1), ValueError);
  if (ws() > 1) {
    EXPECT_THROW(model().send(const_on_device(six), (rk() + 1) % ws(), -1), ValueError);
  }
  // NCCL cannot reduce int16 and the rooted reductions have no host fallback: refused, naming the type.
  DeviceBuffer<std::int16_t> shorts(std::vector<std::int16_t>(4, 1));
  try {
    model().reduce(on_device(shorts), ReduceOp::Sum, 0);
    ADD_FAILURE() << "reduce of int16: no error";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("int16"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace idist::gpu_test
