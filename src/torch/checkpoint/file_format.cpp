#include "torch/checkpoint/file_format.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace idist::checkpoint {
namespace {

constexpr char kMagic[8] = {'I', 'D', 'I', 'S', 'T', 'C', 'K', 'P'};
constexpr std::uint32_t kVersion = 1;

std::string os_error(int err) { return std::error_code(err, std::generic_category()).message(); }

std::uint32_t crc32_of(std::uint32_t crc, const void* data, std::size_t size) {
  const auto* p = static_cast<const Bytef*>(data);
  while (size > 0) {  // zlib's crc32 takes 32-bit lengths
    const auto n = static_cast<uInt>(std::min<std::size_t>(size, 1u << 30));
    crc = static_cast<std::uint32_t>(::crc32(crc, p, n));
    p += n;
    size -= n;
  }
  return crc;
}

void put_le(unsigned char* out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<unsigned char>(v >> (8 * i));
}

std::uint64_t get_le(const unsigned char* in, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= std::uint64_t(in[i]) << (8 * i);
  return v;
}

std::array<unsigned char, kHeaderSize> make_header(std::uint32_t payload_crc, std::uint64_t length) {
  std::array<unsigned char, kHeaderSize> h{};
  std::memcpy(h.data(), kMagic, sizeof kMagic);
  put_le(h.data() + 8, kVersion, 4);
  put_le(h.data() + 12, payload_crc, 4);
  put_le(h.data() + 16, length, 8);
  put_le(h.data() + 24, crc32_of(0, h.data(), 24), 4);
  return h;
}

// A file descriptor closed on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void write_all(int fd, const void* data, std::size_t size, const std::filesystem::path& path) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, std::min<std::size_t>(size, std::size_t(1) << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(fmt::format("cannot write {}: {}", path.string(), os_error(errno)));
    p += n;
    size -= std::size_t(n);
  }
}

// Buffers the archive writer's many small pieces (zip headers, padding) into large writes, and
// checksums the payload on the way.
class PayloadWriter {
 public:
  PayloadWriter(int fd, const std::filesystem::path& path) : fd_(fd), path_(path) { buffer_.reserve(kBuffer); }
  void add(const void* data, std::size_t size) {
    crc_ = crc32_of(crc_, data, size);
    length_ += size;
    if (buffer_.size() + size > kBuffer) flush();
    if (size >= kBuffer) return write_all(fd_, data, size, path_);
    const auto* p = static_cast<const char*>(data);
    buffer_.insert(buffer_.end(), p, p + size);
  }
  void flush() {
    write_all(fd_, buffer_.data(), buffer_.size(), path_);
    buffer_.clear();
  }
  std::uint32_t crc() const { return crc_; }
  std::uint64_t length() const { return length_; }

 private:
  static constexpr std::size_t kBuffer = std::size_t(1) << 20;
  int fd_;
  const std::filesystem::path& path_;
  std::vector<char> buffer_;
  std::uint32_t crc_ = 0;
  std::uint64_t length_ = 0;
};

void fsync_or_throw(int fd, const std::filesystem::path& path) {
  while (::fsync(fd) != 0) {
    if (errno != EINTR) throw std::runtime_error(fmt::format("cannot fsync {}: {}", path.string(), os_error(errno)));
  }
}

std::string temporary_name(const std::string& filename) {
  static std::atomic<unsigned> counter{0};
  return fmt::format(".{}.{}.{}.tmp", filename, ::getpid(), counter++);
}

}  // namespace

void write_atomically(const std::filesystem::path& dir, const std::string& filename,
                      const std::function<void(const Sink&)>& produce) {
  const std::filesystem::path target = dir / filename;
  const std::filesystem::path temp = dir / temporary_name(filename);
  Fd file{::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)};
  if (file.fd < 0) throw std::runtime_error(fmt::format("cannot create {}: {}", temp.string(), os_error(errno)));
  try {
    std::array<unsigned char, kHeaderSize> header{};  // zeros until the checksum is known
    write_all(file.fd, header.data(), header.size(), temp);
    PayloadWriter payload(file.fd, temp);
    produce([&payload](const void* data, std::size_t size) { payload.add(data, size); });
    payload.flush();
    header = make_header(payload.crc(), payload.length());
    if (::pwrite(file.fd, header.data(), header.size(), 0) != ssize_t(header.size()))
      throw std::runtime_error(fmt::format("cannot write {}: {}", temp.string(), os_error(errno)));
    fsync_or_throw(file.fd, temp);
    if (::close(std::exchange(file.fd, -1)) != 0)
      throw std::runtime_error(fmt::format("cannot close {}: {}", temp.string(), os_error(errno)));
    if (::rename(temp.c_str(), target.c_str()) != 0)
      throw std::runtime_error(
          fmt::format("cannot rename {} to {}: {}", temp.string(), target.string(), os_error(errno)));
  } catch (...) {
    ::unlink(temp.c_str());
    throw;
  }
  // The rename is durable once the directory is.
  Fd d{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (d.fd < 0) throw std::runtime_error(fmt::format("cannot open {}: {}", dir.string(), os_error(errno)));
  fsync_or_throw(d.fd, dir);
}

std::string read_verified(const std::filesystem::path& path) {
  Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) throw std::runtime_error(fmt::format("cannot open it: {}", os_error(errno)));
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) throw std::runtime_error(fmt::format("cannot stat it: {}", os_error(errno)));
  const auto size = std::uint64_t(st.st_size);
  const auto read_exact = [&](void* out, std::size_t n, std::uint64_t offset) {
    auto* p = static_cast<char*>(out);
    for (std::size_t done = 0; done < n;) {
      const ssize_t r =
          ::pread(file.fd, p + done, std::min<std::size_t>(n - done, std::size_t(1) << 30), off_t(offset + done));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) throw std::runtime_error(fmt::format("cannot read it: {}", os_error(errno)));
      if (r == 0) throw std::runtime_error(fmt::format("it ended after {} bytes while being read", offset + done));
      done += std::size_t(r);
    }
  };
  if (size < kHeaderSize)
    throw std::runtime_error(fmt::format("truncated: {} bytes, shorter than the {}-byte header", size, kHeaderSize));
  std::array<unsigned char, kHeaderSize> h{};
  read_exact(h.data(), h.size(), 0);
  if (std::memcmp(h.data(), kMagic, sizeof kMagic) != 0) throw std::runtime_error("not an idist checkpoint (magic)");
  if (get_le(h.data() + 24, 4) != crc32_of(0, h.data(), 24)) throw std::runtime_error("corrupt header (checksum)");
  if (const auto v = get_le(h.data() + 8, 4); v != kVersion)
    throw std::runtime_error(fmt::format("format version {}, expected {}", v, kVersion));
  const std::uint64_t length = get_le(h.data() + 16, 8);
  if (size - kHeaderSize < length)
    throw std::runtime_error(fmt::format("truncated: the header announces {} bytes of payload, the file has {}", length,
                                         size - kHeaderSize));
  if (size - kHeaderSize > length)
    throw std::runtime_error(
        fmt::format("{} bytes follow the {}-byte payload the header announces", size - kHeaderSize - length, length));
  std::string payload(length, '\0');
  read_exact(payload.data(), payload.size(), kHeaderSize);
  if (crc32_of(0, payload.data(), payload.size()) != get_le(h.data() + 12, 4))
    throw std::runtime_error("corrupt payload (checksum mismatch)");
  return payload;
}

}  // namespace idist::checkpoint
