// The gloo backend's peer watch (an internal: the test sees src/): a host that never answers a probe
// is reported lost while an operation waits, one that refuses is not, and nothing is probed while no
// operation waits; the socket shutdown that ends the operation touches only the socket it recorded.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "gloo/pair_socket.hpp"
#include "gloo/peer_watch.hpp"
#include "idist/error.hpp"
#include "support/time_scale.hpp"

using namespace std::chrono_literals;
using idist::gloo_backend::Endpoint;
using idist::gloo_backend::PeerWatch;
using Clock = std::chrono::steady_clock;
using idist::test::scaled;

namespace {

int listener(const char* address, int backlog, int& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  inet_pton(AF_INET, address, &addr.sin_addr);
  socklen_t len = sizeof addr;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(::listen(fd, backlog), 0);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  port = ntohs(addr.sin_port);
  return fd;
}

int connect_to(const char* address, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(std::uint16_t(port));
  inet_pton(AF_INET, address, &addr.sin_addr);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  return fd;
}

// An endpoint that never answers: a listener whose accept queue is full (one connection nobody
// accepts) drops further SYNs, as a host cut off the network does.
struct SilentHost {
  int listen_fd = -1, queued_fd = -1;
  Endpoint endpoint;
  SilentHost() {
    int port = 0;
    listen_fd = listener("127.0.0.2", 0, port);
    queued_fd = connect_to("127.0.0.2", port);
    endpoint = {"127.0.0.2", port};
  }
  ~SilentHost() {
    ::close(queued_fd);
    ::close(listen_fd);
  }
};

// An endpoint that refuses at once: a port nothing listens on.
Endpoint refusing_host() {
  int port = 0;
  ::close(listener("127.0.0.1", 1, port));
  return {"127.0.0.1", port};
}

std::int64_t now_ticks() { return Clock::now().time_since_epoch().count(); }

}  // namespace

