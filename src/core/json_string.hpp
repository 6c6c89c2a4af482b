#pragma once
// A JSON string literal from arbitrary bytes, for files other programs parse (torchrun's error file).
#include <string>
#include <string_view>

namespace idist::core {

/// `text` as a quoted JSON string: quotes, backslashes and control characters escaped, valid UTF-8
/// kept, and every byte that is not part of valid UTF-8 replaced by U+FFFD (Python's json.load refuses
/// invalid UTF-8, and an error message may carry any bytes).
std::string json_string(std::string_view text);

}  // namespace idist::core
