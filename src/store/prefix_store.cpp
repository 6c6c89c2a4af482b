#include "store/prefix_store.hpp"

#include <fmt/format.h>

#include "idist/error.hpp"

namespace idist::store {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> store)
    : prefix_(std::move(prefix)), store_(std::move(store)) {
  if (prefix_.empty()) throw ValueError("PrefixStore: prefix should be a non-empty string, got ''");
  if (!store_) throw ValueError(fmt::format("PrefixStore('{}'): store should not be null", prefix_));
}

std::vector<std::string> PrefixStore::join(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(join(k));
  return out;
}

std::string PrefixStore::describe() const { return fmt::format("prefix '{}/' of {}", prefix_, store_->describe()); }

void PrefixStore::do_set(const std::string& key, const std::vector<char>& data) { store_->set(join(key), data); }

std::vector<char> PrefixStore::do_get(const std::string& key) { return store_->get(join(key)); }

void PrefixStore::do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  store_->wait(join(keys), timeout);
}

std::int64_t PrefixStore::do_add(const std::string& key, std::int64_t delta) { return store_->add(join(key), delta); }

bool PrefixStore::do_check(const std::vector<std::string>& keys) { return store_->check(join(keys)); }

}  // namespace idist::store
