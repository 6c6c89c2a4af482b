// torchrun's error file (include/idist/elastic.hpp): the JSON torch.distributed.elastic's agent reads
// from TORCHELASTIC_ERROR_FILE, written atomically.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>

#include <fmt/format.h>

#include "core/json_string.hpp"
#include "idist/context.hpp"
#include "idist/elastic.hpp"
#include "idist/launcher.hpp"
#include "launch/environment.hpp"
#include "launch/launcher_env.hpp"

namespace idist::elastic {

namespace {

std::string env_or(const char* name, const char* fallback) { return launch::read_nonempty(name).value_or(fallback); }

// Writes all of `text` to a new file at `tmp`, flushed to disk. Returns the failure, or "".
std::string write_synced(const std::string& tmp, const std::string& text) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return std::strerror(errno);
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      return why;
    }
    done += std::size_t(n);
  }
  if (::fsync(fd) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return why;
  }
  if (::close(fd) != 0) return std::strerror(errno);
  return {};
}

std::string error_json(std::string_view type, std::string_view what) {
  const std::string rank = env_or("RANK", "?");
  const std::string message = fmt::format("{}: rank {}: {}", type, rank, what);
  const std::string callstack =
      fmt::format("{}: {}\n(raised on rank {}, local rank {}, host {}, pid {}; a C++ program: no Python callstack)",
                  type, what, rank, env_or("LOCAL_RANK", "?"), idist::hostname(), ::getpid());
  return fmt::format(R"({{"message": {{"message": {}, "extraInfo": {{"py_callstack": {}, "timestamp": "{}"}}}}}})",
                     core::json_string(message), core::json_string(callstack), std::time(nullptr));
}

}  // namespace

std::optional<std::string> error_file_path() { return launch::error_file(); }

std::optional<std::string> record_error(std::string_view type, std::string_view message) {
  const auto path = error_file_path();
  if (!path) return std::nullopt;
  try {
    std::error_code ec;
    if (std::filesystem::exists(*path, ec))
      std::fprintf(stderr, "idist warning: the error file %s already exists and will be overwritten\n", path->c_str());
    const std::string tmp = fmt::format("{}.tmp{}", *path, ::getpid());
    if (const auto why = write_synced(tmp, error_json(type, message)); !why.empty()) {
      ::unlink(tmp.c_str());
      std::fprintf(stderr, "idist warning: cannot write the error file %s: %s\n", tmp.c_str(), why.c_str());
      return std::nullopt;
    }
    if (::rename(tmp.c_str(), path->c_str()) != 0) {
      const std::string why = std::strerror(errno);
      ::unlink(tmp.c_str());
      std::fprintf(stderr, "idist warning: cannot write the error file %s: %s\n", path->c_str(), why.c_str());
      return std::nullopt;
    }
    return path;
  } catch (const std::exception& e) {  // formatting or allocation: never throw from an error path
    std::fprintf(stderr, "idist warning: cannot write the error file %s: %s\n", path->c_str(), e.what());
    return std::nullopt;
  }
}

std::optional<std::string> record_error(const std::exception& e) {
  return record_error(detail::exception_type(e), e.what());
}

namespace detail {

std::string exception_type(const std::exception& e) { return idist::detail::demangled_name(typeid(e)); }

void print_error(std::string_view type, std::string_view what, const std::optional<std::string>& error_file) {
  std::fprintf(stderr, "error: %.*s: %.*s\n", int(type.size()), type.data(), int(what.size()), what.data());
  if (error_file) std::fprintf(stderr, "(recorded in torchrun's error file %s)\n", error_file->c_str());
  std::fflush(stderr);
}

}  // namespace detail

}  // namespace idist::elastic
