// idist_trace: reads every rank's flight recorder dump (IDIST_TRACE_DIR) and names the first
// collective where the ranks diverge or where some never arrived.
//
//   idist_trace <dir>        exit status 0: the dumps agree; 1: a divergence or missing rank was found;
//                            2: bad usage or unreadable dumps
#include <cstdio>
#include <exception>

#include "analyze.hpp"
#include "trace_reader.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <IDIST_TRACE_DIR>\n", argv[0]);
    return 2;
  }
  try {
    const auto traces = idist_trace::read_dir(argv[1]);
    for (const auto& t : traces)
      std::printf("rank %d: %zu collectives recorded; dumped on: %s\n", t.rank, t.entries.size(), t.reason.c_str());
    const auto found = idist_trace::findings(traces);
    for (const auto& f : found) std::printf("%s\n", f.c_str());
    if (found.empty()) std::printf("the dumps agree: every rank issued the same collectives\n");
    return found.empty() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idist_trace: %s\n", e.what());
    return 2;
  }
}
