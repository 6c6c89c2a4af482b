// The mismatch matrix's cases of the collectives ignite does not have: for each of reduce, gather,
// scatter, reduce_scatter, reduce_scatter_v, all_to_all and all_to_all_v, the last rank issues another
// collective ("<op>_vs_<other>") or the same one with another count ("<op>_count", "<op>_counts").
// Called through the ComputationModel on host Buffers (no LibTorch). Each rank contributes values
// that depend on its rank, so that the agreed result differs from what the odd call would give.
#include <numeric>
#include <set>

#include "debug/mismatch_case.hpp"
#include "idist/idist.hpp"

namespace idist::test {
namespace {

using idist::Completion;
using idist::ReduceOp;

constexpr Completion kBlocking = Completion::Blocking;

int me() { return idist::get_rank(); }
std::size_t world() { return std::size_t(idist::get_world_size()); }
bool odd() { return me() == idist::get_world_size() - 1; }
float mine() { return float(me() + 1); }
double rank_sum() { return double(world() * (world() + 1)) / 2.0; }  // an agreed SUM of every rank's mine()
idist::ComputationModel& model() { return idist::current_model(); }

idist::Buffer buf(std::vector<float>& v) { return {v.data(), v.size(), idist::DType::Float32, {}}; }
std::vector<double> first4(const std::vector<float>& v) { return {v.begin(), v.begin() + 4}; }
std::vector<double> four(double x) { return std::vector<double>(4, x); }

// reduce_scatter(_v): element k of a rank's input is mine() * (k + 1); a rank whose block starts at
// element `first` gets rank_sum() * (first + i + 1).
std::vector<float> ramp(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t k = 0; k < n; ++k) v[k] = mine() * float(k + 1);
  return v;
}
std::vector<double> ramp_sum_from(std::size_t first) {
  std::vector<double> v(4);
  for (std::size_t i = 0; i < 4; ++i) v[i] = rank_sum() * double(first + i + 1);
  return v;
}
// reduce_scatter_v's agreed blocks: 5 + j elements for group rank j (never fewer than 4).
std::vector<std::size_t> uneven_counts() {
  std::vector<std::size_t> c(world());
  std::iota(c.begin(), c.end(), std::size_t{5});
  return c;
}
std::size_t offset_of(const std::vector<std::size_t>& c, std::size_t b) {
  return std::accumulate(c.begin(), c.begin() + std::ptrdiff_t(b), std::size_t{0});
}

// all_to_all(_v): element e of the block for group rank j is 100 * mine() + 10 * j + e. Each rank
// reports the block it received from the last rank: at 2 ranks MPI pairs the others' messages with
// an all_gather's alike, so only the odd rank's block shows the mismatch.
std::vector<float> blocks_of(std::size_t per) {
  std::vector<float> v(per * world());
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = 100 * mine() + float(10 * (k / per) + k % per);
  return v;
}
std::vector<double> from_last() {
  const double first = 100.0 * double(world()) + 10.0 * me();
  return {first, first + 1, first + 2, first + 3};
}
std::vector<double> last_block(const std::vector<float>& out, std::size_t per) {
  const std::size_t at = (world() - 1) * per;
  return {out.begin() + std::ptrdiff_t(at), out.begin() + std::ptrdiff_t(at + 4)};
}

// scatter: rank 0's block j holds 10 * (j + 1).
std::vector<float> scatter_source() {
  std::vector<float> v(4 * world(), 0.0f);
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = me() == 0 ? float(10 * (k / 4 + 1)) : 0.0f;
  return v;
}

Outcome rooted(const std::string& name) {
  std::vector<float> v(odd() && name == "reduce_count" ? 8 : 4, mine());
  if (name == "reduce_vs_all_reduce" || name == "reduce_count") {
    if (odd() && name == "reduce_vs_all_reduce")
      model().all_reduce(buf(v), ReduceOp::Sum, {}, kBlocking);
    else
      model().reduce(buf(v), ReduceOp::Sum, 0, {}, kBlocking);
    return {first4(v), four(me() == 0 ? rank_sum() : mine())};
  }
  std::vector<float> out(4 * world(), 0.0f);
  if (name == "gather_vs_all_gather" || name == "gather_count") {
    std::vector<float> in(odd() && name == "gather_count" ? 8 : 4, mine());
    if (odd() && name == "gather_vs_all_gather")
      model().all_gather(buf(in), buf(out), {}, kBlocking);
    else
      model().gather(buf(in), buf(out), 0, {}, kBlocking);
    return {first4(out), four(me() == 0 ? 1.0 : 0.0)};  // only the root's `out` is written
  }
  // scatter_vs_gather: the last rank sends its part to the root instead of receiving one (MPI pairs a
  // broadcast's message with a scatter's alike). scatter_count: the last rank expects 3 elements, not
  // 4 (a larger buffer would take the 4 unnoticed); its fourth keeps mine().
  std::vector<float> in = scatter_source(), part(4, mine());
  idist::Buffer mine_part = buf(part);
  if (odd() && name == "scatter_count") mine_part.count = 3;
  if (odd() && name == "scatter_vs_gather")
    model().gather(mine_part, buf(out), 0, {}, kBlocking);
  else
    model().scatter(buf(in), mine_part, 0, {}, kBlocking);
  return {first4(part), four(10.0 * (me() + 1))};
}

Outcome reduce_scatters(const std::string& name) {
  if (name == "reduce_scatter_vs_all_reduce" || name == "reduce_scatter_count") {
    const std::size_t per = odd() && name == "reduce_scatter_count" ? 8 : 4;
    std::vector<float> in = ramp(per * world()), out(per, 0.0f);
    if (odd() && name == "reduce_scatter_vs_all_reduce") {
      out.assign(4, mine());
      model().all_reduce(buf(out), ReduceOp::Sum, {}, kBlocking);
    } else {
      model().reduce_scatter(buf(in), buf(out), ReduceOp::Sum, {}, kBlocking);
    }
    return {first4(out), ramp_sum_from(4 * std::size_t(me()))};
  }
  // reduce_scatter_v_vs_reduce_scatter, reduce_scatter_v_counts
  const std::vector<std::size_t> agreed = uneven_counts();
  std::vector<std::size_t> counts = agreed;
  if (odd() && name == "reduce_scatter_v_counts") counts.front() += 1;  // block 0 longer: its own one moves
  std::vector<float> in = ramp(offset_of(counts, counts.size())), out(counts[std::size_t(me())], 0.0f);
  if (odd() && name == "reduce_scatter_v_vs_reduce_scatter") {
    in = ramp(4 * world());
    out.assign(4, 0.0f);
    model().reduce_scatter(buf(in), buf(out), ReduceOp::Sum, {}, kBlocking);
  } else {
    model().reduce_scatter_v(buf(in), buf(out), counts, ReduceOp::Sum, {}, kBlocking);
  }
  return {first4(out), ramp_sum_from(offset_of(agreed, std::size_t(me())))};
}

Outcome all_to_alls(const std::string& name) {
  if (name == "all_to_all_vs_all_gather" || name == "all_to_all_count") {
    const std::size_t per = odd() && name == "all_to_all_count" ? 8 : 4;
    std::vector<float> in = blocks_of(per), out(per * world(), 0.0f);
    if (odd() && name == "all_to_all_vs_all_gather") {
      std::vector<float> part(4, mine());
      model().all_gather(buf(part), buf(out), {}, kBlocking);
    } else {
      model().all_to_all(buf(in), buf(out), {}, kBlocking);
    }
    return {last_block(out, per), from_last()};
  }
  // all_to_all_v_vs_all_to_all: the others exchange 5 elements per pair, the last rank 4 with
  // all_to_all. all_to_all_v_counts: the last rank sends and expects 5 per pair, the others 4.
  const bool vs = name == "all_to_all_v_vs_all_to_all";
  const std::size_t per = (vs && !odd()) || (!vs && odd()) ? 5 : 4;
  std::vector<float> in = blocks_of(per), out(per * world(), 0.0f);
  const std::vector<std::size_t> counts(world(), per);
  if (vs && odd())
    model().all_to_all(buf(in), buf(out), {}, kBlocking);
  else
    model().all_to_all_v(buf(in), buf(out), counts, counts, {}, kBlocking);
  return {last_block(out, per), from_last()};
}

}  // namespace

std::optional<Outcome> run_beyond_ignite_case(const std::string& name) {
  static const std::set<std::string> known = {"reduce_vs_all_reduce",
                                              "reduce_count",
                                              "gather_vs_all_gather",
                                              "gather_count",
                                              "scatter_vs_gather",
                                              "scatter_count",
                                              "reduce_scatter_vs_all_reduce",
                                              "reduce_scatter_count",
                                              "reduce_scatter_v_vs_reduce_scatter",
                                              "reduce_scatter_v_counts",
                                              "all_to_all_vs_all_gather",
                                              "all_to_all_count",
                                              "all_to_all_v_vs_all_to_all",
                                              "all_to_all_v_counts"};
  if (!known.contains(name)) return std::nullopt;
  if (name.starts_with("reduce_scatter")) return reduce_scatters(name);
  if (name.starts_with("reduce_") || name.starts_with("gather_") || name.starts_with("scatter_")) return rooted(name);
  if (name.starts_with("all_to_all")) return all_to_alls(name);
  return std::nullopt;
}

}  // namespace idist::test
