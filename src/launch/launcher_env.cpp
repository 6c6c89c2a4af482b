// The launchers' and libraries' variables read one at a time.
#include "launch/launcher_env.hpp"

#include <climits>
#include <cstdlib>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "launch/environment.hpp"

namespace idist::launch {

std::string spawn_master_addr() { return read_nonempty("MASTER_ADDR").value_or("127.0.0.1"); }

int spawn_master_port() {
  const auto port = read_nonempty("MASTER_PORT");
  if (!port) return 2222;
  char* end = nullptr;
  const long value = std::strtol(port->c_str(), &end, 10);
  if (*end != '\0' || value < 1 || value > 65535)
    throw ValueError(fmt::format(
        "spawn: the environment variable MASTER_PORT should be a port in [1, 65535], but given '{}'", *port));
  return int(value);
}

bool omp_num_threads_set() { return read("OMP_NUM_THREADS").has_value(); }

std::optional<std::string> cuda_visible_devices() { return read("CUDA_VISIBLE_DEVICES"); }

std::optional<std::string> socket_ifname(std::string_view variable) { return read_nonempty(variable); }

int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS", "PMI_SIZE"}) {
    const auto s = read_nonempty(name);
    if (!s) continue;
    char* end = nullptr;
    const long v = std::strtol(s->c_str(), &end, 10);
    if (*end == '\0' && v > 0 && v <= INT_MAX) return int(v);
  }
  return 0;
}

std::optional<std::string> error_file() { return read_nonempty("TORCHELASTIC_ERROR_FILE"); }

}  // namespace idist::launch
