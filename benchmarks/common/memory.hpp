#pragma once
// Resident memory of this process, as the kernel reports it.
#include <cstddef>

namespace idist_bench {

/// Peak resident set size of this process in bytes: VmHWM from /proc/self/status, or getrusage's
/// ru_maxrss where /proc is not available.
std::size_t peak_rss_bytes();

/// Returns freed heap memory to the kernel (malloc_trim) and resets the peak resident set size to
/// the current one (writes 5 to /proc/self/clear_refs, Linux >= 4.0), so that a later
/// peak_rss_bytes() reports the peak of what ran in between. Returns false where that is not
/// supported (the peak then covers the whole process).
bool reset_peak_rss();

/// Current resident set size in bytes (VmRSS), or 0 where /proc is not available.
std::size_t current_rss_bytes();

/// Resident pages that are not this process's private data, in bytes: file-backed pages (the code
/// of LibTorch and the other shared libraries, RssFile) and shared memory (MPI's shared-memory
/// segments, RssShmem); 0 where /proc is not available. Peak RSS minus this, read at the end of a
/// run, estimates the peak of the process's own data: code paths touched by one configuration but
/// not another (autograd hooks, say) then do not count as memory it uses.
std::size_t shared_rss_bytes();

}  // namespace idist_bench
