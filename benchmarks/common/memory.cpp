#include "common/memory.hpp"

#include <malloc.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstring>

namespace idist_bench {

namespace {
// A "Name:   1234 kB" line of /proc/self/status, in bytes; 0 when absent.
std::size_t status_kb(const char* name) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  std::size_t kb = 0;
  const std::size_t len = std::strlen(name);
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, name, len) == 0 && line[len] == ':') {
      std::sscanf(line + len + 1, "%zu", &kb);
      break;
    }
  }
  std::fclose(f);
  return kb * 1024;
}
}  // namespace

std::size_t peak_rss_bytes() {
  if (const std::size_t b = status_kb("VmHWM")) return b;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return std::size_t(ru.ru_maxrss) * 1024;  // Linux reports kilobytes
}

bool reset_peak_rss() {
  malloc_trim(0);
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

std::size_t current_rss_bytes() { return status_kb("VmRSS"); }

std::size_t shared_rss_bytes() { return status_kb("RssFile") + status_kb("RssShmem"); }

}  // namespace idist_bench
