#pragma once
// Hands an idist store to Gloo's rendezvous (gloo::rendezvous::Context::connectFullMesh), which asks
// for a gloo::rendezvous::Store. idist's Store does not derive from Gloo's so that the store and the
// rendezvous build without Gloo (the nccl bootstrap uses them); this adapter is the one place the two
// meet. idist's errors (TimeoutError naming the missing keys) pass through unchanged.
#include <chrono>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "store/store.hpp"

namespace idist::gloo_backend {

class GlooStore final : public gloo::rendezvous::Store {
 public:
  /// `store` must outlive the adapter (it lives for one connectFullMesh call).
  explicit GlooStore(store::Store& store) : store_(store) {}

  void set(const std::string& key, const std::vector<char>& data) override { store_.set(key, data); }
  std::vector<char> get(const std::string& key) override { return store_.get(key); }
  void wait(const std::vector<std::string>& keys) override { store_.wait(keys); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    store_.wait(keys, timeout);
  }

 private:
  store::Store& store_;
};

}  // namespace idist::gloo_backend
