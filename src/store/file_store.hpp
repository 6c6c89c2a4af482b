#pragma once
/// @file
/// FileStore: the key-value store behind the "file:///path" init method, on a directory every rank can
/// reach (a local or shared file system).

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "store/store.hpp"

namespace idist::store {

/// Store on a directory, with Gloo's FileStore semantics (one file per key, written to a temporary file
/// and renamed into place, waits poll for the files) plus add (under an flock'ed lock file) and check.
///
/// Keys are percent-encoded into file names, so any key (including '/') is safe; an encoded key longer
/// than 240 bytes is a ValueError. The directory is created when missing. Clean-up: each FileStore counts
/// itself in a users counter on construction and out on destruction; the last one out removes the
/// store's files, so the same path can be reused by the next run. A crashed run leaves its files behind:
/// use a fresh path per job, or remove the directory.
class FileStore final : public Store {
 public:
  /// Opens (creating when needed) the store in directory `path`.
  /// @param timeout default of get / wait, and bound on taking the add() lock.
  /// @throws ValueError for an empty path; BackendError when the directory cannot be created or used.
  FileStore(std::string path, std::chrono::milliseconds timeout);
  ~FileStore() override;
  FileStore(const FileStore&) = delete;
  FileStore& operator=(const FileStore&) = delete;

  std::chrono::milliseconds timeout() const override { return timeout_; }
  std::string describe() const override;

  /// The store's directory.
  const std::string& path() const { return path_; }

 private:
  void do_set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> do_get(const std::string& key) override;
  std::int64_t do_add(const std::string& key, std::int64_t delta) override;
  bool do_check(const std::vector<std::string>& keys) override;
  void do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  std::string key_path(const std::string& key) const;
  std::int64_t add_locked(const std::string& key, std::int64_t delta);  // caller holds the lock

  std::string path_;
  std::chrono::milliseconds timeout_;
};

}  // namespace idist::store