TEST(PeerWatch, SettingsFromTheEnvironment) {
  ::unsetenv("IDIST_GLOO_PEER_WATCH");
  auto s = PeerWatch::from_env();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->delay, 200ms);
  EXPECT_EQ(s->probe_timeout, 600ms);
  EXPECT_EQ(s->rounds, 2);
  ::setenv("IDIST_GLOO_PEER_WATCH", "off", 1);
  EXPECT_FALSE(PeerWatch::from_env());
  ::setenv("IDIST_GLOO_PEER_WATCH", "100,300,3", 1);
  s = PeerWatch::from_env();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->delay, 100ms);
  EXPECT_EQ(s->probe_timeout, 300ms);
  EXPECT_EQ(s->rounds, 3);
  for (const char* bad : {"fast", "100,0,2", "100,300,0", "1,2"}) {
    ::setenv("IDIST_GLOO_PEER_WATCH", bad, 1);
    try {
      PeerWatch::from_env();
      ADD_FAILURE() << bad << " was accepted";
    } catch (const idist::ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
  ::unsetenv("IDIST_GLOO_PEER_WATCH");
}

TEST(PeerWatch, AHostThatNeverAnswersIsLostWhileAnOperationWaits) {
  const SilentHost silent;
  const PeerWatch::Settings settings{100ms, 300ms, 2};
  PeerWatch watch(settings);
  PeerWatch::Subject subject;
  subject.hosts = {{refusing_host(), {1}, "rank 1"}, {silent.endpoint, {2, 3}, "rank 2, rank 3"}};
  std::atomic<int> calls{0};
  std::vector<std::size_t> lost;
  std::atomic<std::int64_t> fired_at{0};
  subject.on_lost = [&](const std::vector<std::size_t>& hosts) {
    lost = hosts;
    fired_at = now_ticks();
    ++calls;
  };
  watch.add(subject);
  const auto start = Clock::now();
  subject.busy_since = now_ticks();
  const auto limit = std::chrono::duration<double>(scaled(3.0));
  while (calls == 0 && Clock::now() - start < limit) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(calls, 1) << "the silent host was not reported within " << limit.count() << " s";
  EXPECT_EQ(lost, std::vector<std::size_t>{1});  // the refusing host is up
  // Two unanswered rounds after the delay: not before delay + one probe has passed.
  const auto after = Clock::duration(fired_at.load()) - start.time_since_epoch();
  EXPECT_GE(after, settings.delay + settings.probe_timeout);
  std::this_thread::sleep_for(800ms);
  EXPECT_EQ(calls, 1);  // once per subject
  watch.remove(subject);
}

TEST(PeerWatch, HostsThatRefuseAreNeverLost) {
  // A refusal answers the probe; a probe round that a loaded machine slows past its timeout would not,
  // so the probe timeout, and the watch time with it, scale with IDIST_TEST_TIME_SCALE.
  PeerWatch watch({50ms, scaled(200ms), 2});
  PeerWatch::Subject subject;
  subject.hosts = {{refusing_host(), {1}, "rank 1"}};
  std::atomic<int> calls{0};
  subject.on_lost = [&](const std::vector<std::size_t>&) { ++calls; };
  watch.add(subject);
  subject.busy_since = now_ticks();
  std::this_thread::sleep_for(scaled(1500ms));
  EXPECT_EQ(calls, 0);
  watch.remove(subject);
}

TEST(PeerWatch, NothingHappensWhileNoOperationWaitsLongEnough) {
  const SilentHost silent;
  // The operations below are 20 ms each, a fifth of the delay at scale 1; a slowed machine (TSan runs
  // at scale 5) stretches them, so the delay scales, and every phase lasts the same number of delays.
  const auto delay = scaled(100ms);
  PeerWatch watch({delay, scaled(200ms), 2});
  PeerWatch::Subject subject;
  subject.hosts = {{silent.endpoint, {1}, "rank 1"}};
  std::atomic<int> calls{0};
  subject.on_lost = [&](const std::vector<std::size_t>&) { ++calls; };
  watch.add(subject);
  // Idle, then many short operations (each well under the delay).
  std::this_thread::sleep_for(7 * delay);
  const auto start = Clock::now();
  while (Clock::now() - start < 10 * delay) {
    subject.busy_since = now_ticks();
    std::this_thread::sleep_for(20ms);
    subject.busy_since = 0;
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(calls, 0);
  // A removed subject is never reported, however long its operation waits.
  watch.remove(subject);
  subject.busy_since = now_ticks();
  std::this_thread::sleep_for(9 * delay);
  EXPECT_EQ(calls, 0);
}

TEST(PairSocket, ShutdownOnlyTheSocketItRecorded) {
  int port = 0;
  const int lfd = listener("127.0.0.1", 4, port);
  const int client = connect_to("127.0.0.1", port);
  const int server = ::accept(lfd, nullptr, nullptr);
  ASSERT_GE(server, 0);
  sockaddr_in local{}, remote{};
  socklen_t len = sizeof local;
  ::getsockname(client, reinterpret_cast<sockaddr*>(&local), &len);
  len = sizeof remote;
  ::getpeername(client, reinterpret_cast<sockaddr*>(&remote), &len);
  idist::gloo_backend::PairSocket socket{client, {"127.0.0.1", ntohs(local.sin_port)}, {"127.0.0.1", port}};
  ASSERT_EQ(ntohs(remote.sin_port), port);
  // Another remote endpoint: a reused descriptor number, left alone.
  auto other = socket;
  other.remote.port = port + 1;
  EXPECT_FALSE(idist::gloo_backend::shutdown_pair_socket(other));
  char byte = 'x';
  ASSERT_EQ(::send(client, &byte, 1, 0), 1);
  ASSERT_EQ(::recv(server, &byte, 1, 0), 1);  // still connected
  EXPECT_TRUE(idist::gloo_backend::shutdown_pair_socket(socket));
  EXPECT_EQ(::recv(client, &byte, 1, 0), 0);  // this side reads end of file at once
  EXPECT_EQ(::recv(server, &byte, 1, 0), 0);  // and the peer sees the close
  ::close(server);
  ::close(client);
  ::close(lfd);
}
