#include "rendezvous/init_method.hpp"

#include <fmt/format.h>

#include "idist/error.hpp"
#include "rendezvous/env_parse.hpp"

namespace idist::rendezvous::detail {

namespace {
bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }
}  // namespace

InitMethod parse_init_method(const std::string& init_method) {
  InitMethod m;
  if (init_method.empty() || init_method == "env://") return m;
  if (starts_with(init_method, "tcp://")) {
    m.kind = InitMethod::Kind::Tcp;
    const auto rest = init_method.substr(6);
    std::string port;
    if (starts_with(rest, "[")) {  // [IPv6]:port
      const auto close = rest.find(']');
      if (close != std::string::npos && close + 1 < rest.size() && rest[close + 1] == ':') {
        m.host = rest.substr(1, close - 1);
        port = rest.substr(close + 2);
      }
    } else if (const auto colon = rest.rfind(':'); colon != std::string::npos) {
      m.host = rest.substr(0, colon);
      port = rest.substr(colon + 1);
    }
    if (m.host.empty() || port.empty())
      throw ValueError(fmt::format("init_method should be 'tcp://host:port', got '{}'", init_method));
    m.port = parse_port(fmt::format("port of init_method '{}'", init_method), port);
    return m;
  }
  if (starts_with(init_method, "file://")) {
    m.kind = InitMethod::Kind::File;
    m.path = init_method.substr(7);
    if (m.path.empty())
      throw ValueError(fmt::format("init_method should be 'file:///path/to/store', got '{}'", init_method));
    return m;
  }
  throw ValueError(
      fmt::format("init_method should be 'env://', 'tcp://host:port' or 'file:///path', got '{}'", init_method));
}

}  // namespace idist::rendezvous::detail
