#pragma once
/// @file
/// torchrun's error file: how a worker tells torch.distributed.elastic's agent why it failed, so that the
/// agent's failure summary shows the worker's message as the root cause instead of `error_file: <N/A>`.
/// The C++ counterpart of torch.distributed.elastic.multiprocessing.errors.record (`@record`) and of
/// ErrorHandler.record_exception.
///
/// torchrun gives every worker a path in TORCHELASTIC_ERROR_FILE. record_error() writes there, in the
/// JSON the agent reads:
///
///     {"message": {"message": "<Type>: rank <R>: <what>",
///                  "extraInfo": {"py_callstack": "<Type>: <what>\n(rank, local rank, host, pid)",
///                                "timestamp": "<unix seconds>"}}}
///
/// The agent's summary prints `py_callstack` under "traceback" (a C++ program has no Python callstack:
/// idist writes the type, message and where it was raised). Use record() to wrap main, or call
/// record_error() from a catch of your own:
///
///     int main(int argc, char** argv) {
///       return idist::elastic::record([&] { return run(argc, argv); });
///     }

#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>

namespace idist::elastic {

/// Writes the error file for an exception: its type (demangled, e.g. "idist::TimeoutError"), its
/// what(), the failing rank (RANK), local rank, host, pid and the time. Follows torch's handler: without
/// TORCHELASTIC_ERROR_FILE nothing is written; an existing file is overwritten (with a warning on
/// stderr naming it). The file is replaced atomically (a temporary file in the same directory, fsync,
/// rename), so the agent never reads half a file. Never throws: a file that cannot be written is
/// reported on stderr.
/// @return the path written, or std::nullopt when TORCHELASTIC_ERROR_FILE is unset or writing failed.
std::optional<std::string> record_error(const std::exception& e);

/// record_error() for a failure described by a type name and a message (e.g. from a catch (...) or an
/// error code): the file then says "<type>: rank <R>: <message>".
std::optional<std::string> record_error(std::string_view type, std::string_view message);

/// The path torchrun gave this worker (TORCHELASTIC_ERROR_FILE), or std::nullopt outside torchrun.
std::optional<std::string> error_file_path();

namespace detail {
/// Used by record(): prints "error: <type>: <what>" and, when one was written, the error file's path on
/// stderr.
void print_error(std::string_view type, std::string_view what, const std::optional<std::string>& error_file);
/// The demangled name of an exception's dynamic type.
std::string exception_type(const std::exception& e);
}  // namespace detail

/// Runs a main-like function and turns an escaping exception into torchrun's error file: the C++ form
/// of `@record`. `fn` returns an exit code (int) or nothing (exit code 0). On an exception it calls
/// record_error(), prints "error: <Type>: <what>" on stderr and returns 1 (torch's decorator re-raises,
/// which in Python also ends the process with an error; in C++ an escaping exception would abort).
/// @return fn's exit code, or 1 after an exception.
template <class F>
int record(F&& fn) {
  try {
    if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
      std::invoke(fn);
      return 0;
    } else {
      return static_cast<int>(std::invoke(fn));
    }
  } catch (const std::exception& e) {
    detail::print_error(detail::exception_type(e), e.what(), record_error(e));
  } catch (...) {
    constexpr std::string_view kWhat = "an exception that is not a std::exception";
    detail::print_error("unknown", kWhat, record_error("unknown", kWhat));
  }
  return 1;
}

}  // namespace idist::elastic
