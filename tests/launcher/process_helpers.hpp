#pragma once
// Helpers for tests that start processes (spawn, the 2-node emulation, fault tests): free ports,
// scratch directories, results written by workers, and checks that no child process is left.
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>
#include "support/free_port.hpp"

namespace idist::test {

/// A fresh directory under /tmp, removed by the destructor.
class ScratchDir {
 public:
  ScratchDir() {
    char tmpl[] = "/tmp/idist-launch-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  /// path()/name
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

/// Writes `text` to `path` (a worker reporting to the test).
inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path + ".tmp");
  out << text;
  out.close();
  std::filesystem::rename(path + ".tmp", path);
}

/// The content of `path`, or "<missing>" when it does not exist.
inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "<missing>";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Pids of the live (or zombie) processes whose parent is this process, from /proc.
inline std::vector<int> child_pids() {
  std::vector<int> out;
  const int me = int(::getpid());
  DIR* dir = ::opendir("/proc");
  if (!dir) return out;
  while (dirent* e = ::readdir(dir)) {
    const int pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::string(e->d_name) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // Fields after the parenthesised command name: state, ppid, ...
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 1));
    std::string state;
    int ppid = 0;
    rest >> state >> ppid;
    if (ppid == me) out.push_back(pid);
  }
  ::closedir(dir);
  return out;
}

/// True when this process has no child at all: none running (orphans would be re-parented, but
/// workers die with their parent) and none left unreaped (zombies).
inline bool no_children_left() {
  if (!child_pids().empty()) return false;
  errno = 0;
  return ::waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD;
}

/// Throws std::runtime_error(msg) unless `cond`: checks inside spawned workers, where a thrown
/// exception makes spawn() fail in the test process with the worker's rank and this message.
inline void require(bool cond, const std::string& msg) {
  if (!cond) throw std::runtime_error(msg);
}

/// Runs `body(i)` in `n` forked processes (i = 0 .. n-1) and returns their exit statuses: 0 when
/// body returned, 1 when it threw (the message goes to stderr), 128 + signal when killed.
template <class Body>
std::vector<int> run_in_processes(int n, Body body) {
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int code = 0;
      try {
        body(i);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "process %d: %s\n", i, e.what());
        code = 1;
      }
      std::fflush(nullptr);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  return codes;
}

}  // namespace idist::test
