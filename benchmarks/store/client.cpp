// Rendezvous rounds against a TCPStore server with idist's client: --threads clients in this process,
// ranks --first-rank .. --first-rank + threads - 1 of --world. Each round, untimed, waits until every
// client of every process is ready; then, timed, each client SETs its key, WAITs for all world keys, GETs
// three other ranks' keys and ADDs 1 to the round's counter. Prints one line per client and round:
//   rank round start_ns end_ns add_result
// (CLOCK_MONOTONIC, shared by every process of the machine); summarize.py turns them into round times.
// Exits non-zero when a GET returns a wrong value or a call fails.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "store/tcp_store.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int port = 0;
  int world = 0;
  int first_rank = 0;
  int threads = 1;
  int rounds = 1;
  int timeout_s = 120;
};

struct Sample {
  int rank;
  int round;
  std::int64_t start_ns;
  std::int64_t end_ns;
  std::int64_t added;
};

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

std::string key_of(int round, int rank) { return fmt::format("r{}/k{}", round, rank); }
std::string value_of(int round, int rank) { return fmt::format("v{}:{}", round, rank); }

// One client's rounds; appends its samples.
void run_client(const Options& o, int rank, std::vector<Sample>& out) {
  idist::store::TCPStore store("127.0.0.1", o.port, false, -1, std::chrono::seconds(o.timeout_s), false);
  std::vector<Sample> mine;
  for (int r = 0; r < o.rounds; ++r) {
    // Untimed start line: the last client to arrive releases everyone.
    if (store.add(fmt::format("ready/{}", r), 1) == o.world) store.set_string(fmt::format("go/{}", r), "1");
    store.wait({fmt::format("go/{}", r)});
    std::vector<std::string> all;
    all.reserve(o.world);
    for (int k = 0; k < o.world; ++k) all.push_back(key_of(r, k));

    const auto start = now_ns();
    store.set_string(key_of(r, rank), value_of(r, rank));
    store.wait(all);
    for (int d = 1; d <= 3; ++d) {
      const int peer = (rank + d) % o.world;
      const auto got = store.get_string(key_of(r, peer));
      if (got != value_of(r, peer))
        throw std::runtime_error(fmt::format("rank {} round {}: get of rank {} returned '{}', expected '{}'", rank, r,
                                             peer, got, value_of(r, peer)));
    }
    const auto added = store.add(fmt::format("r{}/count", r), 1);
    mine.push_back({rank, r, start, now_ns(), added});
  }
  out = std::move(mine);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"idist TCPStore client driver for benchmarks/run_store.sh"};
  Options o;
  app.add_option("--port", o.port, "server port on 127.0.0.1")->required()->check(CLI::Range(1, 65535));
  app.add_option("--world", o.world, "clients of all processes together")->required()->check(CLI::Range(1, 65536));
  app.add_option("--first-rank", o.first_rank, "rank of this process's first client")->check(CLI::NonNegativeNumber);
  app.add_option("--threads", o.threads, "clients (threads) in this process")->check(CLI::Range(1, 4096));
  app.add_option("--rounds", o.rounds, "rounds")->check(CLI::Range(1, 1000));
  app.add_option("--timeout", o.timeout_s, "seconds per store call")->check(CLI::Range(1, 3600));
  CLI11_PARSE(app, argc, argv);
  if (o.first_rank + o.threads > o.world) {
    std::fprintf(stderr, "client: ranks %d..%d exceed --world %d\n", o.first_rank, o.first_rank + o.threads - 1,
                 o.world);
    return 2;
  }

  std::vector<std::vector<Sample>> samples(o.threads);
  std::mutex failure_mutex;
  std::string failure;
  std::vector<std::thread> threads;
  threads.reserve(o.threads);
  for (int t = 0; t < o.threads; ++t) {
    threads.emplace_back([&, t] {
      try {
        run_client(o, o.first_rank + t, samples[t]);
      } catch (const std::exception& e) {
        std::lock_guard lock(failure_mutex);
        if (failure.empty()) failure = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  if (!failure.empty()) {
    std::fprintf(stderr, "client: %s\n", failure.c_str());
    return 1;
  }
  for (const auto& per_client : samples)
    for (const auto& s : per_client)
      std::printf("%d %d %lld %lld %lld\n", s.rank, s.round, (long long)s.start_ns, (long long)s.end_ns,
                  (long long)s.added);
  return 0;
}
