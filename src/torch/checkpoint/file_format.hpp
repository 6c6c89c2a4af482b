#pragma once
// The checkpoint file: a 32-byte header, then the payload (a LibTorch archive).
//
//   offset  size  field
//        0     8  magic "IDISTCKP"
//        8     4  format version (1), little-endian
//       12     4  CRC-32 (zlib) of the payload
//       16     8  payload length in bytes
//       24     4  CRC-32 of bytes 0..23
//       28     4  zero
//
// The payload length and checksum detect a truncated or torn file and flipped bits, before
// LibTorch parses anything.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

namespace idist::checkpoint {

/// Size of the header.
inline constexpr std::size_t kHeaderSize = 32;

/// Receives the payload in pieces, in order.
using Sink = std::function<void(const void* data, std::size_t size)>;

/// Writes `dir/filename` atomically: `produce` streams the payload into a temporary file of `dir`,
/// `.{filename}.{pid}.{counter}.tmp` (its checksum computed on the way), the header is written in front, the file is
/// fsynced, renamed over `filename` and `dir` is fsynced. On failure the temporary file is removed and the previous
/// `filename`, if any, is untouched.
/// @throws std::runtime_error naming the file and the system's reason.
void write_atomically(const std::filesystem::path& dir, const std::string& filename,
                      const std::function<void(const Sink&)>& produce);

/// Reads `path` and checks its header, length and checksum; returns the payload.
/// @throws std::runtime_error saying what is wrong (unreadable, not a checkpoint, truncated, corrupt).
std::string read_verified(const std::filesystem::path& path);

}  // namespace idist::checkpoint
