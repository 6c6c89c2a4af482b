// Tests of the example's Fashion-MNIST IDX reader on small generated files: good files read back
// exactly; missing, corrupt, truncated and inconsistent files fail with a message naming the file.
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "idx_reader.hpp"
#include "support/ci.hpp"

namespace fs = std::filesystem;
using fashion_mnist::DataError;

namespace {

void put_be32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int shift : {24, 16, 8, 0}) out.push_back(std::uint8_t(v >> shift));
}

// IDX image bytes: header then `count` images of rows x cols whose pixel (i, p) is (i * 7 + p) % 256.
std::vector<std::uint8_t> images_bytes(std::uint32_t count, std::uint32_t rows = 28, std::uint32_t cols = 28,
                                       std::uint32_t magic = fashion_mnist::kImagesMagic) {
  std::vector<std::uint8_t> out;
  put_be32(out, magic);
  put_be32(out, count);
  put_be32(out, rows);
  put_be32(out, cols);
  for (std::uint32_t i = 0; i < count; ++i)
    for (std::uint32_t p = 0; p < rows * cols; ++p) out.push_back(std::uint8_t((i * 7 + p) % 256));
  return out;
}

std::vector<std::uint8_t> labels_bytes(const std::vector<std::uint8_t>& labels,
                                       std::uint32_t magic = fashion_mnist::kLabelsMagic) {
  std::vector<std::uint8_t> out;
  put_be32(out, magic);
  put_be32(out, std::uint32_t(labels.size()));
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

class IdxReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("idist-idx-test-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `bytes` gzip-compressed to dir_/name and returns the path.
  fs::path write_gz(const std::string& name, const std::vector<std::uint8_t>& bytes) {
    const fs::path path = dir_ / name;
    gzFile f = gzopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    EXPECT_EQ(gzwrite(f, bytes.data(), unsigned(bytes.size())), int(bytes.size()));
    gzclose(f);
    return path;
  }

  // Writes a gzip file then cuts its compressed bytes to `keep`.
  fs::path write_cut_gz(const std::string& name, const std::vector<std::uint8_t>& bytes, std::uintmax_t keep) {
    const fs::path path = write_gz(name, bytes);
    fs::resize_file(path, keep);
    return path;
  }

  fs::path dir_;
};

// Expects `fn` to throw DataError whose message contains `path` and `fragment`.
template <class Fn>
void expect_data_error(Fn fn, const fs::path& path, const std::string& fragment) {
  try {
    fn();
    ADD_FAILURE() << "no DataError for " << path;
  } catch (const DataError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path.string()), std::string::npos) << "message does not name the file: " << msg;
    EXPECT_NE(msg.find(fragment), std::string::npos) << "message lacks '" << fragment << "': " << msg;
  }
}

TEST_F(IdxReaderTest, ReadsImagesExactly) {
  const auto path = write_gz("img.gz", images_bytes(3));
  const auto images = fashion_mnist::read_idx_images(path);
  EXPECT_EQ(images.header_count, 3u);
  EXPECT_EQ(images.count, 3u);
  EXPECT_EQ(images.rows, 28u);
  EXPECT_EQ(images.cols, 28u);
  ASSERT_EQ(images.pixels.size(), 3u * 784u);
  for (std::uint32_t i = 0; i < 3; ++i)
    for (std::uint32_t p = 0; p < 784; p += 97) EXPECT_EQ(images.pixels[i * 784 + p], (i * 7 + p) % 256);
}

TEST_F(IdxReaderTest, LimitReadsTheFirstImagesOnly) {
  const auto path = write_gz("img.gz", images_bytes(5));
  const auto images = fashion_mnist::read_idx_images(path, 2);
  EXPECT_EQ(images.header_count, 5u);
  EXPECT_EQ(images.count, 2u);
  EXPECT_EQ(images.pixels.size(), 2u * 784u);
  EXPECT_EQ(images.pixels[784], 7u);  // first pixel of image 1
  // A limit above the count reads everything.
  EXPECT_EQ(fashion_mnist::read_idx_images(path, 100).count, 5u);
}

TEST_F(IdxReaderTest, ReadsLabels) {
  const auto path = write_gz("lab.gz", labels_bytes({3, 0, 9, 1}));
  const auto labels = fashion_mnist::read_idx_labels(path);
  EXPECT_EQ(labels.header_count, 4u);
  EXPECT_EQ(labels.labels, (std::vector<std::uint8_t>{3, 0, 9, 1}));
  EXPECT_EQ(fashion_mnist::read_idx_labels(path, 2).labels, (std::vector<std::uint8_t>{3, 0}));
}

TEST_F(IdxReaderTest, MissingFileIsNamed) {
  const auto path = dir_ / "absent-images-idx3-ubyte.gz";
  expect_data_error([&] { fashion_mnist::read_idx_images(path); }, path, "no such file");
  expect_data_error([&] { fashion_mnist::read_idx_labels(path); }, path, "no such file");
}

