#include "idx_reader.hpp"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <memory>
#include <system_error>

#include <fmt/format.h>

namespace fashion_mnist {
namespace {

// A gzFile that closes itself.
struct GzCloser {
  void operator()(gzFile_s* f) const noexcept { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

GzFile open_gz(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw DataError(
        fmt::format("{}: no such file (Fashion-MNIST IDX gzip file expected; "
                    "install the Debian package dataset-fashion-mnist or pass --data-dir)",
                    path.string()));
  GzFile f(gzopen(path.c_str(), "rb"));
  if (!f) throw DataError(fmt::format("{}: cannot open: {}", path.string(), std::system_category().message(errno)));
  return f;
}

// Reads exactly `n` bytes; a short read means the file is truncated (or the gzip stream is broken).
void read_exact(gzFile_s* f, const std::filesystem::path& path, void* out, std::size_t n, const char* what) {
  auto* dst = static_cast<unsigned char*>(out);
  std::size_t done = 0;
  while (done < n) {
    // gzread takes an unsigned count; read in chunks well below its limit.
    const unsigned chunk = unsigned(std::min<std::size_t>(n - done, 1u << 30));
    const int got = gzread(f, dst + done, chunk);
    if (got > 0) {
      done += std::size_t(got);
      continue;
    }
    int err = Z_OK;
    const char* msg = gzerror(f, &err);
    // zlib reports a gzip stream cut short as Z_BUF_ERROR ("unexpected end of file").
    if (got == 0 || err == Z_BUF_ERROR)
      throw DataError(fmt::format("{}: truncated: expected {} bytes of {}, got {}", path.string(), n, what, done));
    throw DataError(fmt::format("{}: corrupt gzip data while reading {}: {}", path.string(), what, msg));
  }
}

std::uint32_t read_be32(gzFile_s* f, const std::filesystem::path& path, const char* what) {
  std::array<unsigned char, 4> b{};
  read_exact(f, path, b.data(), b.size(), what);
  return std::uint32_t(b[0]) << 24 | std::uint32_t(b[1]) << 16 | std::uint32_t(b[2]) << 8 | std::uint32_t(b[3]);
}

void check_magic(std::uint32_t got, std::uint32_t expected, const std::filesystem::path& path, const char* kind) {
  if (got != expected)
    throw DataError(fmt::format("{}: bad magic number {:#010x}, expected {:#010x} ({}); not an IDX {} file or corrupt",
                                path.string(), got, expected, kind, kind));
}

}  // namespace

IdxImages read_idx_images(const std::filesystem::path& path, std::uint32_t limit, bool expect_28x28) {
  GzFile f = open_gz(path);
  IdxImages out;
  check_magic(read_be32(f.get(), path, "the header"), kImagesMagic, path, "images");
  out.header_count = read_be32(f.get(), path, "the header");
  out.rows = read_be32(f.get(), path, "the header");
  out.cols = read_be32(f.get(), path, "the header");
  if (out.rows == 0 || out.cols == 0 || (expect_28x28 && (out.rows != 28 || out.cols != 28)))
    throw DataError(fmt::format("{}: images are {} x {}, expected 28 x 28", path.string(), out.rows, out.cols));
  out.count = limit > 0 && limit < out.header_count ? limit : out.header_count;
  out.pixels.resize(std::size_t(out.count) * out.rows * out.cols);
  read_exact(f.get(), path, out.pixels.data(), out.pixels.size(),
             fmt::format("pixels ({} images of {} x {})", out.count, out.rows, out.cols).c_str());
  return out;
}

IdxLabels read_idx_labels(const std::filesystem::path& path, std::uint32_t limit, std::uint8_t num_classes) {
  GzFile f = open_gz(path);
  check_magic(read_be32(f.get(), path, "the header"), kLabelsMagic, path, "labels");
  IdxLabels out;
  out.header_count = read_be32(f.get(), path, "the header");
  out.labels.resize(limit > 0 && limit < out.header_count ? limit : out.header_count);
  read_exact(f.get(), path, out.labels.data(), out.labels.size(), fmt::format("{} labels", out.labels.size()).c_str());
  for (std::size_t i = 0; i < out.labels.size(); ++i)
    if (out.labels[i] >= num_classes)
      throw DataError(fmt::format("{}: label {} at index {} is out of range, expected 0..{}", path.string(),
                                  int(out.labels[i]), i, num_classes - 1));
  return out;
}

Split read_split(const std::filesystem::path& dir, const std::string& prefix, std::uint32_t limit) {
  const auto images_path = dir / (prefix + "-images-idx3-ubyte.gz");
  const auto labels_path = dir / (prefix + "-labels-idx1-ubyte.gz");
  IdxImages images = read_idx_images(images_path, limit);
  IdxLabels labels = read_idx_labels(labels_path, limit);
  if (images.header_count != labels.header_count)
    throw DataError(fmt::format("{} holds {} images but {} holds {} labels", images_path.string(), images.header_count,
                                labels_path.string(), labels.header_count));
  return Split{std::move(images), std::move(labels.labels)};
}

}  // namespace fashion_mnist
