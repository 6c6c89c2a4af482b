#include "mpi/single_copy.hpp"

#include <mpi.h>

#include <string>

namespace idist::mpi_backend {

namespace {

// The name of `value` in the control variable's enumeration; empty when it has none.
std::string enum_item_name(MPI_T_enum enumtype, int value) {
  if (enumtype == MPI_T_ENUM_NULL) return {};
  int items = 0;
  char enum_name[256];
  int enum_len = sizeof enum_name;
  if (MPI_T_enum_get_info(enumtype, &items, enum_name, &enum_len) != MPI_SUCCESS) return {};
  for (int k = 0; k < items; ++k) {
    int v = 0;
    char name[256];
    int len = sizeof name;
    if (MPI_T_enum_get_item(enumtype, k, &v, name, &len) == MPI_SUCCESS && v == value) return name;
  }
  return {};
}

bool read_single_copy() {
  int index = -1;
  if (MPI_T_cvar_get_index("btl_vader_single_copy_mechanism", &index) != MPI_SUCCESS) return false;
  char name[256], desc[256];
  int name_len = sizeof name, desc_len = sizeof desc, verbosity = 0, bind = 0, scope = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_T_enum enumtype = MPI_T_ENUM_NULL;
  if (MPI_T_cvar_get_info(index, name, &name_len, &verbosity, &type, &enumtype, desc, &desc_len, &bind, &scope) !=
          MPI_SUCCESS ||
      type != MPI_INT || bind != MPI_T_BIND_NO_OBJECT)
    return false;
  MPI_T_cvar_handle handle;
  int count = 0;
  if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) != MPI_SUCCESS) return false;
  int value = 0;
  const bool read = count == 1 && MPI_T_cvar_read(handle, &value) == MPI_SUCCESS;
  MPI_T_cvar_handle_free(&handle);
  if (!read) return false;
  const std::string mechanism = enum_item_name(enumtype, value);
  return !mechanism.empty() && mechanism != "none";
}

}  // namespace

bool shared_memory_single_copy() {
  // Open MPI's MPI_T_init_thread overwrites the thread level MPI_Query_thread reports (and that MPI
  // itself goes by) with the one it is given: ask for the level MPI runs at.
  int level = MPI_THREAD_SINGLE;
  if (MPI_Query_thread(&level) != MPI_SUCCESS) return false;
  int provided = 0;
  if (MPI_T_init_thread(level, &provided) != MPI_SUCCESS) return false;
  const bool single_copy = read_single_copy();
  MPI_T_finalize();
  return single_copy;
}

}  // namespace idist::mpi_backend
