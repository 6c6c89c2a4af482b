// idist collectives benchmark: latency and bandwidth of all_reduce, all_gather, broadcast and
// barrier (reduce_scatter and all_to_all with --ops) through idist, against the raw backend call on the same
// communicator and buffers, measured in the same run (alternating blocks of iterations). See docs/performance.md.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "collectives/measure.hpp"
#include "collectives/options.hpp"
#include "common/raw_backend.hpp"
#include "common/table.hpp"
#include "common/timing.hpp"
#include "idist/idist.hpp"

namespace idist_bench {
namespace {

Schedule schedule_for(const CollectivesOptions& o, std::size_t bytes) {
  const bool small = bytes <= o.large_threshold;
  Schedule s;
  s.iters = std::max(1, int(std::lround((small ? o.iters_small : o.iters_large) * o.iters_scale)));
  s.warmup = int(std::lround((small ? o.warmup_small : o.warmup_large) * o.iters_scale));
  s.blocks = o.blocks;
  s.skew_us = o.skew_us;
  return s;
}

// Bandwidths span six decades: four significant digits ("0.0001234", "4.783").
std::string sig(double v) { return fmt::format("{:.4g}", v); }

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

std::vector<Column> columns(const std::vector<Variant>& variants) {
  std::vector<Column> c{{"size_B", 10}, {"count", 9},       {"dtype", 7},      {"op", 10},
                        {"p50_us", 10}, {"avg_us", 10},     {"min_us", 9},     {"max_us", 10},
                        {"p99_us", 10}, {"algbw_GBps", 10}, {"busbw_GBps", 10}};
  for (std::size_t k = 1; k < variants.size(); ++k) {
    const std::string& v = variants[k].name;
    c.push_back({v + "_p50_us", 11});
    c.push_back({"ratio_" + v, 9});
    c.push_back({v + "_avg_us", 10, false});
    c.push_back({v + "_min_us", 10, false});
    c.push_back({v + "_max_us", 10, false});
    c.push_back({v + "_p99_us", 10, false});
    c.push_back({v + "_busbw_GBps", 10, false});
    c.push_back({v + "_wrong", 8, false});
  }
  c.push_back({"iters", 6, false});
  c.push_back({"wrong", 6});
  c.push_back({"target", 6});
  return c;
}

std::vector<std::string> row(const Measurement& m, const std::vector<Variant>& variants, int n, int iters) {
  const auto bw = [&](double us) { return us > 0 ? double(m.bytes) / (us * 1e-6) / 1e9 : 0.0; };
  const Summary& t = m.times[0];
  const double factor = bus_factor(m.op, n);
  std::vector<std::string> r{std::to_string(m.bytes),
                             std::to_string(m.count),
                             m.op == "barrier" ? "-" : "float32",
                             m.op,
                             fixed(t.p50, 2),
                             fixed(t.avg, 2),
                             fixed(t.min, 2),
                             fixed(t.max, 2),
                             fixed(t.p99, 2),
                             sig(bw(t.p50)),
                             sig(bw(t.p50) * factor)};
  for (std::size_t k = 1; k < variants.size(); ++k) {
    const Summary& s = m.times[k];
    r.push_back(fixed(s.p50, 2));
    r.push_back(s.p50 > 0 ? fixed(t.p50 / s.p50, 3) : "-");
    r.push_back(fixed(s.avg, 2));
    r.push_back(fixed(s.min, 2));
    r.push_back(fixed(s.max, 2));
    r.push_back(fixed(s.p99, 2));
    r.push_back(sig(bw(s.p50) * factor));
    r.push_back(std::to_string(m.wrong[k]));
  }
  r.push_back(std::to_string(iters));
  r.push_back(std::to_string(m.wrong[0]));
  // The target: idist's p50 within max(3 %, 0.3 us) of the blocking raw call's.
  const double raw = variants.size() > 1 ? m.times[1].p50 : 0.0;
  r.push_back(variants.size() < 2 ? "-" : t.p50 <= raw + std::max(0.03 * raw, 0.3) ? "ok" : "MISS");
  return r;
}

// One line per op and baseline: the geometric mean of idist p50 / baseline p50 over the sizes
// (single sizes are noisy on a shared machine; the mean over ~24 sizes is the steadier estimate),
// and for the blocking raw call how many sizes meet the target.
void print_ratio_summary(const std::string& op, const Table& table, const std::vector<Variant>& variants) {
  for (std::size_t k = 1; k < variants.size(); ++k) {
    const int col = table.column("ratio_" + variants[k].name);
    double log_sum = 0, lo = 1e300, hi = 0;
    int n = 0, met = 0;
    for (const auto& r : table.rows()) {
      const double ratio = std::stod(r[std::size_t(col)]);
      log_sum += std::log(ratio);
      lo = std::min(lo, ratio);
      hi = std::max(hi, ratio);
      met += r.back() == "ok";
      ++n;
    }
    if (n == 0) continue;
    fmt::print("# {}: idist / {} p50 over {} sizes: geometric mean {:.3f}, min {:.3f}, max {:.3f}", op,
               variants[k].name, n, std::exp(log_sum / n), lo, hi);
    if (k == 1) fmt::print("; target met at {}/{}", met, n);
    fmt::print("\n");
  }
}

void run(const CollectivesOptions& o) {
  idist::ComputationModel& model = idist::current_model();
  const int n = idist::get_world_size();
  const bool root = idist::get_rank() == 0;
  auto raw = make_raw_backend(model, RawKind::Blocking);
  auto raw_nb = o.nonblocking_baseline ? make_raw_backend(model, RawKind::NonBlocking) : nullptr;
  std::vector<Variant> variants{{"idist", nullptr}};
  if (raw) variants.push_back({"raw", raw.get()});
  if (raw_nb) variants.push_back({"raw_nb", raw_nb.get()});

  std::string backend = *idist::backend() + (o.mpi_polled ? "_polled" : "");
  if (!o.debug.empty()) backend += "_debug_" + lower(o.debug);
  if (o.skew_us > 0) backend += fmt::format("_skew{}us", o.skew_us);
  if (root) {
    ensure_dir(o.out_dir);
    fmt::print("# idist collectives benchmark: backend {}, {} ranks, host {}, load average {}\n", backend, n,
               idist::hostname(), load_average());
    fmt::print("# times: per-iteration maximum over ranks, microseconds; bandwidth: 10^9 bytes/s from p50\n");
    if (o.skew_us > 0)
      fmt::print("# every timed call after a barrier, rank 0 {} us after the others; times from rank 0's call\n",
                 o.skew_us);
    for (std::size_t k = 1; k < variants.size(); ++k)
      fmt::print("# {}: {} ({}, ...) on its own communicator over the same ranks; ratio_{} = idist p50 / {} p50\n",
                 variants[k].name, variants[k].raw->call_name("all_reduce"), variants[k].raw->call_name("barrier"),
                 variants[k].name, variants[k].name);
  }
  long long wrong = 0;  // summed over ranks by measure(): the same on every rank
  for (const std::string& op : o.ops) {
    Table table(columns(variants));
    if (root) {
      fmt::print("\n## {}\n", op);
      table.print_header();
    }
    std::vector<std::size_t> sizes;
    if (op == "barrier") {
      sizes.push_back(0);
    } else {
      for (std::size_t b = o.min_bytes; b <= o.max_bytes; b *= 2) sizes.push_back(b);
    }
    for (std::size_t bytes : sizes) {
      const Schedule s = schedule_for(o, bytes);
      const Measurement m = measure(op, bytes, variants, s);
      if (op != "barrier" && m.count == 0) continue;  // fewer bytes than one float per rank
      for (long long w : m.wrong) wrong += w;
      auto cells = row(m, variants, n, s.iters);
      if (root) table.add_row(std::move(cells));
    }
    if (root) print_ratio_summary(op, table, variants);
    if (root) {
      const std::string stem = o.out_dir + "/collectives_" + backend + "_" + op;
      table.write_csv(stem + ".csv");
      table.write_markdown(stem + ".md");
    }
  }
  if (root) fmt::print("\n# load average at the end: {}\n", load_average());
  if (wrong > 0) throw std::runtime_error(std::to_string(wrong) + " wrong result element(s); see the wrong columns");
}

}  // namespace
}  // namespace idist_bench

