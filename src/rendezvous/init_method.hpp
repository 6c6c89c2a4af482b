#pragma once
// Parsing InitOptions::init_method: "env://", "tcp://host:port", "file:///path".
#include <string>

namespace idist::rendezvous::detail {

struct InitMethod {
  enum class Kind { Env, Tcp, File } kind = Kind::Env;
  std::string host;  // Tcp
  int port = 0;      // Tcp
  std::string path;  // File
};

/// Parses an init method ("" counts as "env://").
/// @throws ValueError for an unknown scheme, a "tcp://" without host or a valid port, or an empty file path.
InitMethod parse_init_method(const std::string& init_method);

}  // namespace idist::rendezvous::detail
