#include "store/reject_log.hpp"

#include <cstdio>

#include <fmt/format.h>

namespace idist::store::detail {

void RejectLog::note(const std::string& reason, const std::string& peer, const std::string& detail) {
  ++total_;
  auto& e = entries_[reason];
  const auto now = Clock::now();
  if (!e.printed) {
    e.printed = true;
    e.last_print = now;
    std::fputs(fmt::format("idist TCPStore server: refused {}: {}{} (further refusals for this reason are "
                           "summed up every {} s)\n",
                           peer, reason, detail.empty() ? "" : fmt::format(" ({})", detail), interval_.count() / 1000)
                   .c_str(),
               stderr);
    return;
  }
  ++e.unreported;
  if (now - e.last_print < interval_) return;
  std::fputs(fmt::format("idist TCPStore server: refused {} more connection(s) in the last {:.0f} s: {}\n",
                         e.unreported, std::chrono::duration<double>(now - e.last_print).count(), reason)
                 .c_str(),
             stderr);
  e.unreported = 0;
  e.last_print = now;
}

}  // namespace idist::store::detail
