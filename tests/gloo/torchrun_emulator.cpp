// idist_torchrun_emulator: starts a command N times the way torchrun does (RANK, LOCAL_RANK,
// WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT in each process's environment), so that tests
// can check rank discovery from torchrun-style variables without PyTorch. Not part of the library.
//
//   idist_torchrun_emulator <nproc> <command> [args...]
//
// MASTER_PORT is a free port. In IDIST_TEST_INIT_METHOD, "{port}" becomes another free port and
// "{tmpdir}" a fresh temporary directory, the same for every process. Exit status: 0 when every
// process exited 0; otherwise 1, after the remaining processes were killed (10 s grace).
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>
#include "support/free_port.hpp"

namespace {

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <nproc> <command> [args...]\n", argv[0]);
    return 2;
  }
  const int nproc = std::atoi(argv[1]);
  if (nproc < 1) {
    std::fprintf(stderr, "nproc should be >= 1, but given %s\n", argv[1]);
    return 2;
  }
  if (const char* m = std::getenv("IDIST_TEST_INIT_METHOD")) {
    std::string method = m;
    replace_all(method, "{port}", std::to_string(idist::test::free_tcp_port()));
    if (method.find("{tmpdir}") != std::string::npos) {
      char dir[] = "/tmp/idist-test-XXXXXX";
      if (!::mkdtemp(dir)) std::perror("mkdtemp");
      replace_all(method, "{tmpdir}", dir);
    }
    ::setenv("IDIST_TEST_INIT_METHOD", method.c_str(), 1);
  }
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", std::to_string(idist::test::free_tcp_port()).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
  std::fflush(nullptr);

  std::vector<pid_t> pids;
  for (int r = 0; r < nproc; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::execvp(argv[2], argv + 2);
      std::perror("execvp");
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  int rc = 0;
  std::size_t left = pids.size();
  auto kill_at = std::chrono::steady_clock::time_point::max();
  while (left > 0) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      --left;
      if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        std::fprintf(stderr, "idist_torchrun_emulator: process %d ended with status 0x%x\n", int(pid), status);
        if (rc == 0) kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        rc = 1;
      }
      continue;
    }
    if (std::chrono::steady_clock::now() >= kill_at) {
      for (pid_t p : pids) ::kill(p, SIGKILL);
      kill_at = std::chrono::steady_clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return rc;
}
