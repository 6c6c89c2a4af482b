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

/// Ranks issued different collectives at the same point (IDIST_DISTRIBUTED_DEBUG=DETAIL): a different
/// operation, element type, element count, reduce op, root or group. Raised on every rank of the group
/// before any data moved; the message names each rank and what it issued, e.g.
/// "rank 0: all_reduce float32[4] SUM seq 12; rank 1: broadcast float32[4] src 0 seq 12".
/// The group stays usable: sequence numbers stay aligned, so the next matching collective works.
class DesyncError : public Error {
 public:
  using Error::Error;
};

}  // namespace idist
