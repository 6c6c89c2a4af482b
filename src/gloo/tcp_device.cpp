#include "gloo/tcp_device.hpp"

#include <gloo/transport/tcp/device.h>

#include <fmt/format.h>

#include "idist/error.hpp"

namespace idist::gloo_backend {

std::shared_ptr<gloo::transport::Device> make_tcp_device(const rendezvous::InterfaceChoice& where) {
  gloo::transport::tcp::attr attr;
  attr.hostname = where.address;  // an address, never a name that might resolve to the loopback
  try {
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw BackendError(
        fmt::format("gloo: cannot create the TCP transport on {}: {} (set GLOO_SOCKET_IFNAME to the "
                    "network interface to use)",
                    where.describe(), e.what()));
  }
}

}  // namespace idist::gloo_backend
