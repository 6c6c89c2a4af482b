#include "store/store_progress_board.hpp"

#include <string>

#include <fmt/format.h>

namespace idist::store {

namespace {

class StoreProgressBoard final : public core::debug::ProgressBoard {
 public:
  explicit StoreProgressBoard(std::weak_ptr<Store> store) : store_(std::move(store)) {}

  void publish(std::int64_t group, int rank, std::int64_t seq) override {
    if (const auto s = store_.lock()) s->set_string(key(group, rank), std::to_string(seq));
  }

  std::optional<std::int64_t> read(std::int64_t group, int rank) override {
    const auto s = store_.lock();
    if (!s) return std::nullopt;
    const std::string k = key(group, rank);
    if (!s->check({k})) return std::nullopt;
    return std::stoll(s->get_string(k));
  }

 private:
  static std::string key(std::int64_t group, int rank) { return fmt::format("idist/debug/seq/{}/{}", group, rank); }

  std::weak_ptr<Store> store_;
};

}  // namespace

std::shared_ptr<core::debug::ProgressBoard> make_progress_board(std::weak_ptr<Store> store) {
  return std::make_shared<StoreProgressBoard>(std::move(store));
}

}  // namespace idist::store
