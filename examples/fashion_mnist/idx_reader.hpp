#pragma once
// Reader for the IDX files Fashion-MNIST ships in (gzip-compressed, big-endian headers):
//   images: magic 0x00000803, count, rows, cols, then count*rows*cols bytes (0..255)
//   labels: magic 0x00000801, count, then count bytes (0..9)
// Everything is validated; any problem throws DataError naming the file. No torch dependency, so
// that the reader is tested on its own.
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace fashion_mnist {

/// A missing, unreadable, corrupt or inconsistent data file. The message names the file.
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Images of one IDX file: `count` images of rows x cols bytes, row-major, one after another.
struct IdxImages {
  std::uint32_t header_count = 0;  // number of images the file holds (its header)
  std::uint32_t count = 0;         // number read (header_count, or the limit when smaller)
  std::uint32_t rows = 0;
  std::uint32_t cols = 0;
  std::vector<std::uint8_t> pixels;  // count * rows * cols
};

/// Magic number of an IDX file of unsigned bytes with 3 dimensions (images).
inline constexpr std::uint32_t kImagesMagic = 0x00000803;
/// Magic number of an IDX file of unsigned bytes with 1 dimension (labels).
inline constexpr std::uint32_t kLabelsMagic = 0x00000801;

/// Reads an IDX image file (gzip, or uncompressed: zlib reads both).
/// @param limit read only the first `limit` images when > 0.
/// @throws DataError naming `path` when it is missing, not gzip, has the wrong magic number,
///         unexpected dimensions (not 28 x 28 when `expect_28x28`), or is shorter than its header says.
IdxImages read_idx_images(const std::filesystem::path& path, std::uint32_t limit = 0, bool expect_28x28 = true);

/// Labels of one IDX file.
struct IdxLabels {
  std::uint32_t header_count = 0;    // number of labels the file holds (its header)
  std::vector<std::uint8_t> labels;  // the first min(header_count, limit) of them
};

/// Reads an IDX label file. Every label read must be in [0, num_classes).
/// @param limit read only the first `limit` labels when > 0.
/// @throws DataError naming `path` as for read_idx_images, and for a label out of range.
IdxLabels read_idx_labels(const std::filesystem::path& path, std::uint32_t limit = 0, std::uint8_t num_classes = 10);

/// One split (train or test) of Fashion-MNIST: images and their labels, checked to match.
struct Split {
  IdxImages images;
  std::vector<std::uint8_t> labels;
};

/// Reads `<dir>/<prefix>-images-idx3-ubyte.gz` and `<dir>/<prefix>-labels-idx1-ubyte.gz`
/// (prefix "train" or "t10k").
/// @param limit read only the first `limit` examples when > 0.
/// @throws DataError naming the file when either is missing or corrupt, or naming both when their
///         headers give different counts.
Split read_split(const std::filesystem::path& dir, const std::string& prefix, std::uint32_t limit = 0);

}  // namespace fashion_mnist
