/* cg_dump(name): callgrind writes the costs since the previous dump, labelled `name` (a no-op outside
   valgrind). Loaded by the instrumented DDP peer through ctypes. */
#include <valgrind/callgrind.h>

void cg_dump(const char* name) { CALLGRIND_DUMP_STATS_AT(name); }
