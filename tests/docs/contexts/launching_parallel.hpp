// Context of docs/launching.md's Parallel program: its configuration and command-line parser.
#pragma once

#include <idist/launcher.hpp>

struct Config {
  int epochs = 1;
};

inline Config parse(int, char**) { return {}; }
