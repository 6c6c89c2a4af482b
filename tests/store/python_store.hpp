#pragma once
// A c10d TCPStore server in a Python child process (tests/store/c10d_server.py): torch's own, or the
// script's stand-in for torch 2.x's servers; and commands to the Python client of it, one line each.
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "support/ci.hpp"

namespace idist::test {

/// The python3 that has torch ("/usr/bin/python3" on Debian with python3-torch).
std::string torch_python();
/// True when torch_python() imports torch.distributed. Tests that need it skip without it, except under
/// CI=true, where they fail (the suite must not pass by skipping).
bool have_torch();

/// Runs c10d_server.py with `args`; the destructor stops it (SIGKILL after a bounded wait).
class PythonStore {
 public:
  /// Starts the server and reads its port (at most 60 s). Without `args`, IDIST_TEST_C10D_SERVER_ARGS
  /// (words) are passed. @throws std::runtime_error when it fails.
  explicit PythonStore(std::vector<std::string> args = {});
  ~PythonStore();
  PythonStore(const PythonStore&) = delete;
  PythonStore& operator=(const PythonStore&) = delete;

  int port() const { return port_; }
  /// Sends one command line and returns the answer line (at most `timeout`; "" on a timeout).
  std::string command(const std::string& line, std::chrono::milliseconds timeout = std::chrono::seconds(20));
  /// The Python client's value of `key` (hex decoded), or nullopt on an error answer.
  std::optional<std::string> get(const std::string& key);
  /// Sets `key` through the Python client.
  void set(const std::string& key, const std::string& value);
  /// Kills the server now (the connections of its clients break).
  void kill();

 private:
  std::string read_line(std::chrono::milliseconds timeout);
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  int port_ = 0;
  std::string buffer_;
};

/// `text` as lowercase hex, and back.
std::string to_hex(const std::string& text);
std::string from_hex(const std::string& hex);

}  // namespace idist::test

/// In a TEST body: the test needs torch_python() with torch; without it, skipped (failed under CI).
#define IDIST_REQUIRE_TORCH()                                                                                    \
  do {                                                                                                           \
    static const bool have = ::idist::test::have_torch();                                                        \
    if (!have)                                                                                                   \
      IDIST_SKIP_OR_FAIL_IN_CI(::idist::test::torch_python() << " cannot import torch (install python3-torch)"); \
  } while (0)
