// detail::format_message: the public headers' bridge to fmt inside libidist.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "idist/detail/format.hpp"

namespace idist::detail {
namespace {

TEST(FormatMessage, EveryArgumentKindInOrder) {
  const std::string name = "bucket";
  EXPECT_EQ(format_message("{} {} {} {} {} {}", true, -3, std::size_t(7), 0.5f, 1e-9, name),
            "true -3 7 0.5 1e-09 bucket");
  EXPECT_EQ(format_message("{}: rank {} of {}", "all_reduce", std::int64_t(1), 4u), "all_reduce: rank 1 of 4");
}

TEST(FormatMessage, FormatSpecsAndEscapedBraces) {
  EXPECT_EQ(format_message("{:.2f} ms", 3.14159), "3.14 ms");
  EXPECT_EQ(format_message("AutoModelOptions{{.x = {}}}", 2), "AutoModelOptions{.x = 2}");
  EXPECT_EQ(count_replacement_fields("{{}} {} {:>4}"), 2u);
}

TEST(FormatMessage, ABadSpecDoesNotThrowAndKeepsTheFormat) {
  // A message is built on the way to an exception: it must not throw another one.
  const std::string out = format_message("value {:q}", 5);
  EXPECT_NE(out.find("value {:q}"), std::string::npos) << out;
}

}  // namespace
}  // namespace idist::detail
