// idist::Checkpoint's atomic save under SIGKILL: checkpoint_crash_writer saves in a loop (synchronous
// saves, then the background writer) and is killed at random moments, many of them mid-write; after
// each kill the directory holds only complete files, at most n_saved + 1 of them (the killed save may
// have renamed its file before removing the oldest), and load_latest() returns the newest of them: the
// last save the writer saw finish, or the one in flight. The next writer resumes from it.
//
// IDIST_CHECKPOINT_CRASH_SEED replays a run's kill moments (the seed is printed);
// IDIST_CHECKPOINT_CRASH_KILLS sets the kills per mode (25).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "idist/idist.hpp"
#include "support/temp_dir.hpp"
#include "support/time_scale.hpp"
#include "torch/checkpoint/file_format.hpp"

extern char** environ;

namespace {

using idist::test::TempDir;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using idist::test::scaled;

constexpr std::int64_t kFloats = std::int64_t(1) << 20;  // per tensor: a save long enough to be cut mid-write
constexpr int kTensors = 4;                              // as checkpoint_crash_writer.cpp
constexpr auto kStartLimit = std::chrono::seconds(60);   // exec, LibTorch's start, the resume
constexpr auto kExitLimit = std::chrono::seconds(10);    // a SIGKILLed process to be reaped

struct Payload : torch::nn::Module {
  Payload() {
    for (int i = 0; i < kTensors; ++i)
      register_parameter(std::string(1, 'w').append(std::to_string(i)), torch::zeros({kFloats}),
                         /*requires_grad=*/false);
  }
};

std::uint64_t env_number(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(v, v + std::strlen(v), n);
  if (ec != std::errc() || *end != '\0') throw std::invalid_argument(std::string(name) + "=" + v + " is not a number");
  return n;
}

// What one writer process said on stdout.
struct Record {
  std::optional<std::uint64_t> ready;  // the iteration it resumed from
  std::uint64_t last_begin = 0, last_end = 0;
  std::vector<Clock::time_point> ends;
};

// A running checkpoint_crash_writer, its stdout read line by line.
class Writer {
 public:
  Writer(const fs::path& dir, const std::string& mode, std::size_t n_saved) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    out_ = fds[0];
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    std::vector<std::string> args = {IDIST_CHECKPOINT_CRASH_WRITER, dir.string(), mode, std::to_string(n_saved),
                                     std::to_string(kFloats)};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (rc != 0) throw std::runtime_error(std::string("cannot start ") + argv[0] + ": " + std::strerror(rc));
  }
  ~Writer() {
    if (pid_ > 0) kill_and_reap();  // a failed assertion left it running
    ::close(out_);
  }

  // Reads lines until `until`, EOF (then true) or `done` holds.
  bool read_until(Clock::time_point until, Record& record, const std::function<bool(const Record&)>& done = {}) {
    for (;;) {
      if (done && done(record)) return false;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
      if (left < 0) return false;  // a writer that keeps talking must not keep us here
      pollfd p{out_, POLLIN, 0};
      const int n = ::poll(&p, 1, int(left));
      if (n == 0) return false;
      if (n < 0) {
        if (errno == EINTR) continue;
        throw std::runtime_error("poll failed");
      }
      char chunk[4096];
      const ssize_t got = ::read(out_, chunk, sizeof chunk);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return true;
      pending_.append(chunk, std::size_t(got));
      for (std::size_t eol; (eol = pending_.find('\n')) != std::string::npos; pending_.erase(0, eol + 1))
        take(pending_.substr(0, eol), record);
    }
  }

  // SIGKILL, then waits (bounded) for it to end; returns its wait status.
  int kill_and_reap() {
    ::kill(pid_, SIGKILL);
    const auto limit = Clock::now() + scaled(kExitLimit);
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > limit) throw std::runtime_error("a SIGKILLed writer did not end");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    pid_ = -1;
    return status;
  }

  // Whether it has ended by itself (it should not have); its status then.
  std::optional<int> ended() {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) != pid_) return std::nullopt;
    pid_ = -1;
    return status;
  }

 private:
  static void take(const std::string& line, Record& record) {
    const auto space = line.find(' ');
    const std::string what = line.substr(0, space);
    const std::uint64_t k = std::stoull(line.substr(space + 1));
    if (what == "ready") record.ready = k;
    if (what == "begin") record.last_begin = k;
    if (what == "end") {
      record.last_end = k;
      record.ends.push_back(Clock::now());
    }
  }

  pid_t pid_ = -1;
  int out_ = -1;
  std::string pending_;
};

struct Tally {
  int kills = 0;
  int mid_save = 0;    // a save() call had begun and not returned
  int mid_write = 0;   // a temporary file was on disk: the write itself was cut
  int extra_file = 0;  // n_saved + 1 files: killed between the rename and the removal of the oldest
  int saves = 0;       // saves that returned, in all writers
};

// The directory after a kill: the checkpoint files' iterations (each file checked complete), and
// whether a temporary file is there.
std::pair<std::vector<std::uint64_t>, bool> inspect(const fs::path& dir) {
  std::vector<std::uint64_t> iterations;
  bool temporary = false;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.front() == '.' && name.ends_with(".tmp")) {
      temporary = true;
      continue;
    }
    std::uint64_t k = 0;
    const char* first = name.data() + 6;
    const char* last = name.data() + name.size() - 3;
    const bool named = name.starts_with("model_") && name.ends_with(".pt") &&
                       std::from_chars(first, last, k).ptr == last && first != last;
    EXPECT_TRUE(named) << "an unexpected file " << name;
    if (!named) continue;
    iterations.push_back(k);
    try {
      idist::checkpoint::read_verified(e.path());
    } catch (const std::exception& error) {
      ADD_FAILURE() << name << " is not a complete checkpoint: " << error.what();
    }
  }
  std::sort(iterations.begin(), iterations.end());
  return {iterations, temporary};
}

