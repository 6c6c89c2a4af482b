// Archive bytes and copies (see archive_io.hpp).
#include "torch/zero/archive_io.hpp"

#include <sstream>

#include <torch/types.h>

namespace idist::detail {

std::string archive_bytes(torch::serialize::OutputArchive& archive) {
  std::ostringstream out;
  archive.save_to(out);
  return std::move(out).str();
}

void load_archive(torch::serialize::InputArchive& archive, const std::string& bytes,
                  std::optional<c10::Device> device) {
  if (device)
    archive.load_from(bytes.data(), bytes.size(), *device);
  else
    archive.load_from(bytes.data(), bytes.size());
}

void copy_archive(torch::serialize::InputArchive& from, torch::serialize::OutputArchive& to,
                  std::optional<c10::Device> device) {
  for (const std::string& key : from.keys()) {
    torch::serialize::InputArchive nested;
    if (from.try_read(key, nested)) {
      torch::serialize::OutputArchive copy(to.compilation_unit());
      copy_archive(nested, copy, device);
      to.write(key, copy);
      continue;
    }
    at::Tensor t;
    for (const bool is_buffer : {false, true}) {
      if (from.try_read(key, t, is_buffer)) {
        to.write(key, device ? t.to(*device) : t, is_buffer);
        break;
      }
    }
    if (t.defined()) continue;
    c10::IValue value;
    from.read(key, value);
    to.write(key, value);
  }
}

}  // namespace idist::detail
