#include "nccl/validate.hpp"

#include <string>

#include "idist/error.hpp"

namespace idist::nccl_backend {

void check_buffer_device(std::string_view op, std::string_view arg, const Device& buf, const Device& mine) {
  if (buf.type == DeviceType::CPU) return;
  if (buf.index == mine.index && mine.type == DeviceType::CUDA) return;
  throw ValueError(std::string(op) + ": " + std::string(arg) + " is on " + buf.str() + " but this rank's device is " +
                   mine.str() + "; the nccl backend communicates memory of the rank's own device (idist::device())");
}

}  // namespace idist::nccl_backend
