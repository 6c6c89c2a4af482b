// log_info / log_warning: one line each on stderr, flushed at once so that lines of several ranks
// sharing a terminal do not interleave mid-line. Also detail::vformat_message, with which idist's
// headers build their messages through fmt (a private dependency they cannot include).
#include "idist/logging.hpp"

#include <fmt/args.h>
#include <fmt/format.h>

#include "idist/context.hpp"
#include "idist/detail/format.hpp"

namespace idist {

namespace {

void write_line(std::string_view logger, std::string_view level, std::string_view message) {
  fmt::print(stderr, "idist.{} {}: {}\n", logger, level, message);
  std::fflush(stderr);
}

}  // namespace

void log_info(std::string_view logger, std::string_view message) {
  if (get_rank() == 0) write_line(logger, "INFO", message);
}

void log_warning(std::string_view logger, std::string_view message) { write_line(logger, "WARNING", message); }

namespace detail {

std::string vformat_message(std::string_view format, std::span<const MessageArg> args) {
  fmt::dynamic_format_arg_store<fmt::format_context> store;
  store.reserve(args.size(), 0);
  for (const MessageArg& a : args) {
    switch (a.kind()) {
      case MessageArg::Kind::Bool: store.push_back(a.bool_value()); break;
      case MessageArg::Kind::Signed: store.push_back(a.signed_value()); break;
      case MessageArg::Kind::Unsigned: store.push_back(a.unsigned_value()); break;
      case MessageArg::Kind::Float: store.push_back(a.float_value()); break;
      case MessageArg::Kind::Double: store.push_back(a.double_value()); break;
      case MessageArg::Kind::String:
        store.push_back(a.string_value());  // a view: not copied
        break;
    }
  }
  try {
    return fmt::vformat(format, store);
  } catch (const fmt::format_error& e) {
    return fmt::format("{} [message format error: {}]", format, e.what());
  }
}

}  // namespace detail

}  // namespace idist
