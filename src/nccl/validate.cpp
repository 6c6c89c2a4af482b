#include "nccl/validate.hpp"

#include <string>

#include <fmt/format.h>

#include "idist/error.hpp"

namespace idist::nccl_backend {

void check_buffer_device(std::string_view op, std::string_view arg, const Device& buf, const Device& mine) {
  if (buf.type == DeviceType::CPU) return;
  if (buf.index == mine.index && mine.type == DeviceType::CUDA) return;
  throw ValueError(
      fmt::format("{}: {} is on {} but this rank's device is {}; the nccl backend communicates memory of the "
                  "rank's own device (idist::device())",
                  op, arg, buf.str(), mine.str()));
}

}  // namespace idist::nccl_backend
