#include "store/c10d/connection.hpp"

#include <asio.hpp>

#include "store/asio_deadline.hpp"

namespace idist::store::c10d {

using asio::ip::tcp;

struct Connection::Impl {
  asio::io_context io;
  tcp::socket socket{io};
  bool open = false;
  std::string error;

  template <class Cancel>
  bool run_until(const bool& done, Clock::time_point deadline, Cancel cancel) {
    return asio_deadline::run_until(io, done, deadline, cancel);
  }

  void drop() {
    std::error_code ignored;
    socket.close(ignored);
    open = false;
  }

  IoStatus fail(std::error_code ec) {
    drop();
    error = ec.message();
    if (ec == asio::error::eof || ec == asio::error::connection_reset || ec == asio::error::connection_refused ||
        ec == asio::error::broken_pipe || ec == asio::error::connection_aborted)
      return IoStatus::Closed;
    return IoStatus::Failed;
  }

  IoStatus timed_out(const char* what) {
    drop();
    error = what;
    return IoStatus::TimedOut;
  }
};

Connection::Connection() : impl_(std::make_unique<Impl>()) {}
Connection::~Connection() { impl_->drop(); }

void Connection::close() { impl_->drop(); }
bool Connection::is_open() const { return impl_->open; }
const std::string& Connection::error() const { return impl_->error; }

IoStatus Connection::connect(const std::string& host, int port, Clock::time_point deadline) {
  auto& d = *impl_;
  d.drop();
  d.error.clear();
  const auto r = asio_deadline::connect_once(d.io, d.socket, host, port, deadline);
  if (r.timed_out) return d.timed_out(r.unfinished);
  if (r.error) return d.fail(r.error);
  d.open = true;
  return IoStatus::Ok;
}

IoStatus Connection::write(const std::vector<char>& bytes, Clock::time_point deadline) {
  auto& d = *impl_;
  if (!d.open) return d.fail(asio::error::not_connected);
  bool done = false;
  std::error_code ec;
  asio::async_write(d.socket, asio::buffer(bytes), [&](std::error_code e, std::size_t) {
    ec = e;
    done = true;
  });
  if (!d.run_until(done, deadline, [&] { d.drop(); })) return d.timed_out("the request was not sent in time");
  if (ec) return d.fail(ec);
  return IoStatus::Ok;
}

IoStatus Connection::read(void* out, std::size_t n, Clock::time_point deadline) {
  auto& d = *impl_;
  if (!d.open) return d.fail(asio::error::not_connected);
  bool done = false;
  std::error_code ec;
  asio::async_read(d.socket, asio::buffer(out, n), [&](std::error_code e, std::size_t) {
    ec = e;
    done = true;
  });
  if (!d.run_until(done, deadline, [&] { d.drop(); })) return d.timed_out("no reply in time");
  if (ec) return d.fail(ec);
  return IoStatus::Ok;
}

}  // namespace idist::store::c10d
