// torchrun's error file (include/idist/elastic.hpp): the JSON torch's agent parses, written atomically,
// and record() as the C++ @record. The parse is checked with torch's own ProcessFailure where python3
// has torch.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "idist/elastic.hpp"
#include "idist/error.hpp"
#include "python_store.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

namespace {

using idist::test::TempDir;
namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ElasticErrorFile, NothingOutsideTorchrun) {
  idist::test::ScopedEnv env;
  ::unsetenv("TORCHELASTIC_ERROR_FILE");
  EXPECT_FALSE(idist::elastic::error_file_path().has_value());
  EXPECT_FALSE(idist::elastic::record_error(idist::ValueError("x")).has_value());
}

TEST(ElasticErrorFile, WritesTorchsJson) {
  TempDir dir("idist-errfile");
  const auto file = dir / "error.json";
  idist::test::ScopedEnv env;
  env.set("TORCHELASTIC_ERROR_FILE", file.string()).set("RANK", "3").set("LOCAL_RANK", "1");
  const auto before = std::time(nullptr);
  const auto written = idist::elastic::record_error(idist::TimeoutError("all_reduce timed out \"here\"\n\tnext"));
  ASSERT_EQ(written, file.string());
  const std::string json = read(file);
  EXPECT_NE(
      json.find(R"({"message": {"message": "idist::TimeoutError: rank 3: all_reduce timed out \"here\"\n\tnext")"),
      std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("py_callstack": "idist::TimeoutError: all_reduce timed out)"), std::string::npos) << json;
  EXPECT_NE(json.find("raised on rank 3, local rank 1"), std::string::npos) << json;
  const auto ts = json.find(R"("timestamp": ")");
  ASSERT_NE(ts, std::string::npos) << json;
  const long stamp = std::stol(json.substr(ts + 14));
  EXPECT_GE(stamp, long(before));
  EXPECT_LE(stamp, long(std::time(nullptr)));
  EXPECT_FALSE(fs::exists(file.string() + fmt::format(".tmp{}", ::getpid())));  // renamed into place
}

TEST(ElasticErrorFile, TorchsProcessFailureParsesIt) {
  IDIST_REQUIRE_TORCH();
  TempDir dir("idist-errfile");
  const auto file = dir / "error.json";
  idist::test::ScopedEnv env;
  env.set("TORCHELASTIC_ERROR_FILE", file.string()).set("RANK", "1");
  // Invalid UTF-8 and control characters in a message must not make the agent's json.load fail.
  ASSERT_TRUE(idist::elastic::record_error(idist::BackendError(std::string("peer lost \xff\xfe \x01 ok é"))));
  const auto out = dir / "parsed.txt";
  const std::string script = fmt::format(
      "from torch.distributed.elastic.multiprocessing.errors import ProcessFailure\n"
      "f = ProcessFailure(local_rank=1, pid=1, exitcode=1, error_file='{}')\n"
      "open('{}', 'w').write(f.message['message'] + '\\n' + str(f.timestamp))\n",
      file.string(), out.string());
  const auto py = dir / "parse.py";
  std::ofstream(py) << script;
  ASSERT_EQ(std::system(fmt::format("{} {}", idist::test::torch_python(), py.string()).c_str()), 0);
  const std::string parsed = read(out);
  EXPECT_EQ(parsed.rfind("idist::BackendError: rank 1: peer lost \xEF\xBF\xBD\xEF\xBF\xBD \x01 ok é\n", 0), 0u)
      << parsed;
}

TEST(ElasticErrorFile, OverwritesAnExistingFileLikeTorch) {
  TempDir dir("idist-errfile");
  const auto file = dir / "error.json";
  std::ofstream(file) << "{\"old\": 1}";
  idist::test::ScopedEnv env;
  env.set("TORCHELASTIC_ERROR_FILE", file.string());
  testing::internal::CaptureStderr();
  EXPECT_TRUE(idist::elastic::record_error("my::Error", "second").has_value());
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("already exists and will be overwritten"), std::string::npos) << err;
  EXPECT_NE(read(file).find("my::Error: rank "), std::string::npos);
}

TEST(ElasticErrorFile, AnUnwritablePathIsReportedNotThrown) {
  idist::test::ScopedEnv env;
  env.set("TORCHELASTIC_ERROR_FILE", "/nonexistent-dir/sub/error.json");
  testing::internal::CaptureStderr();
  EXPECT_FALSE(idist::elastic::record_error(idist::ValueError("x")).has_value());
  EXPECT_NE(testing::internal::GetCapturedStderr().find("cannot write the error file"), std::string::npos);
}

TEST(ElasticRecord, ReturnsTheExitCodeOrRecordsTheException) {
  TempDir dir("idist-errfile");
  const auto file = dir / "error.json";
  idist::test::ScopedEnv env;
  env.set("TORCHELASTIC_ERROR_FILE", file.string()).set("RANK", "0");
  EXPECT_EQ(idist::elastic::record([] { return 7; }), 7);
  EXPECT_EQ(idist::elastic::record([] {}), 0);
  EXPECT_FALSE(fs::exists(file));
  testing::internal::CaptureStderr();
  EXPECT_EQ(idist::elastic::record([]() -> int { throw idist::ValueError("bad input"); }), 1);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("error: idist::ValueError: bad input"), std::string::npos) << err;
  EXPECT_NE(read(file).find("idist::ValueError: rank 0: bad input"), std::string::npos);
  testing::internal::CaptureStderr();
  EXPECT_EQ(idist::elastic::record([] { throw 42; }), 1);
  testing::internal::GetCapturedStderr();
  EXPECT_NE(read(file).find("unknown: rank 0: an exception that is not a std::exception"), std::string::npos);
}

}  // namespace
