// SLURM compressed host lists ("node[1-3,7],login[01-02]x") expanded as ignite's _expand_hostlist does
// (itself after LLNL's py-hostlist), with stricter errors for malformed input.
#include <algorithm>
#include <cctype>
#include <set>
#include <string>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "rendezvous/discovery.hpp"

namespace idist::rendezvous {

namespace {
constexpr std::size_t kMaxHosts = std::size_t{1} << 20;  // guards against "n[0-999999999]"
constexpr std::size_t kMaxDigits = 9;                    // numbers fit an int

[[noreturn]] void invalid(std::string_view nodelist, std::string_view why) {
  throw ValueError(fmt::format("hostlist invalid : {} ({})", nodelist, why));
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// Expands "prefix[ranges]suffix": numbers sorted and de-duplicated within the bracket, zero-padded to the
// width of a zero-padded range start ("009-11" -> 009 010 011).
void expand_bracket(std::string_view nodelist, const std::string& prefix, std::string_view ranges,
                    const std::string& suffix, std::vector<std::string>& out) {
  if (ranges.empty()) invalid(nodelist, fmt::format("empty brackets after '{}'", prefix));
  std::set<long> numbers;
  std::size_t width = 1;
  std::size_t pos = 0;
  while (pos <= ranges.size()) {
    const auto comma = std::min(ranges.find(',', pos), ranges.size());
    const auto elem = ranges.substr(pos, comma - pos);
    const auto dash = elem.find('-');
    const auto first = elem.substr(0, dash);
    const auto last = dash == std::string_view::npos ? first : elem.substr(dash + 1);
    if (!all_digits(first) || !all_digits(last) || first.size() > kMaxDigits || last.size() > kMaxDigits)
      invalid(nodelist, fmt::format("'{}' is not a number or a range a-b", elem));
    if (first.size() > 1 && first.front() == '0') width = std::max(width, first.size());
    const long lo = std::stol(std::string(first));
    const long hi = std::stol(std::string(last));
    if (hi < lo) invalid(nodelist, fmt::format("range '{}' ends before it starts", elem));
    if (static_cast<std::size_t>(hi - lo) + numbers.size() >= kMaxHosts) invalid(nodelist, "too many hosts");
    for (long n = lo; n <= hi; ++n) numbers.insert(n);
    pos = comma + 1;
  }
  for (long n : numbers) out.push_back(fmt::format("{}{:0{}}{}", prefix, n, width, suffix));
}
}  // namespace

std::vector<std::string> expand_hostlist(std::string_view nodelist) {
  std::string list;
  for (char c : nodelist)
    if (c != ' ') list += c;
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < list.size()) {
    // One entry: up to the next comma outside brackets.
    const auto open = list.find_first_of("[,", pos);
    if (open == std::string::npos || list[open] == ',') {
      const auto end = open == std::string::npos ? list.size() : open;
      if (end > pos) out.push_back(list.substr(pos, end - pos));
      if (list.find(']', pos) < end) invalid(nodelist, "']' without '['");
      pos = end + 1;
      continue;
    }
    const auto close = list.find(']', open);
    if (close == std::string::npos) invalid(nodelist, "'[' without ']'");
    const auto ranges = std::string_view(list).substr(open + 1, close - open - 1);
    if (ranges.find('[') != std::string_view::npos) invalid(nodelist, "nested '['");
    auto end = list.find(',', close);
    if (end == std::string::npos) end = list.size();
    const auto prefix = list.substr(pos, open - pos);
    const auto suffix = list.substr(close + 1, end - close - 1);
    if (suffix.find_first_of("[]") != std::string::npos) invalid(nodelist, "only one [...] per host name");
    if (prefix.find(']') != std::string::npos) invalid(nodelist, "']' without '['");
    if (prefix.empty()) {
      // ignite: a bare "[]" names no host (the caller then reports that no host was found).
      if (ranges.empty() && suffix.empty()) {
        pos = end + 1;
        continue;
      }
      invalid(nodelist, "'[' without a host name before it");
    }
    expand_bracket(nodelist, prefix, ranges, suffix, out);
    if (out.size() > kMaxHosts) invalid(nodelist, "too many hosts");
    pos = end + 1;
  }
  return out;
}

}  // namespace idist::rendezvous
