#include "store/file_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "idist/error.hpp"

namespace idist::store {

namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// File names inside the store directory. Only files with these prefixes are ever created or removed, so
// pointing the store at a directory that holds other files is harmless.
constexpr const char* kKeyPrefix = "k_";
constexpr const char* kTmpPrefix = ".idist_tmp.";
constexpr const char* kLockName = ".idist_lock";
constexpr const char* kUsersKey = "idist/file_store/users";
constexpr std::size_t kMaxFileName = 240;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string errno_text() { return std::strerror(errno); }

// Percent-encodes everything but [A-Za-z0-9_.-] so that any key is a single safe file name.
std::string encode_key(const std::string& key) {
  std::string out = kKeyPrefix;
  for (unsigned char c : key) {
    if (std::isalnum(c) || c == '_' || c == '-' || c == '.')
      out += static_cast<char>(c);
    else
      out += fmt::format("%{:02X}", c);
  }
  return out;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// An exclusive flock on the store's lock file, taken with a deadline.
class FileLock {
 public:
  FileLock(const std::string& path, Clock::time_point deadline, const std::string& where) {
    fd_ = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw BackendError(fmt::format("FileStore {}: cannot open lock file {}: {}", where, path, errno_text()));
    const auto start = Clock::now();
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) {
        const auto err = errno_text();
        ::close(fd_);
        throw BackendError(fmt::format("FileStore {}: cannot lock {}: {}", where, path, err));
      }
      if (Clock::now() >= deadline) {
        ::close(fd_);
        throw TimeoutError(
            fmt::format("FileStore {}: could not take the lock {} within {:.2f} s", where, path, seconds_since(start)));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  ~FileLock() {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

std::vector<char> read_file(const std::string& path, const std::string& where) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw BackendError(fmt::format("FileStore {}: cannot read {}: {}", where, path, errno_text()));
  std::vector<char> out;
  char buf[65536];
  for (;;) {
    const auto n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const auto err = errno_text();
      ::close(fd);
      throw BackendError(fmt::format("FileStore {}: cannot read {}: {}", where, path, err));
    }
    if (n == 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  ::close(fd);
  return out;
}

// Writes a temporary file and renames it into place, so readers see either nothing or the whole value.
void write_file_atomic(const std::string& dir, const std::string& path, const std::vector<char>& data,
                       const std::string& where) {
  static std::atomic<unsigned long> counter{0};
  const auto tmp = fmt::format("{}/{}{}.{}.{}", dir, kTmpPrefix, ::getpid(),
                               std::hash<std::thread::id>{}(std::this_thread::get_id()), counter++);
  const int fd = ::open(tmp.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) throw BackendError(fmt::format("FileStore {}: cannot create {}: {}", where, tmp, errno_text()));
  std::size_t done = 0;
  while (done < data.size()) {
    const auto n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const auto err = errno_text();
      ::close(fd);
      ::unlink(tmp.c_str());
      throw BackendError(fmt::format("FileStore {}: cannot write {}: {}", where, tmp, err));
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const auto err = errno_text();
    ::unlink(tmp.c_str());
    throw BackendError(fmt::format("FileStore {}: cannot rename {} to {}: {}", where, tmp, path, err));
  }
}
}  // namespace

FileStore::FileStore(std::string path, std::chrono::milliseconds timeout) : path_(std::move(path)), timeout_(timeout) {
  if (path_.empty()) throw ValueError("FileStore: path should be a directory path, got ''");
  if (timeout.count() <= 0)
    throw ValueError(fmt::format("FileStore: timeout should be positive, got {} ms", timeout.count()));
  std::error_code ec;
  fs::create_directories(path_, ec);
  if (ec || !fs::is_directory(path_))
    throw BackendError(fmt::format("FileStore {}: cannot use {} as the store's directory: {}", describe(), path_,
                                   ec ? ec.message() : "not a directory"));
  add(kUsersKey, 1);
}

FileStore::~FileStore() {
  try {
    // The last user out removes the store's files under the lock, so a new run starting meanwhile waits
    // for the clean-up and then starts from an empty store.
    FileLock lock(path_ + "/" + kLockName, Clock::now() + timeout_, describe());
    const auto users = add_locked(kUsersKey, -1);
    if (users <= 0) {
      std::error_code ec;
      for (const auto& entry : fs::directory_iterator(path_, ec)) {
        const auto name = entry.path().filename().string();
        if (name.rfind(kKeyPrefix, 0) == 0 || name.rfind(kTmpPrefix, 0) == 0) fs::remove(entry.path(), ec);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idist FileStore %s: clean-up failed: %s\n", describe().c_str(), e.what());
  }
}

std::string FileStore::describe() const { return fmt::format("file://{}", path_); }

std::string FileStore::key_path(const std::string& key) const {
  auto name = encode_key(key);
  if (name.size() > kMaxFileName)
    throw ValueError(fmt::format("FileStore {}: key '{}' encodes to a {} byte file name, more than the limit of {}",
                                 describe(), key.substr(0, 64), name.size(), kMaxFileName));
  return path_ + "/" + name;
}

void FileStore::do_set(const std::string& key, const std::vector<char>& data) {
  write_file_atomic(path_, key_path(key), data, describe());
}

std::vector<char> FileStore::do_get(const std::string& key) {
  const auto path = key_path(key);
  do_wait({key}, timeout_);
  return read_file(path, describe());
}

bool FileStore::do_check(const std::vector<std::string>& keys) {
  for (const auto& k : keys)
    if (!exists(key_path(k))) return false;
  return true;
}

void FileStore::do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::vector<std::string> paths;
  for (const auto& k : keys) paths.push_back(key_path(k));
  const auto start = Clock::now();
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    std::vector<std::string> missing;
    for (std::size_t i = 0; i < keys.size(); ++i)
      if (!exists(paths[i])) missing.push_back(keys[i]);
    if (missing.empty()) return;
    if (Clock::now() - start >= timeout)
      throw TimeoutError(fmt::format("FileStore {}: wait for {} timed out after {:.2f} s; missing {}", describe(),
                                     quote_keys(keys), seconds_since(start), quote_keys(missing)));
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(10));
  }
}

std::int64_t FileStore::do_add(const std::string& key, std::int64_t delta) {
  key_path(key);  // a file name too long is refused before taking the lock
  FileLock lock(path_ + "/" + kLockName, Clock::now() + timeout_, describe());
  return add_locked(key, delta);
}

std::int64_t FileStore::add_locked(const std::string& key, std::int64_t delta) {
  const auto path = key_path(key);
  std::int64_t current = 0;
  if (exists(path)) current = parse_counter(key, read_file(path, describe()), describe());
  std::int64_t result = 0;
  if (__builtin_add_overflow(current, delta, &result))
    throw ValueError(
        fmt::format("FileStore {}: add: counter '{}' = {} + {} overflows int64", describe(), key, current, delta));
  const auto text = std::to_string(result);
  write_file_atomic(path_, path, std::vector<char>(text.begin(), text.end()), describe());
  return result;
}

}  // namespace idist::store
