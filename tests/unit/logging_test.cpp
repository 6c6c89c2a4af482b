// Logging (logging.hpp): levels and their filter, the program's sink, IDIST_LOG_LEVEL, the default
// lines on stderr, and a sink replaced while other threads log. Serial: rank 0 logs INFO and DEBUG.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "idist/idist.hpp"

namespace {

struct Line {
  idist::LogLevel level;
  std::string logger;
  std::string message;
};

// Installs a sink that records every line; restores stderr and the environment's level at the end.
class Logging : public testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("IDIST_LOG_LEVEL");
    idist::set_log_level(std::nullopt);
    idist::set_log_sink([this](idist::LogLevel level, std::string_view logger, std::string_view message) {
      const std::lock_guard lock(mutex_);
      lines_.push_back({level, std::string(logger), std::string(message)});
    });
  }
  void TearDown() override {
    idist::set_log_sink({});
    idist::set_log_level(std::nullopt);
    ::unsetenv("IDIST_LOG_LEVEL");
  }
  std::vector<Line> lines() {
    const std::lock_guard lock(mutex_);
    return lines_;
  }
  // Logs one line at each level and returns the levels the sink received.
  std::vector<idist::LogLevel> one_of_each() {
    {
      const std::lock_guard lock(mutex_);
      lines_.clear();
    }
    idist::log_debug("test", "d");
    idist::log_info("test", "i");
    idist::log_warning("test", "w");
    std::vector<idist::LogLevel> out;
    for (const Line& l : lines()) out.push_back(l.level);
    return out;
  }

 private:
  std::mutex mutex_;
  std::vector<Line> lines_;
};

using L = idist::LogLevel;

TEST_F(Logging, DefaultLevelIsInfo) {
  EXPECT_EQ(idist::log_level(), L::Info);
  EXPECT_EQ(one_of_each(), (std::vector<L>{L::Info, L::Warning}));
}

TEST_F(Logging, LevelFiltersLowerLevels) {
  idist::set_log_level(L::Debug);
  EXPECT_EQ(one_of_each(), (std::vector<L>{L::Debug, L::Info, L::Warning}));
  idist::set_log_level(L::Warning);
  EXPECT_EQ(one_of_each(), (std::vector<L>{L::Warning}));
  idist::set_log_level(L::Off);
  EXPECT_EQ(one_of_each(), (std::vector<L>{}));
  idist::set_log_level(std::nullopt);
  EXPECT_EQ(idist::log_level(), L::Info);
}

TEST_F(Logging, SinkReceivesLevelFullLoggerNameAndMessage) {
  idist::log_info("distributed.launcher.Parallel", "Initialized processing group with backend: 'gloo'");
  idist::log_warning("distributed.auto.auto_dataloader",
                     "Found distributed sampler with rank=1, but process rank is 0");
  const auto got = lines();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].level, L::Info);
  EXPECT_EQ(got[0].logger, "idist.distributed.launcher.Parallel");
  EXPECT_EQ(got[0].message, "Initialized processing group with backend: 'gloo'");
  EXPECT_EQ(got[1].level, L::Warning);
  EXPECT_EQ(got[1].logger, "idist.distributed.auto.auto_dataloader");
  EXPECT_EQ(got[1].message, "Found distributed sampler with rank=1, but process rank is 0");
}

TEST_F(Logging, ShowConfigGoesToTheSink) {
  idist::show_config();
  const auto got = lines();
  ASSERT_GE(got.size(), 10u);
  EXPECT_EQ(got[0].logger, "idist.distributed");
  EXPECT_EQ(got[0].message, "distributed configuration: serial");
}

TEST_F(Logging, EmptySinkRestoresTheDefaultLinesOnStderr) {
  idist::set_log_sink({});
  testing::internal::CaptureStderr();
  idist::log_info("distributed", "world size: 1");
  idist::log_warning("distributed.launcher.Parallel", "careful");
  idist::log_debug("distributed", "not at the default level");
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "idist.distributed INFO: world size: 1\nidist.distributed.launcher.Parallel WARNING: careful\n");
  EXPECT_TRUE(lines().empty());
}

TEST_F(Logging, StreamSinkWritesTheDefaultFormat) {
  std::ostringstream out;
  idist::set_log_stream(out);
  idist::set_log_level(L::Debug);
  idist::log_debug("distributed", "detail");
  idist::log_info("distributed", "backend: None");
  idist::set_log_sink({});
  EXPECT_EQ(out.str(), "idist.distributed DEBUG: detail\nidist.distributed INFO: backend: None\n");
  EXPECT_EQ(idist::format_log_line(L::Warning, "idist.x", "m"), "idist.x WARNING: m");
}

TEST_F(Logging, ThrowingSinkDoesNotThrowIntoTheCaller) {
  idist::set_log_sink([](L, std::string_view, std::string_view) { throw std::runtime_error("sink failed"); });
  EXPECT_NO_THROW(idist::log_warning("test", "w"));
}

TEST_F(Logging, SinkThatLogsWritesThoseLinesToStderr) {
  std::atomic<int> calls{0};
  idist::set_log_sink([&calls](L, std::string_view, std::string_view message) {
    ++calls;
    if (message == "outer") idist::log_warning("test", "inner");
  });
  testing::internal::CaptureStderr();
  idist::log_warning("test", "outer");
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(err, "idist.test WARNING: inner\n");
}

TEST_F(Logging, SettingTheSinkFromInsideASinkIsAValueError) {
  std::string error;
  idist::set_log_sink([&error](L, std::string_view, std::string_view) {
    try {
      idist::set_log_sink({});
    } catch (const idist::ValueError& e) {
      error = e.what();
    }
  });
  idist::log_warning("test", "w");
  EXPECT_NE(error.find("set_log_sink"), std::string::npos) << error;
}

