// The process checkpoint_crash_test kills: resumes from the newest checkpoint of DIR, then saves
// iterations k+1, k+2, ... for ever, every tensor filled with its iteration number. It reports on
// stdout, one line each: "ready <k>" after the resume (0: nothing to resume), "begin <i>" before
// save(i) and "end <i>" after it returned, so that the parent knows which saves were in flight when
// it killed this process.
//
//   checkpoint_crash_writer <dir> <sync|background> <n_saved> <floats per tensor>
//
// It ends by itself (status 3) when its parent goes away or after a time limit, so that a test
// killed before it cannot leave it writing.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>

#include "idist/idist.hpp"

namespace {

constexpr int kTensors = 4;
constexpr auto kLifetime = std::chrono::minutes(5);

struct Payload : torch::nn::Module {
  explicit Payload(std::int64_t numel) {
    for (int i = 0; i < kTensors; ++i)
      register_parameter(std::string(1, 'w').append(std::to_string(i)), torch::zeros({numel}), /*requires_grad=*/false);
  }
};

// One line on stdout with a single write(2): the parent reads lines as they arrive, even when this
// process dies right after.
void say(const char* what, std::uint64_t k) {
  char line[64];
  const int n = std::snprintf(line, sizeof line, "%s %llu\n", what, static_cast<unsigned long long>(k));
  if (::write(STDOUT_FILENO, line, std::size_t(n)) != n) std::_Exit(4);  // the parent is gone
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s <dir> <sync|background> <n_saved> <floats per tensor>\n", argv[0]);
    return 2;
  }
  const pid_t parent = ::getppid();
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) return 3;  // the parent died before prctl
  const std::string dir = argv[1], mode = argv[2];
  if (mode != "sync" && mode != "background") {
    std::fprintf(stderr, "checkpoint_crash_writer: mode should be sync or background, but given '%s'\n", argv[2]);
    return 2;
  }
  try {
    auto payload = std::make_shared<Payload>(std::stoll(argv[4]));
    idist::Checkpoint checkpoint(
        dir, {{"model", payload}},
        {.n_saved = std::stoul(argv[3]), .require_empty = false, .background_write = mode == "background"});
    const auto loaded = checkpoint.load_latest();
    std::uint64_t k = loaded ? loaded->iteration : 0;
    say("ready", k);
    const auto stop = std::chrono::steady_clock::now() + kLifetime;
    while (std::chrono::steady_clock::now() < stop) {
      ++k;
      {
        torch::NoGradGuard no_grad;
        for (auto& p : payload->parameters()) p.fill_(double(k));
      }
      say("begin", k);
      checkpoint.save({.iteration = k, .values = {{"k", std::int64_t(k)}}});
      say("end", k);
    }
    std::fprintf(stderr, "checkpoint_crash_writer: not killed within its time limit\n");
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "checkpoint_crash_writer: %s\n", e.what());
    return 1;
  }
}
