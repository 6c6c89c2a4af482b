#include "gloo/tcp_device.hpp"

#include <gloo/transport/tcp/device.h>

#include <cstdlib>

#include "idist/context.hpp"
#include "idist/error.hpp"

namespace idist::gloo_backend {

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::shared_ptr<gloo::transport::Device> make_tcp_device(const std::string& master_addr) {
  gloo::transport::tcp::attr attr;
  std::string where;
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    const std::string list = ifname;
    attr.iface = list.substr(0, list.find(','));
    where = "interface '" + attr.iface + "' (GLOO_SOCKET_IFNAME)";
  } else if (is_loopback(master_addr)) {
    attr.hostname = "127.0.0.1";
    where = "address 127.0.0.1";
  } else {
    attr.hostname = idist::hostname();
    where = "host name '" + attr.hostname + "'";
  }
  try {
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw BackendError("gloo: cannot create the TCP transport on " + where + ": " + e.what() +
                       " (set GLOO_SOCKET_IFNAME to the network interface to use)");
  }
}

}  // namespace idist::gloo_backend
