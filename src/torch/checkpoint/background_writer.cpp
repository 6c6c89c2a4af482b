#include "torch/checkpoint/background_writer.hpp"

#include <exception>
#include <utility>

namespace idist::checkpoint {

Outcome run_now(const BackgroundWriter::Job& job) {
  Outcome out;
  try {
    job(out);
  } catch (const std::exception& e) {
    out.error = e.what();
  } catch (...) {
    out.error = "unknown exception";
  }
  return out;
}

BackgroundWriter::~BackgroundWriter() {
  if (thread_.joinable()) thread_.join();
}

void BackgroundWriter::join() {
  if (!thread_.joinable()) return;
  thread_.join();
  if (pending_.error.empty()) pending_.error = std::move(outcome_.error);
  for (auto& w : outcome_.warnings) pending_.warnings.push_back(std::move(w));
  outcome_ = {};
}

void BackgroundWriter::start(Job job) {
  join();
  thread_ = std::thread([this, job = std::move(job)] { outcome_ = run_now(job); });
}

Outcome BackgroundWriter::wait() {
  join();
  return std::exchange(pending_, {});
}

}  // namespace idist::checkpoint
