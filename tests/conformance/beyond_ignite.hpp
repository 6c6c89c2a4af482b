#pragma once
// Helpers of the conformance tests of the collectives ignite does not have (reduce, gather, scatter,
// reduce_scatter(_v), all_to_all(_v), send / recv), called through the ComputationModel on Buffers so
// that they need no LibTorch. Every input depends on the rank and the element position; the expected
// results are computed here on the host from those formulas, never by another collective.
#include <numeric>

#include "conformance/conformance.hpp"

namespace idist::conformance {

/// The groups each test runs over: the world, and the world without rank 1 (at 3 ranks or more a
/// group whose world ranks are not its group ranks, and rank 1 is outside it; at 2 ranks the one-rank
/// group {0}; at 1 rank {0}).
inline std::vector<idist::Group> test_groups() {
  std::vector<int> ranks;
  for (int r = 0; r < world(); ++r)
    if (r != 1) ranks.push_back(r);
  return {idist::Group{}, idist::Group(ranks)};
}

/// The one-rank group of this rank. Every rank makes every such group (new_group is collective), so
/// each rank can then be the root of a call no other rank joins.
inline idist::Group own_group() {
  idist::Group mine;
  for (int r = 0; r < world(); ++r) {
    idist::Group g = idist::new_group({r});
    if (r == rank()) mine = g;
  }
  return mine;
}

/// The world ranks of `g` in group rank order.
inline std::vector<int> members(const idist::Group& g) {
  if (!g.is_world()) {
    std::vector<int> m = g.ranks();
    std::sort(m.begin(), m.end());
    return m;
  }
  std::vector<int> m(static_cast<std::size_t>(world()));
  std::iota(m.begin(), m.end(), 0);
  return m;
}

/// This rank's position in `g`, -1 outside it.
inline int group_rank(const idist::Group& g) {
  const std::vector<int> m = members(g);
  const auto it = std::find(m.begin(), m.end(), rank());
  return it == m.end() ? -1 : int(it - m.begin());
}

/// The ReduceOps element type T takes with exact results here (And / Or only on integers).
template <class T>
std::vector<idist::ReduceOp> reduce_ops() {
  std::vector<idist::ReduceOp> ops = {idist::ReduceOp::Sum, idist::ReduceOp::Product, idist::ReduceOp::Min,
                                      idist::ReduceOp::Max};
  if constexpr (std::is_integral_v<T>) {
    ops.push_back(idist::ReduceOp::And);
    ops.push_back(idist::ReduceOp::Or);
  }
  return ops;
}

/// Element i of world rank r's input to a reduction with `op`: small positive integers, so that a sum
/// or product over four ranks stays exact in every element type (int8: 127, bfloat16: 256); products
/// take 1 or 2.
inline std::int64_t reduce_input(idist::ReduceOp op, int r, std::size_t i) {
  if (op == idist::ReduceOp::Product) return 1 + std::int64_t((std::size_t(r) + i) % 2);
  return 1 + std::int64_t((std::size_t(r) * 5 + i * 3) % 11);
}

/// `op` over reduce_input(op, r, i) of the world ranks `ranks`.
inline std::int64_t reduce_oracle(idist::ReduceOp op, const std::vector<int>& ranks, std::size_t i) {
  std::int64_t acc = reduce_input(op, ranks.front(), i);
  for (std::size_t k = 1; k < ranks.size(); ++k) {
    const std::int64_t v = reduce_input(op, ranks[k], i);
    switch (op) {
      case idist::ReduceOp::Sum: acc += v; break;
      case idist::ReduceOp::Product: acc *= v; break;
      case idist::ReduceOp::Min: acc = std::min(acc, v); break;
      case idist::ReduceOp::Max: acc = std::max(acc, v); break;
      case idist::ReduceOp::And: acc &= v; break;
      case idist::ReduceOp::Or: acc |= v; break;
    }
  }
  return acc;
}

/// Element i of the block world rank `src` sends to group rank `dst` (gather, scatter, all_to_all):
/// both ranks and the position show in the value, within every element type's exact range.
inline std::int64_t block_value(int src, int dst, std::size_t i) {
  return std::int64_t((std::size_t(src) * 31 + std::size_t(dst) * 7 + i) % 101);
}

/// `n` elements of T, element i = f(i).
template <class T, class F>
std::vector<T> values(std::size_t n, F&& f) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = from_int<T>(f(i));
  return v;
}

/// A Buffer over a SpanBuffer, on the memory the backend reads spans from.
template <class T>
idist::Buffer buffer(SpanBuffer<T>& b) {
  return idist::Buffer{b.span().data(), b.span().size(), idist::dtype_of<T>, idist::current_model().buffer_device()};
}

/// The same, read-only.
template <class T>
idist::ConstBuffer const_buffer(SpanBuffer<T>& b) {
  return idist::ConstBuffer(buffer(b));
}

/// "<type> <op> group <g>", for failure messages.
template <class T>
std::string where(idist::ReduceOp op, const idist::Group& g) {
  return type_name<T>() + " " + std::string(idist::to_string(op)) + " group " + g.str();
}

/// The element types of these tests: every numeric type (bool has its own reduction rules, tested
/// by all_reduce_test.cpp).
using BeyondTypes = NumericElementTypes;

}  // namespace idist::conformance