// `kills` writers in `mode`, each killed at a random moment; checks the directory after each.
void kill_writers(const std::string& mode, std::size_t n_saved, std::uint64_t kills, std::mt19937_64& rng,
                  Tally& tally) {
  TempDir dir("idist-ckpt-crash");
  double save_ms = 100;  // the estimated time between two saves, refined as they are seen
  std::uint64_t resume = 0;
  for (std::uint64_t i = 0; i < kills && !testing::Test::HasFatalFailure(); ++i) {
    SCOPED_TRACE("mode " + mode + ", kill " + std::to_string(i + 1));
    Record record;
    Writer writer(dir.path(), mode, n_saved);
    writer.read_until(Clock::now() + scaled(kStartLimit), record, [](const Record& r) { return r.ready.has_value(); });
    ASSERT_TRUE(record.ready.has_value()) << "the writer did not start within the limit";
    ASSERT_EQ(*record.ready, resume) << "the writer resumed from another checkpoint than load_latest() here";
    const auto delay =
        std::chrono::microseconds(std::uniform_int_distribution<std::int64_t>(0, std::int64_t(3000 * save_ms))(rng));
    ASSERT_FALSE(writer.read_until(Clock::now() + delay, record)) << "the writer ended by itself";
    ASSERT_FALSE(writer.ended().has_value()) << "the writer ended by itself";
    const int status = writer.kill_and_reap();
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "wait status " << status;
    writer.read_until(Clock::now() + scaled(kExitLimit), record);  // what it said before dying
    if (record.ends.size() >= 2)
      save_ms = 0.5 * save_ms +
                0.5 * std::chrono::duration<double, std::milli>(record.ends.back() - record.ends.front()).count() /
                    double(record.ends.size() - 1);

    ++tally.kills;
    tally.saves += int(record.ends.size());
    const bool begun = record.last_begin > record.last_end;
    tally.mid_save += begun;
    const auto [files, temporary] = inspect(dir.path());
    tally.mid_write += temporary;
    tally.extra_file += files.size() == n_saved + 1;
    // Durable when the kill came: a synchronous save once it returned; a background one once the
    // next save returned (save waits for the write in flight).
    std::uint64_t durable = resume;
    if (record.last_end > 0) durable = mode == "sync" ? record.last_end : std::max(resume, record.last_end - 1);
    const std::uint64_t newest_possible = std::max(resume, record.last_begin);
    EXPECT_LE(files.size(), n_saved + 1);
    for (std::size_t j = 1; j < files.size(); ++j)
      EXPECT_EQ(files[j], files[j - 1] + 1) << "retention removed a file other than the oldest";

    Payload loaded_into;
    testing::internal::CaptureStderr();
    idist::Checkpoint checkpoint(dir.path(), {{"model", loaded_into}},
                                 {.n_saved = n_saved, .require_empty = false, .background_write = false});
    const auto loaded = checkpoint.load_latest();
    const std::string warnings = testing::internal::GetCapturedStderr();
    EXPECT_EQ(warnings.find("WARNING"), std::string::npos) << "a torn file was found: " << warnings;
    EXPECT_FALSE(inspect(dir.path()).second) << "the temporary file is still there";
    if (durable == 0 && !loaded) {
      EXPECT_TRUE(files.empty());
      continue;
    }
    ASSERT_TRUE(loaded.has_value()) << "iteration " << durable << " was on disk";
    const std::uint64_t k = loaded->iteration;
    EXPECT_EQ(k, files.back()) << "not the newest file";
    EXPECT_GE(k, durable) << "a checkpoint on disk before the kill was lost";
    EXPECT_LE(k, newest_possible) << "a checkpoint newer than any save begun";
    EXPECT_EQ(loaded->value<std::int64_t>("k"), std::int64_t(k));
    for (const auto& p : loaded_into.named_parameters())
      EXPECT_TRUE(torch::all(p.value() == double(k)).item<bool>()) << p.key() << " is not iteration " << k << "'s";
    resume = k;
  }
}

void run(const std::string& mode, std::size_t n_saved) {
  const std::uint64_t seed = env_number("IDIST_CHECKPOINT_CRASH_SEED", std::random_device{}());
  const std::uint64_t kills = env_number("IDIST_CHECKPOINT_CRASH_KILLS", 25);
  std::printf("%s saves, n_saved %zu: seed %llu (IDIST_CHECKPOINT_CRASH_SEED replays the kill moments)\n", mode.c_str(),
              n_saved, static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  Tally tally;
  const auto start = Clock::now();
  kill_writers(mode, n_saved, kills, rng, tally);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf(
      "%s saves: %d kills (%d mid-save, %d mid-write, %d between rename and removal), %d saves returned, "
      "%.1f s\n",
      mode.c_str(), tally.kills, tally.mid_save, tally.mid_write, tally.extra_file, tally.saves, seconds);
  EXPECT_EQ(std::uint64_t(tally.kills), kills);
  // Kills that all missed the write would have tested nothing.
  if (kills >= 10) {
    EXPECT_GT(tally.mid_write, 0) << "no kill landed mid-write";
  }
}

TEST(CheckpointCrash, SynchronousSavesSurviveSigkill) { run("sync", 1); }

TEST(CheckpointCrash, BackgroundWriterSurvivesSigkill) { run("background", 2); }

}  // namespace