TEST(LogLevelNames, ParseAcceptsPythonsNamesInAnyCase) {
  EXPECT_EQ(idist::parse_log_level("DEBUG"), L::Debug);
  EXPECT_EQ(idist::parse_log_level("info"), L::Info);
  EXPECT_EQ(idist::parse_log_level("Warning"), L::Warning);
  EXPECT_EQ(idist::parse_log_level("OFF"), L::Off);
  for (L l : {L::Debug, L::Info, L::Warning, L::Off}) EXPECT_EQ(idist::parse_log_level(idist::to_string(l)), l);
  // Python's logging numbers, so that the order is Python's.
  EXPECT_EQ(int(L::Debug), 10);
  EXPECT_EQ(int(L::Info), 20);
  EXPECT_EQ(int(L::Warning), 30);
}

TEST(LogLevelNames, ParseRejectsOtherNamesNamingTheAcceptedOnes) {
  for (const char* bad : {"", "WARN", "ERROR", "verbose", "INFO "}) {
    try {
      idist::parse_log_level(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const idist::ValueError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(std::string("'") + bad + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("DEBUG, INFO, WARNING, OFF"), std::string::npos) << msg;
    }
  }
}

TEST_F(Logging, EnvironmentVariableSetsTheLevel) {
  ::setenv("IDIST_LOG_LEVEL", "warning", 1);
  EXPECT_EQ(idist::log_level(), L::Warning);
  EXPECT_EQ(one_of_each(), (std::vector<L>{L::Warning}));
  ::setenv("IDIST_LOG_LEVEL", "DEBUG", 1);
  EXPECT_EQ(one_of_each(), (std::vector<L>{L::Debug, L::Info, L::Warning}));
  ::setenv("IDIST_LOG_LEVEL", "", 1);  // empty: unset
  EXPECT_EQ(idist::log_level(), L::Info);
  // set_log_level() takes precedence over the variable.
  ::setenv("IDIST_LOG_LEVEL", "OFF", 1);
  idist::set_log_level(L::Warning);
  EXPECT_EQ(one_of_each(), (std::vector<L>{L::Warning}));
  idist::set_log_level(std::nullopt);
  EXPECT_EQ(one_of_each(), (std::vector<L>{}));
}

// log_level() raises; a log call warns once (naming the accepted values) and logs at INFO.
TEST_F(Logging, InvalidEnvironmentVariable) {
  ::setenv("IDIST_LOG_LEVEL", "chatty", 1);
  try {
    idist::log_level();
    ADD_FAILURE() << "IDIST_LOG_LEVEL=chatty was accepted";
  } catch (const idist::ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("IDIST_LOG_LEVEL should be one of DEBUG, INFO, WARNING, OFF"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'chatty'"), std::string::npos) << msg;
  }
  EXPECT_NO_THROW(idist::log_info("test", "first"));
  EXPECT_NO_THROW(idist::log_info("test", "second"));
  const auto got = lines();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].level, L::Warning);
  EXPECT_EQ(got[0].logger, "idist.logging");
  EXPECT_NE(got[0].message.find("IDIST_LOG_LEVEL should be one of DEBUG, INFO, WARNING, OFF"), std::string::npos)
      << got[0].message;
  EXPECT_EQ(got[1].message, "first");
  EXPECT_EQ(got[2].message, "second");
}

// While threads log, the main thread replaces the sink again and again: every line reaches exactly
// one sink, and a replaced sink is never called after set_log_sink() returned.
TEST(LoggingThreads, ReplacingTheSinkWhileOtherThreadsLog) {
  struct Counter {
    std::atomic<bool> retired{false};
    std::atomic<long> calls{0};
    std::atomic<long> late{0};  // calls after retirement
  };
  std::vector<std::shared_ptr<Counter>> counters;
  const auto install = [&counters] {
    auto c = std::make_shared<Counter>();
    counters.push_back(c);
    idist::set_log_sink([c](L, std::string_view, std::string_view) {
      if (c->retired.load()) ++c->late;
      ++c->calls;
    });
    return c;
  };
  idist::set_log_level(std::nullopt);
  auto current = install();
  constexpr int kThreads = 3;
  constexpr int kSwaps = 2000;
  std::atomic<bool> stop{false};
  std::atomic<int> started{0};
  std::vector<long> logged(kThreads, 0);
  std::vector<std::thread> loggers;
  for (int t = 0; t < kThreads; ++t)
    loggers.emplace_back([&, t] {
      idist::log_warning("test.threads", "first");
      ++logged[std::size_t(t)];
      ++started;
      while (!stop.load()) {
        idist::log_warning("test.threads", "line");
        ++logged[std::size_t(t)];
      }
    });
  // Swap only while every thread is logging (bounded wait for them to start).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (started.load() < kThreads && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  for (int i = 0; i < kSwaps; ++i) {
    auto previous = current;
    current = install();
    previous->retired = true;  // set_log_sink() returned: `previous` must never run again
  }
  stop = true;
  for (auto& t : loggers) t.join();
  idist::set_log_sink({});
  ASSERT_EQ(started.load(), kThreads);
  long total = 0, late = 0, expected = 0;
  for (const auto& c : counters) {
    total += c->calls;
    late += c->late;
  }
  for (long n : logged) expected += n;
  EXPECT_EQ(total, expected) << "every line reaches exactly one sink";
  EXPECT_EQ(late, 0) << "a replaced sink was called after set_log_sink() returned";
  EXPECT_EQ(counters.size(), std::size_t(kSwaps + 1));
}

}  // namespace
