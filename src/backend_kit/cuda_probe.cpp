// The CUDA runtime is loaded with dlopen so that CPU-only programs never need libcudart and a
// missing driver is a count of zero, not a load failure.
#include "backend_kit/cuda_probe.hpp"

#include <dlfcn.h>

namespace idist::backend_kit {

int cuda_device_count() noexcept {
  static const int count = [] {
    void* lib = dlopen("libcudart.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libcudart.so.12", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return 0;
    using GetCount = int (*)(int*);
    auto get = reinterpret_cast<GetCount>(dlsym(lib, "cudaGetDeviceCount"));
    int n = 0;
    if (!get || get(&n) != 0) n = 0;
    return n;
  }();
  return count;
}

}  // namespace idist::backend_kit
