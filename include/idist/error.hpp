#pragma once
/// @file
/// The exception hierarchy of idist. Every failure the library reports is an idist::Error.

#include <stdexcept>
#include <string>

namespace idist {

/// Base of every exception idist throws (mirrors the ValueError / RuntimeError / TypeError that
/// ignite.distributed raises). Messages name the argument, the value given and what was expected.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Bad input: an argument out of range, an unknown backend or reduction name, a missing value.
/// Mirrors ignite's ValueError / TypeError.
class ValueError : public Error {
 public:
  using Error::Error;
};

/// A wait ran past its deadline: a rendezvous, a collective or a peer that never arrived.
/// The message names the operation, this rank and the elapsed time.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

/// The communication backend failed: a peer disconnected or died, the library returned an error,
/// or a communicator was aborted. After it the process group cannot be trusted; call finalize().
class BackendError : public Error {
 public:
  using Error::Error;
};

}  // namespace idist
