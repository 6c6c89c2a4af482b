#pragma once
/// @file
/// one_rank_only and one_rank_first (ignite.distributed.utils' decorator and context manager).

#include <exception>
#include <functional>
#include <optional>
#include <type_traits>
#include <utility>

#include "idist/collectives.hpp"
#include "idist/context.hpp"

namespace idist {

/// Wraps `fn` so that calling the result runs `fn` only on world rank `rank`, returning its result
/// as std::optional (std::nullopt elsewhere; a reference result is copied; for a void `fn`, the
/// callable returns void). With
/// `with_barrier`, every rank then waits on a barrier. Mirrors ignite.distributed.one_rank_only.
///
///     auto log = idist::one_rank_only([](int epoch) { fmt::print("epoch {}\n", epoch); });
///     log(3);  // prints once
template <class Fn>
auto one_rank_only(Fn fn, int rank = 0, bool with_barrier = false) {
  return [fn = std::move(fn), rank, with_barrier](auto&&... args) {
    using R = std::invoke_result_t<const Fn&, decltype(args)...>;
    if constexpr (std::is_void_v<R>) {
      if (get_rank() == rank) std::invoke(fn, std::forward<decltype(args)>(args)...);
      if (with_barrier) barrier();
    } else {
      std::optional<std::decay_t<R>> out;  // a returned reference is copied: optional<T&> does not exist
      if (get_rank() == rank) out.emplace(std::invoke(fn, std::forward<decltype(args)>(args)...));
      if (with_barrier) barrier();
      return out;
    }
  };
}

/// RAII form of ignite.distributed.one_rank_first: the block guarded by this object runs first on
/// `rank` and then, concurrently, on all other ranks.
///
///     { idist::OneRankFirst guard;  download_dataset(); }   // rank 0 downloads, the others reuse
///
/// `rank` is a world rank, or a local rank when `local` is true. Other ranks wait in the
/// constructor (a barrier); the designated rank releases them in its destructor, also when the
/// block throws, so an exception never leaves the others waiting.
class OneRankFirst {
 public:
  /// @throws ValueError when `rank` is outside [0, world size) (or [0, nproc per node) when local):
  ///         "rank should be between 0 and N-1, but given R".
  explicit OneRankFirst(int rank = 0, bool local = false);
  /// Releases the other ranks (designated rank). Barrier errors during unwinding are swallowed so
  /// that the block's own exception propagates.
  ~OneRankFirst() noexcept(false);
  OneRankFirst(const OneRankFirst&) = delete;
  OneRankFirst& operator=(const OneRankFirst&) = delete;

 private:
  bool is_first_ = false;
  int uncaught_ = 0;
};

/// Function form: runs `fn()` first on `rank`, then on the others; returns its result.
/// Mirrors ignite.distributed.one_rank_first.
/// @throws ValueError for an out-of-range rank; whatever `fn` throws.
template <class Fn>
decltype(auto) one_rank_first(Fn&& fn, int rank = 0, bool local = false) {
  OneRankFirst guard(rank, local);
  return std::invoke(std::forward<Fn>(fn));
}

}  // namespace idist