int main(int argc, char** argv) {
  using namespace idist_bench;
  CollectivesOptions opts;
  int code = 0;
  if (!parse_collectives_options(argc, argv, opts, code)) return code;
  if (opts.mpi_polled && opts.backend != "mpi") {
    std::fprintf(stderr, "idist_bench_collectives: --mpi-polled applies to --backend mpi only\n");
    return 2;
  }
  // Through the environment so that spawned workers and mpirun's ranks read the same level.
  if (!opts.debug.empty()) ::setenv("IDIST_DISTRIBUTED_DEBUG", opts.debug.c_str(), 1);
  try {
    const auto timeout = std::chrono::milliseconds(std::chrono::seconds(opts.timeout_s));
    if (opts.nproc > 0) {
      idist::SpawnOptions so;
      so.nproc_per_node = opts.nproc;
      so.master_port = opts.port;
      so.timeout = timeout;
      idist::spawn(
          opts.backend, [](int, const CollectivesOptions& o) { run(o); }, opts, so);
    } else {
      idist::InitOptions io;
      io.timeout = timeout;
      io.mpi_blocking_collectives = !opts.mpi_polled;
      idist::initialize(opts.backend, io);
      run(opts);
      idist::finalize();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idist_bench_collectives: %s\n", e.what());
    return 1;
  }
  return 0;
}
