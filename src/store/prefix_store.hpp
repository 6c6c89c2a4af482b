#pragma once
/// @file
/// PrefixStore: a view of another store under a key prefix, so that each process group (new_group)
/// rendezvouses in its own key space of the one world store.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "store/store.hpp"

namespace idist::store {

/// Forwards every call to `store` with keys rewritten to "<prefix>/<key>".
/// Mirrors torch.distributed.PrefixStore / gloo::rendezvous::PrefixStore (which holds a reference; this
/// one shares ownership, so the view keeps the store alive).
class PrefixStore final : public Store {
 public:
  /// @throws ValueError for an empty prefix or a null store.
  PrefixStore(std::string prefix, std::shared_ptr<Store> store);

  std::chrono::milliseconds timeout() const override { return store_->timeout(); }
  std::string describe() const override;
  std::size_t max_value_bytes() const override { return store_->max_value_bytes(); }

  /// The prefix (without the trailing '/').
  const std::string& prefix() const { return prefix_; }
  /// The underlying store.
  const std::shared_ptr<Store>& underlying() const { return store_; }

 private:
  // The underlying store's front door checks the prefixed keys (the prefix may push one past the limit).
  void do_set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> do_get(const std::string& key) override;
  std::int64_t do_add(const std::string& key, std::int64_t delta) override;
  bool do_check(const std::vector<std::string>& keys) override;
  void do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;

  std::string join(const std::string& key) const { return prefix_ + "/" + key; }
  std::vector<std::string> join(const std::vector<std::string>& keys) const;

  std::string prefix_;
  std::shared_ptr<Store> store_;
};

}  // namespace idist::store
