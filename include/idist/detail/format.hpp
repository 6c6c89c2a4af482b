#pragma once
/// @file
/// Message formatting for idist's own headers (the templates and the LibTorch layer). libidist
/// builds its messages with {fmt}, a private dependency; headers cannot include it, so they call
/// detail::format_message(), which takes fmt's replacement-field syntax ("{}", "{:.2f}") and runs
/// fmt inside libidist. Not part of the API.

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace idist::detail {

/// A signed integer type other than char.
template <class T>
concept MessageSigned = std::signed_integral<T> && !std::same_as<T, char>;
/// An unsigned integer type other than bool and char.
template <class T>
concept MessageUnsigned = std::unsigned_integral<T> && !std::same_as<T, bool> && !std::same_as<T, char>;
/// double or long double.
template <class T>
concept MessageDouble = std::floating_point<T> && !std::same_as<T, float>;
/// A type that std::string_view can view: std::string, string literals, const char*.
template <class T>
concept MessageString = std::convertible_to<const T&, std::string_view>;

/// One argument of format_message(): a bool, an integer, a floating-point number or a string (kept
/// by reference: it must outlive the call, which a temporary passed to format_message() does).
class MessageArg {
 public:
  /// What the argument holds.
  enum class Kind { Bool, Signed, Unsigned, Float, Double, String };

  // Every constructor is a template, so that nothing converts on the way (a pointer or an enum to
  // bool, say): an argument of another type does not compile.

  /// A bool, formatted as "true" / "false".
  template <std::same_as<bool> T>
  MessageArg(T v) noexcept : kind_(Kind::Bool), b_(v) {}  // NOLINT(google-explicit-constructor)
  /// A signed integer (not a character type).
  template <MessageSigned T>
  MessageArg(T v) noexcept : kind_(Kind::Signed), i_(v) {}  // NOLINT(google-explicit-constructor)
  /// An unsigned integer (not bool, not a character type).
  template <MessageUnsigned T>
  MessageArg(T v) noexcept : kind_(Kind::Unsigned), u_(v) {}  // NOLINT(google-explicit-constructor)
  /// A float, formatted as a float (the shortest text that reads back as the same float).
  template <std::same_as<float> T>
  MessageArg(T v) noexcept : kind_(Kind::Float), f_(v) {}  // NOLINT(google-explicit-constructor)
  /// A double or long double (formatted as a double).
  template <MessageDouble T>
  MessageArg(T v) noexcept : kind_(Kind::Double), d_(double(v)) {}  // NOLINT(google-explicit-constructor)
  /// Anything a std::string_view can view: std::string, string literals, const char*.
  template <MessageString T>
  MessageArg(const T& v) noexcept : kind_(Kind::String), s_(v) {}  // NOLINT(google-explicit-constructor)

  /// What the argument holds; the matching accessor below is the one to read.
  Kind kind() const noexcept { return kind_; }
  /// The value of a Kind::Bool argument.
  bool bool_value() const noexcept { return b_; }
  /// The value of a Kind::Signed argument.
  std::int64_t signed_value() const noexcept { return i_; }
  /// The value of a Kind::Unsigned argument.
  std::uint64_t unsigned_value() const noexcept { return u_; }
  /// The value of a Kind::Float argument.
  float float_value() const noexcept { return f_; }
  /// The value of a Kind::Double argument.
  double double_value() const noexcept { return d_; }
  /// The value of a Kind::String argument.
  std::string_view string_value() const noexcept { return s_; }

 private:
  Kind kind_;
  union {
    bool b_;
    std::int64_t i_;
    std::uint64_t u_;
    float f_;
    double d_;
    std::string_view s_;
  };
};

/// The number of replacement fields ("{}", "{:...}") in `format`; "{{" and "}}" are literal braces.
constexpr std::size_t count_replacement_fields(std::string_view format) noexcept {
  std::size_t n = 0;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '{') continue;
    if (i + 1 < format.size() && format[i + 1] == '{') {
      ++i;
      continue;
    }
    ++n;
    while (i < format.size() && format[i] != '}') ++i;
  }
  return n;
}

/// Not constexpr: calling it from the consteval MessageFormat constructor stops the compilation.
void format_fields_do_not_match_arguments();

/// A format string for format_message() with Args, checked at compile time to hold one replacement
/// field per argument (fmt itself checks the rest when the message is built).
template <class... Args>
struct MessageFormat {
  /// Checks `s`, a string literal (or another constant expression convertible to std::string_view).
  template <MessageString S>
  consteval MessageFormat(const S& s) : text(s) {  // NOLINT(google-explicit-constructor)
    if (count_replacement_fields(text) != sizeof...(Args)) format_fields_do_not_match_arguments();
  }
  /// The format string.
  std::string_view text;
};

/// fmt::vformat(format, args) run in libidist. A format error (a specifier that does not fit its
/// argument) does not throw: the message is then `format` followed by fmt's complaint in brackets,
/// so that the error being reported is not replaced by another.
std::string vformat_message(std::string_view format, std::span<const MessageArg> args);

/// fmt::format(format, args...) for idist's headers, e.g.
///
///     throw ValueError(detail::format_message("{}: out has {} elements", fn, out.size()));
///
/// Arguments are bools, integers, floating-point numbers and strings (see MessageArg).
template <class... Args>
std::string format_message(MessageFormat<std::type_identity_t<Args>...> format, const Args&... args) {
  const std::array<MessageArg, sizeof...(Args)> list{MessageArg(args)...};
  return vformat_message(format.text, list);
}

}  // namespace idist::detail
