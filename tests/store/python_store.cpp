#include "python_store.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "store_test_util.hpp"

namespace idist::test {

std::string torch_python() {
  const char* p = std::getenv("IDIST_TEST_TORCH_PYTHON");
  return p && *p ? p : "/usr/bin/python3";
}

bool have_torch() {
  const std::string cmd = torch_python() + " -c 'import torch.distributed' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

PythonStore::PythonStore(std::vector<std::string> args) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  std::vector<std::string> argv = {torch_python(), IDIST_C10D_SERVER_PY};
  argv.insert(argv.end(), args.begin(), args.end());
  // e.g. "--libuv 0": which of torch 2.x's servers (tests/store/c10d_compat.sh runs both).
  if (const char* extra = std::getenv("IDIST_TEST_C10D_SERVER_ARGS"); extra && args.empty()) {
    std::istringstream words(extra);
    for (std::string w; words >> w;) argv.push_back(w);
  }
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    std::vector<char*> raw;
    for (auto& a : argv) raw.push_back(a.data());
    raw.push_back(nullptr);
    ::execv(raw[0], raw.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  to_child_ = in[1];
  from_child_ = out[0];
  const auto line = read_line(std::chrono::seconds(60));
  if (line.rfind("PORT ", 0) != 0) {
    kill();
    throw std::runtime_error(fmt::format("c10d_server.py did not start (said '{}')", line));
  }
  port_ = std::stoi(line.substr(5));
}

PythonStore::~PythonStore() {
  if (pid_ > 0) {
    command("quit", std::chrono::milliseconds(100));
    if (wait_worker(pid_, std::chrono::seconds(5)) < 0) pid_ = -1;  // wait_worker killed it
    pid_ = -1;
  }
  if (to_child_ >= 0) ::close(to_child_);
  if (from_child_ >= 0) ::close(from_child_);
}

void PythonStore::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

std::string PythonStore::read_line(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (const auto nl = buffer_.find('\n'); nl != std::string::npos) {
      auto line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return "";
    pollfd p{from_child_, POLLIN, 0};
    if (::poll(&p, 1, int(left.count())) <= 0) continue;
    char chunk[4096];
    const ssize_t n = ::read(from_child_, chunk, sizeof chunk);
    if (n <= 0) return "";
    buffer_.append(chunk, std::size_t(n));
  }
}

std::string PythonStore::command(const std::string& line, std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return "";
  const std::string text = line + "\n";
  ::signal(SIGPIPE, SIG_IGN);
  if (::write(to_child_, text.data(), text.size()) != ssize_t(text.size())) return "";
  if (line == "quit") return "";
  return read_line(timeout);
}

std::optional<std::string> PythonStore::get(const std::string& key) {
  const auto answer = command("get " + key);
  if (answer.rfind("VALUE ", 0) != 0) return std::nullopt;
  return from_hex(answer.substr(6));
}

void PythonStore::set(const std::string& key, const std::string& value) {
  const auto answer = command(fmt::format("set {} {}", key, to_hex(value)));
  if (answer != "OK") throw std::runtime_error(fmt::format("python set {}: {}", key, answer));
}

std::string to_hex(const std::string& text) {
  std::string out;
  for (unsigned char c : text) out += fmt::format("{:02x}", c);
  return out;
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out += char(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

}  // namespace idist::test
