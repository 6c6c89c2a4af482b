// libFuzzer target: FileStore's on-disk format, one file per key holding the raw value (a counter as
// decimal text), written by other processes. The input becomes a key and the bytes of a key's file:
// FileStore must store and read back any valid key, and treat any file content as a value, as a counter
// (add) or as the ValueError of one that is not an integer.
//
// Input: u8 key_length | key bytes | the file's bytes.
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "idist/error.hpp"
#include "store/file_store.hpp"

namespace {

namespace fs = std::filesystem;

const std::string& store_dir() {
  static const std::string dir = [] {
    const auto d = fs::temp_directory_path() / ("idist-fuzz-file-store-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d.string();
  }();
  return dir;
}

// The file another process's FileStore writes for the key "counter" (file_store.cpp's naming).
void write_raw(const std::string& dir, const std::vector<char>& bytes) {
  std::ofstream(dir + "/k_counter", std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::size_t key_length = std::min<std::size_t>(data[0], size - 1);
  const std::string key(reinterpret_cast<const char*>(data + 1), key_length);
  const std::vector<char> bytes(data + 1 + key_length, data + size);
  const auto& dir = store_dir();
  idist::store::FileStore store(dir, std::chrono::milliseconds(1000));

  try {  // any key either round-trips or is refused with ValueError
    store.set(key, bytes);
    if (!store.check({key}) || store.get(key) != bytes) std::abort();
  } catch (const idist::ValueError&) {
  }

  write_raw(dir, bytes);
  if (!store.check({"counter"}) || store.get("counter") != bytes) std::abort();
  try {
    const auto v = store.add("counter", 1);
    const auto text = std::to_string(v);
    if (store.get_string("counter") != text || store.add("counter", 0) != v) std::abort();
  } catch (const idist::ValueError&) {  // not a decimal integer, or at the end of int64
  }
  return 0;
}
