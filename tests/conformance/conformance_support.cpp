// Shared temporary directories, markers, hostnames and device staging for the conformance suite.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <system_error>

#include "conformance/conformance.hpp"

namespace idist::conformance {

void Conformance::TearDown() {
  const int failed = HasFailure() ? 1 : 0;
  std::vector<int> all;
  try {
    all = idist::all_gather(failed);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "rank " << rank() << ": gathering the test's outcome failed: " << e.what();
    return;
  }
  if (failed) return;
  for (std::size_t r = 0; r < all.size(); ++r)
    if (all[r]) ADD_FAILURE() << "this test failed on rank " << r << " (see its \"[rank " << r << "]\" messages)";
}

SharedTempDir::SharedTempDir() {
  std::string made;
  if (rank() == 0) {
    std::string templ = (std::filesystem::temp_directory_path() / "idist-conformance-XXXXXX").string();
    if (!mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed for " + templ);
    made = templ;
  }
  path_ = idist::broadcast(made, 0);
  std::error_code ec;
  std::filesystem::create_directories(path_, ec);  // ranks on other hosts
  idist::barrier();
}

SharedTempDir::~SharedTempDir() {
  try {
    idist::barrier();  // every rank is done with the files
  } catch (...) {
  }
  if (idist::get_local_rank() == 0) {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
}

void write_marker(const std::filesystem::path& file, const std::string& content) {
  const std::filesystem::path tmp = file.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    out << content;
  }
  std::filesystem::rename(tmp, file);
}

std::vector<std::string> hostnames() { return idist::all_gather(idist::hostname()); }

// The CUDA runtime, loaded on first use (only the nccl backend's spans live in device memory).
namespace {

struct CudaRuntime {
  int (*set_device)(int) = nullptr;
  int (*malloc)(void**, std::size_t) = nullptr;
  int (*free)(void*) = nullptr;
  int (*memcpy)(void*, const void*, std::size_t, int) = nullptr;
  int (*synchronize)() = nullptr;

  CudaRuntime() {
    void* lib = nullptr;
    for (const char* name : {"libcudart.so", "libcudart.so.13", "libcudart.so.12"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_GLOBAL))) break;
    if (!lib) throw std::runtime_error("conformance: the backend's spans live on a GPU but libcudart cannot be loaded");
    set_device = reinterpret_cast<decltype(set_device)>(dlsym(lib, "cudaSetDevice"));
    malloc = reinterpret_cast<decltype(malloc)>(dlsym(lib, "cudaMalloc"));
    free = reinterpret_cast<decltype(free)>(dlsym(lib, "cudaFree"));
    memcpy = reinterpret_cast<decltype(memcpy)>(dlsym(lib, "cudaMemcpy"));
    synchronize = reinterpret_cast<decltype(synchronize)>(dlsym(lib, "cudaDeviceSynchronize"));
    if (!set_device || !malloc || !free || !memcpy || !synchronize)
      throw std::runtime_error("conformance: libcudart lacks cudaSetDevice / cudaMalloc / cudaFree / cudaMemcpy");
  }
};

const CudaRuntime& cuda() {
  static const CudaRuntime rt;
  return rt;
}

void check(int rc, const char* what) {
  if (rc != 0)
    throw std::runtime_error(std::string("conformance: ") + what + " failed with CUDA error " + std::to_string(rc));
}

constexpr int kHostToDevice = 1, kDeviceToHost = 2;

}  // namespace

namespace detail {

void* device_alloc(idist::Device device, std::size_t bytes) {
  check(cuda().set_device(device.index), "cudaSetDevice");
  void* p = nullptr;
  check(cuda().malloc(&p, bytes), "cudaMalloc");
  return p;
}

void device_free(idist::Device device, void* p) {
  cuda().set_device(device.index);
  cuda().free(p);
}

void copy_to_device(idist::Device device, void* dst, const void* src, std::size_t bytes) {
  check(cuda().set_device(device.index), "cudaSetDevice");
  if (bytes) check(cuda().memcpy(dst, src, bytes, kHostToDevice), "cudaMemcpy to the device");
}

void copy_to_host(idist::Device device, void* dst, const void* src, std::size_t bytes) {
  check(cuda().set_device(device.index), "cudaSetDevice");
  check(cuda().synchronize(), "cudaDeviceSynchronize");  // collectives may run on their own stream
  if (bytes) check(cuda().memcpy(dst, src, bytes, kDeviceToHost), "cudaMemcpy to the host");
}

}  // namespace detail

}  // namespace idist::conformance
