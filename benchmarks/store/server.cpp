// idist's TCPStore server alone in its process, so that its peak memory (VmHWM) is the server's own:
// serves 127.0.0.1 on a free port, writes the port to --port-file, and exits when its standard input
// closes or it receives SIGTERM / SIGINT.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

#include "store/tcp_store_server.hpp"

int main(int argc, char** argv) {
  CLI::App app{"idist TCPStore server for benchmarks/run_store.sh"};
  std::string port_file;
  app.add_option("--port-file", port_file, "where to write the bound port")->required();
  CLI11_PARSE(app, argc, argv);

  // Blocked in every thread (the server's included), then awaited by sigwait below.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  idist::store::detail::ServerConfig config;
  config.bind_addresses = {"127.0.0.1"};
  idist::store::detail::TCPStoreServer server(0, -1, config);
  {
    const std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << server.port() << "\n";
    std::rename(tmp.c_str(), port_file.c_str());  // the script sees the whole number or nothing
  }
  // Standard input closing (the script exited) also stops the server.
  std::thread stdin_watch([] {
    char c;
    while (::read(0, &c, 1) > 0) {
    }
    ::kill(::getpid(), SIGTERM);
  });
  stdin_watch.detach();
  int sig = 0;
  sigwait(&stop, &sig);
  return 0;
}
