#pragma once
/// @file
/// The log lines idist writes where ignite logs through its `setup_logger` (INFO, rank 0 only) or
/// warns through Python's `warnings.warn` (every process). Lines go to stderr as
/// `idist.<logger> INFO: <message>` or `idist.<logger> WARNING: <message>`, the logger name being
/// the part of ignite's module path after `ignite.` (e.g. "distributed.launcher.Parallel").

#include <string_view>

namespace idist {

/// Writes `idist.LOGGER INFO: MESSAGE` to stderr on rank 0 only (other ranks stay silent, as
/// ignite's loggers do on ranks > 0). Mirrors `setup_logger(__name__).info(message)` in ignite.
void log_info(std::string_view logger, std::string_view message);

/// Writes `idist.LOGGER WARNING: MESSAGE` to stderr on every rank. Mirrors ignite's
/// `warnings.warn(message)`, which each process prints.
void log_warning(std::string_view logger, std::string_view message);

}  // namespace idist
