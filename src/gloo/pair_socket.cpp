#include "gloo/pair_socket.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>

#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/address.h>

namespace idist::gloo_backend {
namespace {

std::optional<Endpoint> endpoint_of(const sockaddr_storage& addr) {
  if (addr.ss_family != AF_INET) return std::nullopt;
  const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
  char text[INET_ADDRSTRLEN] = {};
  if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) == nullptr) return std::nullopt;
  return Endpoint{text, int(ntohs(in->sin_port))};
}

// The local and remote endpoints of descriptor `fd`, when it is a connected IPv4 socket.
std::optional<PairSocket> socket_of(int fd) {
  sockaddr_storage local{}, remote{};
  socklen_t len = sizeof local;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) return std::nullopt;
  len = sizeof remote;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &len) != 0) return std::nullopt;
  auto l = endpoint_of(local);
  auto r = endpoint_of(remote);
  if (!l || !r) return std::nullopt;
  return PairSocket{fd, std::move(*l), std::move(*r)};
}

}  // namespace

std::optional<PairSocket> find_pair_socket(gloo::transport::Pair& pair) {
  const auto* address = dynamic_cast<const gloo::transport::tcp::Address*>(&pair.address());
  if (address == nullptr) return std::nullopt;
  const auto local = endpoint_of(address->getSockaddr());
  if (!local || local->port == 0) return std::nullopt;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return std::nullopt;
  std::optional<PairSocket> found;
  while (const dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == ::dirfd(dir)) continue;
    if (auto s = socket_of(int(fd)); s && s->local == *local) {
      found = std::move(s);
      break;
    }
  }
  ::closedir(dir);
  return found;
}

bool shutdown_pair_socket(const PairSocket& socket) {
  const auto now = socket_of(socket.fd);
  if (!now || now->local != socket.local || now->remote != socket.remote) return false;
  return ::shutdown(socket.fd, SHUT_RDWR) == 0;
}

}  // namespace idist::gloo_backend
