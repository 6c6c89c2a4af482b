#pragma once
// A directory of the test's own under the system's temporary directory, removed with everything in it
// when the object goes out of scope.
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace idist::test {

class TempDir {
 public:
  /// Makes <temporary directory>/<prefix>-XXXXXX. @throws std::runtime_error when mkdtemp fails.
  explicit TempDir(const std::string& prefix = "idist-test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr)
      throw std::runtime_error("mkdtemp(" + tmpl + ") failed: " + std::strerror(errno));
    path_ = std::move(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  /// The directory.
  const std::string& path() const noexcept { return path_; }
  /// `name` inside it.
  std::filesystem::path operator/(const std::string& name) const { return std::filesystem::path(path_) / name; }
  /// Whether it holds nothing.
  bool empty() const { return std::filesystem::is_empty(path_); }

 private:
  std::string path_;
};

}  // namespace idist::test
