#pragma once
// Creation of Gloo's TCP transport device.
#include <memory>
#include <optional>
#include <string>

#include "rendezvous/network_interface.hpp"

namespace gloo::transport {
class Device;
}

namespace idist::gloo_backend {

/// Nice value of Gloo's transport (event-loop) thread unless IDIST_GLOO_LOOP_NICE says otherwise: the
/// lowest CFS weight, so that the loop's polling yields the core to the thread it serves.
inline constexpr int kDefaultLoopNice = 19;

/// Reads IDIST_GLOO_LOOP_NICE: unset or empty gives kDefaultLoopNice; "off" or "0" gives nullopt
/// (the loop thread keeps the creating thread's priority); "1".."19" gives that nice value.
/// @throws ValueError naming the accepted forms for anything else.
std::optional<int> loop_nice_from_env();

/// Creates gloo's TCP device that every context of this process uses, listening on `where.address`
/// (chosen by rendezvous::select_interface: GLOO_SOCKET_IFNAME, else the address routing to the master,
/// else the loopback for a one-node world).
/// The device's event-loop thread runs at the nice value of loop_nice_from_env() (never below the
/// caller's own), with the caller's CPU affinity.
/// @throws ValueError for a bad IDIST_GLOO_LOOP_NICE.
/// @throws BackendError naming the interface and address when the device cannot be created.
std::shared_ptr<gloo::transport::Device> make_tcp_device(const rendezvous::InterfaceChoice& where);

}  // namespace idist::gloo_backend
