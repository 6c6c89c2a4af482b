#pragma once
// Creation of Gloo's TCP transport device.
#include <memory>
#include <string>

#include "rendezvous/network_interface.hpp"

namespace gloo::transport {
class Device;
}

namespace idist::gloo_backend {

/// Creates gloo's TCP device that every context of this process uses, listening on `where.address`
/// (chosen by rendezvous::select_interface: GLOO_SOCKET_IFNAME, else the address routing to the master,
/// else the loopback for a one-node world).
/// @throws BackendError naming the interface and address when the device cannot be created.
std::shared_ptr<gloo::transport::Device> make_tcp_device(const rendezvous::InterfaceChoice& where);

}  // namespace idist::gloo_backend
