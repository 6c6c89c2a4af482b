#pragma once
// Creation of Gloo's TCP transport device.
#include <memory>
#include <string>

namespace gloo::transport {
class Device;
}

namespace idist::gloo_backend {

/// Creates gloo's TCP device that every context of this process uses.
/// The listening address: the interface named by GLOO_SOCKET_IFNAME (the first of a comma-separated
/// list) when set, as in PyTorch; else 127.0.0.1 when `master_addr` is a loopback address (a
/// single-node job); else this host's name, which the other nodes must be able to resolve.
/// @throws BackendError naming the address when the device cannot be created.
std::shared_ptr<gloo::transport::Device> make_tcp_device(const std::string& master_addr);

/// True for "localhost", "127.x.y.z" and "::1".
bool is_loopback(const std::string& host);

}  // namespace idist::gloo_backend
