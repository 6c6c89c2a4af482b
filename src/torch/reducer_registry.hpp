#pragma once
// The reducers of the models auto_model prepared, keyed by module, so that auto_model can return the
// user's own type and no_sync / register_comm_hook / join find the reducer again.
#include <map>
#include <memory>
#include <mutex>

#include <torch/nn/module.h>

#include "torch/reducer.hpp"

namespace idist::detail {

/// An entry whose module has been destroyed is dropped (releasing the reducer's gradient buffers) the
/// next time the registry is used. Thread-safe.
class ReducerRegistry {
 public:
  /// Registers `reducer` for `module`, replacing the reducer of an earlier auto_model call.
  void add(const std::shared_ptr<torch::nn::Module>& module, std::shared_ptr<Reducer> reducer);
  /// The reducer of `module`, or null.
  std::shared_ptr<Reducer> find(const torch::nn::Module* module);
  /// Drops the reducer of `module` (its hooks are removed).
  void remove(const torch::nn::Module* module);

 private:
  struct Entry {
    std::weak_ptr<torch::nn::Module> module;
    std::shared_ptr<Reducer> reducer;
  };
  void prune();
  std::mutex mutex_;
  std::map<const torch::nn::Module*, Entry> entries_;
};

/// The process-wide registry.
ReducerRegistry& reducer_registry();

}  // namespace idist::detail
