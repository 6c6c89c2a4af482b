#pragma once
// A free TCP port for the tests' rendezvous (shared by the test mains, launchers and drivers).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace idist::test {

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0 and released): the rendezvous
/// server binds it shortly after, so a collision with another process is unlikely, not impossible.
inline int free_tcp_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  if (fd >= 0) ::close(fd);
  return port;
}

}  // namespace idist::test