TEST_F(IdxReaderTest, WrongMagicIsRejected) {
  const auto labels_as_images = write_gz("swapped.gz", labels_bytes({1, 2, 3}));
  expect_data_error([&] { fashion_mnist::read_idx_images(labels_as_images); }, labels_as_images, "bad magic number");
  const auto images_as_labels = write_gz("swapped2.gz", images_bytes(1));
  expect_data_error([&] { fashion_mnist::read_idx_labels(images_as_labels); }, images_as_labels, "bad magic number");
  const auto text = write_gz("text.gz", {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '!'});
  expect_data_error([&] { fashion_mnist::read_idx_images(text); }, text, "bad magic number");
}

TEST_F(IdxReaderTest, WrongImageSizeIsRejected) {
  const auto path = write_gz("img.gz", images_bytes(1, 32, 32));
  expect_data_error([&] { fashion_mnist::read_idx_images(path); }, path, "expected 28 x 28");
  EXPECT_EQ(fashion_mnist::read_idx_images(path, 0, /*expect_28x28=*/false).rows, 32u);
}

TEST_F(IdxReaderTest, TruncatedPayloadIsRejected) {
  auto bytes = images_bytes(3);
  bytes.resize(bytes.size() - 100);  // the header still says 3 images
  const auto path = write_gz("img.gz", bytes);
  expect_data_error([&] { fashion_mnist::read_idx_images(path); }, path, "truncated");
  // Reading only what is present works.
  EXPECT_EQ(fashion_mnist::read_idx_images(path, 2).count, 2u);

  auto labels = labels_bytes({1, 2, 3, 4});
  labels.pop_back();
  const auto lpath = write_gz("lab.gz", labels);
  expect_data_error([&] { fashion_mnist::read_idx_labels(lpath); }, lpath, "truncated");

  const auto header_only = write_gz("hdr.gz", {0, 0, 8});
  expect_data_error([&] { fashion_mnist::read_idx_images(header_only); }, header_only, "truncated");
}

TEST_F(IdxReaderTest, CutGzipStreamIsRejected) {
  const auto bytes = images_bytes(50);
  const auto full = write_gz("full.gz", bytes);
  const auto size = fs::file_size(full);
  const auto path = write_cut_gz("cut.gz", bytes, size / 2);
  expect_data_error([&] { fashion_mnist::read_idx_images(path); }, path, "truncated");
}

TEST_F(IdxReaderTest, CorruptGzipDataIsRejected) {
  const auto path = write_gz("bad.gz", images_bytes(50));
  // Flip bytes in the middle of the deflate stream (the gzip header is the first 10 bytes).
  {
    std::FILE* f = std::fopen(path.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, 40, SEEK_SET);
    const unsigned char junk[16] = {0xff, 0x00, 0xff, 0x00, 0xff, 0x00, 0xff, 0x00,
                                    0xff, 0x00, 0xff, 0x00, 0xff, 0x00, 0xff, 0x00};
    std::fwrite(junk, 1, sizeof junk, f);
    std::fclose(f);
  }
  try {
    fashion_mnist::read_idx_images(path);
    ADD_FAILURE() << "corrupt gzip data was accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
  }
}

TEST_F(IdxReaderTest, LabelOutOfRangeIsRejected) {
  const auto path = write_gz("lab.gz", labels_bytes({1, 10, 2}));
  expect_data_error([&] { fashion_mnist::read_idx_labels(path); }, path, "label 10 at index 1 is out of range");
}

TEST_F(IdxReaderTest, SplitChecksThatCountsMatch) {
  write_gz("train-images-idx3-ubyte.gz", images_bytes(3));
  write_gz("train-labels-idx1-ubyte.gz", labels_bytes({1, 2, 3}));
  const auto split = fashion_mnist::read_split(dir_, "train");
  EXPECT_EQ(split.images.count, 3u);
  EXPECT_EQ(split.labels, (std::vector<std::uint8_t>{1, 2, 3}));
  EXPECT_EQ(fashion_mnist::read_split(dir_, "train", 2).labels.size(), 2u);

  write_gz("t10k-images-idx3-ubyte.gz", images_bytes(3));
  const auto labels = write_gz("t10k-labels-idx1-ubyte.gz", labels_bytes({1, 2}));
  // Also with a limit that both files satisfy: the headers disagree.
  expect_data_error([&] { fashion_mnist::read_split(dir_, "t10k", 1); }, labels, "holds 3 images but");
}

TEST(IdxReaderRealData, ReadsInstalledFashionMnistWhenPresent) {
  const fs::path dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir / "t10k-images-idx3-ubyte.gz"))
    IDIST_SKIP_OR_FAIL_IN_CI("dataset-fashion-mnist is not installed");
  const auto split = fashion_mnist::read_split(dir, "t10k");
  EXPECT_EQ(split.images.count, 10000u);
  ASSERT_EQ(split.labels.size(), 10000u);
  std::vector<int> per_class(10, 0);
  for (auto l : split.labels) ++per_class[l];
  for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[c], 1000) << "class " << c;  // the test split is balanced
}

}  // namespace
