#include "store/c10d/connection.hpp"

#include <asio.hpp>

namespace idist::store::c10d {

using asio::ip::tcp;

struct Connection::Impl {
  asio::io_context io;
  tcp::socket socket{io};
  bool open = false;
  std::string error;

  // Runs the pending asynchronous operation until `done` or `deadline`; past the deadline, `cancel`
  // aborts it and its handler is drained so that nothing refers to the caller's frame afterwards.
  template <class Cancel>
  bool run_until(const bool& done, Clock::time_point deadline, Cancel cancel) {
    io.restart();
    while (!done && io.run_one_until(deadline) > 0) {
    }
    if (done) return true;
    cancel();
    io.restart();
    io.run();
    return false;
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
Connection::~Connection() { close(); }

void Connection::close() { impl_->drop(); }
bool Connection::is_open() const { return impl_->open; }
const std::string& Connection::error() const { return impl_->error; }

IoStatus Connection::connect(const std::string& host, int port, Clock::time_point deadline) {
  auto& d = *impl_;
  d.drop();
  d.error.clear();
  bool done = false;
  std::error_code ec;
  tcp::resolver resolver(d.io);
  tcp::resolver::results_type endpoints;
  resolver.async_resolve(host, std::to_string(port), [&](std::error_code e, tcp::resolver::results_type r) {
    ec = e;
    endpoints = std::move(r);
    done = true;
  });
  if (!d.run_until(done, deadline, [&] { resolver.cancel(); }))
    return d.timed_out("resolving the host name did not finish");
  if (ec) return d.fail(ec);
  done = false;
  asio::async_connect(d.socket, endpoints, [&](std::error_code e, const tcp::endpoint&) {
    ec = e;
    done = true;
  });
  if (!d.run_until(done, deadline, [&] { d.drop(); })) return d.timed_out("the connection attempt did not finish");
  if (ec) return d.fail(ec);
  std::error_code ignored;
  d.socket.set_option(tcp::no_delay(true), ignored);
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
