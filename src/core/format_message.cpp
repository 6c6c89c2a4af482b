// detail::vformat_message: fmt run inside libidist for the messages idist's headers build
// (detail::format_message), since fmt is a private dependency those headers cannot include.
#include "idist/detail/format.hpp"

#include <fmt/args.h>
#include <fmt/format.h>

namespace idist {

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
