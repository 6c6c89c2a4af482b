#pragma once
// Resident memory of this process, as the kernel reports it.
#include <cstddef>

namespace idist_bench {

/// Peak resident set size of this process in bytes: VmHWM from /proc/self/status, or getrusage's
/// ru_maxrss where /proc is not available.
std::size_t peak_rss_bytes();

/// Current resident set size in bytes (VmRSS), or 0 where /proc is not available.
std::size_t current_rss_bytes();

}  // namespace idist_bench
