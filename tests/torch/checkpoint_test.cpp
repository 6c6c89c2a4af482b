// idist::Checkpoint at any world size (serial, mpirun, gloo): round trips of modules (parameters and
// buffers), optimizers (SGD momentum, Adam moments and steps), loaders (mid-epoch), user values and
// generator states; retention; torn and corrupt files; bad input raised on every rank; ranks other
// than the saving one given a directory that does not exist.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "idist/idist.hpp"
#include "index_loader.hpp"
#include "support/error_message.hpp"
#include "test_device.hpp"
#include "torch/checkpoint/optimizer_state.hpp"

namespace {

namespace fs = std::filesystem;
using idist::Checkpoint;
using idist::CheckpointOptions;
using idist::test::on_test_device;
using idist::test::test_device;

int rank() { return idist::get_rank(); }
int ws() { return idist::get_world_size(); }

// A directory rank 0 creates (and removes); every other rank gets a path that does not exist, as
// on a node that does not share rank 0's file system.
struct SharedDir {
  fs::path path;
  SharedDir() {
    if (rank() == 0) {
      char tmpl[] = "/tmp/idist-ckpt-test-XXXXXX";
      path = ::mkdtemp(tmpl);
    } else {
      path = "/nonexistent/idist-ckpt-test";
    }
  }
  ~SharedDir() {
    std::error_code ec;
    if (rank() == 0) fs::remove_all(path, ec);
  }
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

// A module with parameters, buffers (batch norm) and a submodule, on test_device().
struct Net : torch::nn::Module {
  Net()
      : fc(register_module("fc", torch::nn::Linear(4, 3))),
        bn(register_module("bn", torch::nn::BatchNorm1d(3))),
        head(register_module("head", torch::nn::Sequential(torch::nn::Linear(3, 2)))) {
    to(test_device());
  }
  torch::Tensor forward(const torch::Tensor& x) { return head->forward(bn->forward(fc->forward(x))); }
  torch::nn::Linear fc;
  torch::nn::BatchNorm1d bn;
  torch::nn::Sequential head;
};

void train_steps(Net& net, torch::optim::Optimizer& opt, int steps, int seed) {
  torch::manual_seed(seed);
  for (int i = 0; i < steps; ++i) {
    const auto x = torch::randn({8, 4}).to(net.parameters().front().device(), net.parameters().front().scalar_type());
    opt.zero_grad();
    net.forward(x).pow(2).mean().backward();
    opt.step();
  }
}

void expect_same_state(const torch::nn::Module& a, const torch::nn::Module& b) {
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& p : pa) EXPECT_TRUE(torch::equal(p.value().cpu(), pb[p.key()].cpu())) << p.key();
  const auto ba = a.named_buffers(), bb = b.named_buffers();
  ASSERT_EQ(ba.size(), bb.size());
  for (const auto& p : ba) EXPECT_TRUE(torch::equal(p.value().cpu(), bb[p.key()].cpu())) << p.key();
}

// Saving after some steps and loading into fresh objects continues exactly: one more step on both
// gives the same weights, which needs the optimizer's state (momentum, moments, step counts).
template <class Opt, class Options>
void round_trip(Options options) {
  SharedDir dir;
  torch::manual_seed(1);
  auto net = std::make_shared<Net>();
  auto opt = std::make_shared<Opt>(net->parameters(), options);
  train_steps(*net, *opt, 3, 2);
  {
    Checkpoint ckpt(dir.path, {{"model", net}, {"optimizer", opt}});
    ckpt.save({.epoch = 1, .iteration = 3});
    ckpt.wait();
  }
  torch::manual_seed(99);
  auto net2 = std::make_shared<Net>();
  auto opt2 = std::make_shared<Opt>(net2->parameters(), options);
  Checkpoint ckpt(dir.path, {{"model", net2}, {"optimizer", opt2}}, {.require_empty = false});
  const auto loaded = ckpt.load_latest();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->iteration, 3u);
  EXPECT_EQ(loaded->epoch, 1u);
  EXPECT_EQ(loaded->world_size, ws());
  EXPECT_EQ(loaded->path.filename(), "checkpoint_3.pt");
  expect_same_state(*net, *net2);
  train_steps(*net, *opt, 2, 5);
  train_steps(*net2, *opt2, 2, 5);
  expect_same_state(*net, *net2);
}

TEST(Checkpoint, SgdWithMomentumRoundTrips) {
  round_trip<torch::optim::SGD>(torch::optim::SGDOptions(0.1).momentum(0.9));
}

TEST(Checkpoint, AdamRoundTrips) { round_trip<torch::optim::Adam>(torch::optim::AdamOptions(0.01).amsgrad(true)); }

TEST(Checkpoint, LoadsByCopyIntoTheModulesTensors) {
  SharedDir dir;
  auto net = std::make_shared<Net>();
  Checkpoint ckpt(dir.path, {{"model", net}});
  ckpt.save({.iteration = 1});
  const void* before = net->fc->weight.data_ptr();
  torch::NoGradGuard no_grad;
  net->fc->weight.zero_();
  ASSERT_TRUE(ckpt.load_latest().has_value());
  EXPECT_EQ(net->fc->weight.data_ptr(), before);
  EXPECT_GT(net->fc->weight.abs().sum().item<double>(), 0.0);
}

// A LibTorch module holder (torch::nn::Linear) is an item as it is, without .ptr().
TEST(Checkpoint, TakesAModuleHolder) {
  SharedDir dir;
  torch::nn::Linear linear(3, 2);
  linear->to(test_device());
  Checkpoint ckpt(dir.path, {{"model", linear}});
  ckpt.save({.iteration = 1});
  ckpt.wait();
  const auto saved = linear->weight.clone();
  {
    torch::NoGradGuard no_grad;
    linear->weight.zero_();
  }
  ASSERT_TRUE(ckpt.load_latest().has_value());
  EXPECT_TRUE(torch::equal(linear->weight.cpu(), saved.cpu()));
}

// save() copies the state before it returns: what training changes while the background write runs
// is not in the file.
TEST(Checkpoint, SavesTheStateOfTheCallNotOfTheWrite) {
  SharedDir dir;
  auto model = std::make_shared<torch::nn::LinearImpl>(2048, 2048);  // 16 MiB: the write takes a while
  model->to(test_device());
  auto opt = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  model->weight.mutable_grad() = torch::ones_like(model->weight);
  model->bias.mutable_grad() = torch::ones_like(model->bias);
  opt->step();
  const auto weight = model->weight.detach().clone();
  Checkpoint ckpt(dir.path, {{"model", model}, {"optimizer", opt}});
  ckpt.save({.iteration = 1});
  opt->step();  // changes the weights and the momentum buffers in place
  {
    torch::NoGradGuard no_grad;
    model->weight.fill_(123);
  }
  ckpt.wait();
  auto fresh = std::make_shared<torch::nn::LinearImpl>(2048, 2048);
  fresh->to(test_device());
  auto fresh_opt =
      std::make_shared<torch::optim::SGD>(fresh->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  Checkpoint reader(dir.path, {{"model", fresh}, {"optimizer", fresh_opt}}, {.require_empty = false});
  ASSERT_TRUE(reader.load_latest().has_value());
  EXPECT_TRUE(torch::equal(fresh->weight.cpu(), weight.cpu()));
  for (const auto& [key, state] : fresh_opt->state()) {
    const auto& buf = static_cast<const torch::optim::SGDParamState&>(*state).momentum_buffer();
    EXPECT_EQ(buf.device(), test_device());
    EXPECT_TRUE(torch::equal(buf.cpu(), torch::ones(buf.sizes()))) << "the first step's momentum";
  }
}

// A save that crashed before its rename leaves a temporary file: it is never loaded, and the next
// Checkpoint on the directory removes it.
TEST(Checkpoint, TemporaryFileOfACrashedSaveIsIgnoredAndRemoved) {
  SharedDir dir;
  auto net = std::make_shared<Net>();
  {
    Checkpoint ckpt(dir.path, {{"model", net}});
    ckpt.save({.iteration = 20});
  }
  const fs::path leftover = dir.path / ".model_30.pt.4242.0.tmp";
  if (rank() == 0) std::ofstream(leftover) << "half a checkpoint";
  testing::internal::CaptureStderr();
  Checkpoint ckpt(dir.path, {{"model", net}}, {.require_empty = false});
  const auto loaded = ckpt.load_latest();
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->iteration, 20u);
  EXPECT_EQ(err.find("WARNING"), std::string::npos) << err;
  if (rank() == 0) {
    EXPECT_FALSE(fs::exists(leftover));
    EXPECT_EQ(dir.files(), std::vector<std::string>{"model_20.pt"});
  }
}

TEST(Checkpoint, UserValuesAndGeneratorStateRoundTrip) {
  SharedDir dir;
  auto net = std::make_shared<Net>();
  Checkpoint ckpt(dir.path, {{"model", net}}, {.map_location = torch::kCPU});
  torch::manual_seed(1234 + rank());  // each rank its own stream
  ckpt.save({.epoch = 7,
             .iteration = 70,
             .values = {{"count", std::int64_t(-5)},
                        {"best", 0.25},
                        {"name", std::string("résumé")},
                        {"histogram", torch::arange(6, on_test_device()).reshape({2, 3})}}});
  const auto expected = torch::rand({5});  // what the generator gives after the save
  torch::manual_seed(0);
  const auto loaded = ckpt.load_latest();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_TRUE(torch::equal(torch::rand({5}), expected)) << "rank " << rank() << "'s generator state";
  EXPECT_EQ(loaded->epoch, 7u);
  EXPECT_EQ(loaded->value<std::int64_t>("count"), -5);
  EXPECT_EQ(loaded->value<double>("best"), 0.25);
  EXPECT_EQ(loaded->value<std::string>("name"), "résumé");
  const auto& histogram = loaded->value<torch::Tensor>("histogram");
  EXPECT_TRUE(histogram.device().is_cpu()) << "map_location";
  EXPECT_TRUE(torch::equal(histogram, torch::arange(6, torch::kFloat).reshape({2, 3})));
  EXPECT_NE(idist::test::message_of([&] { loaded->value<double>("count"); }).find("'count'"), std::string::npos);
  EXPECT_NE(idist::test::message_of([&] { loaded->value<double>("missing"); }).find("no user value 'missing'"),
            std::string::npos);
}

TEST(Checkpoint, EmptyDirectoryLoadsNothing) {
  SharedDir dir;
  auto net = std::make_shared<Net>();
  Checkpoint ckpt(dir.path / "new" / "sub", {{"model", net}});
  EXPECT_FALSE(ckpt.load_latest().has_value());
  EXPECT_FALSE(ckpt.last_checkpoint().has_value());
  if (rank() == 0) {
    EXPECT_TRUE(fs::is_directory(dir.path / "new" / "sub"));  // create_dir
  }
}

TEST(Checkpoint, KeepsNSavedAndNamesFilesAsIgnite) {
  SharedDir dir;
  auto net = std::make_shared<Net>();
  auto opt = std::make_shared<torch::optim::SGD>(net->parameters(), 0.1);
  Checkpoint ckpt(dir.path, {{"model", net}, {"optimizer", opt}}, {.filename_prefix = "run", .n_saved = 2});
  for (std::uint64_t it : {100, 200, 300, 300, 400}) ckpt.save({.iteration = it});
  ckpt.wait();
  EXPECT_EQ(ckpt.last_checkpoint()->filename(), "run_checkpoint_400.pt");
  if (rank() == 0) {
    EXPECT_EQ(dir.files(), (std::vector<std::string>{"run_checkpoint_300.pt", "run_checkpoint_400.pt"}));
  }
  // One item: the file takes its name (ignite's rule); n_saved = nullopt keeps everything.
  Checkpoint single(dir.path, {{"weights", net}}, {.n_saved = std::nullopt, .require_empty = false});
  for (std::uint64_t it : {1, 2, 3}) single.save({.iteration = it});
  single.wait();
  if (rank() == 0) {
    EXPECT_EQ(dir.files().size(), 5u);
  }
  if (rank() == 0) {
    EXPECT_TRUE(fs::exists(dir.path / "weights_1.pt"));
  }
}

// Damages rank 0's newest file `name` with `damage`.
void damage_file(const fs::path& file, const std::function<void(std::fstream&, std::uintmax_t)>& damage) {
  if (rank() != 0) return;
  const auto size = fs::file_size(file);
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  damage(f, size);
}

void torn_newest_falls_back(const std::function<void(const fs::path&)>& tear, const char* reason) {
  SharedDir dir;
  auto net = std::make_shared<Net>();
  Checkpoint ckpt(dir.path, {{"model", net}}, {.n_saved = 3});
  ckpt.save({.iteration = 10, .values = {{"tag", std::string("good")}}});
  ckpt.save({.iteration = 20, .values = {{"tag", std::string("torn")}}});
  ckpt.wait();
  if (rank() == 0) tear(dir.path / "model_20.pt");
  testing::internal::CaptureStderr();
  const auto loaded = ckpt.load_latest();
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->iteration, 10u);
  EXPECT_EQ(loaded->value<std::string>("tag"), "good");
  if (rank() == 0) {
    EXPECT_NE(err.find("WARNING"), std::string::npos) << err;
    EXPECT_NE(err.find("model_20.pt"), std::string::npos) << err;
    EXPECT_NE(err.find(reason), std::string::npos) << err;
    EXPECT_NE(err.find("falling back"), std::string::npos) << err;
  }
}

TEST(Checkpoint, TruncatedNewestFallsBackToThePrevious) {
  torn_newest_falls_back([](const fs::path& f) { fs::resize_file(f, fs::file_size(f) / 2); }, "truncated");
}

TEST(Checkpoint, CorruptNewestFallsBackToThePrevious) {
  torn_newest_falls_back(
      [](const fs::path& f) {
        damage_file(f, [](std::fstream& s, std::uintmax_t size) {
          s.seekg(std::streamoff(size / 2));
          const char c = char(s.get());
          s.seekp(std::streamoff(size / 2));
          s.put(char(c ^ 0x10));
        });
      },
      "checksum");
}

// The header's fields (src/torch/checkpoint/file_format.hpp): the magic at 0, the version at 8, the
// payload length at 16, the header's own CRC-32 at 24.
constexpr std::streamoff kVersionAt = 8, kLengthAt = 16, kHeaderCrcAt = 24;

void flip_byte(const fs::path& f, std::streamoff at) {
  damage_file(f, [at](std::fstream& s, std::uintmax_t) {
    s.seekg(at);
    const char c = char(s.get());
    s.seekp(at);
    s.put(char(c ^ 0x01));
  });
}

// CRC-32 (zlib's polynomial), bit by bit: the checksum a file of another format version carries.
std::uint32_t crc32(const unsigned char* p, std::size_t n) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int b = 0; b < 8; ++b) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// Rewrites the header as format version 2, its checksum updated: a file from a newer idist.
void make_version_2(const fs::path& f) {
  damage_file(f, [](std::fstream& s, std::uintmax_t) {
    unsigned char h[24];
    s.seekg(0);
    s.read(reinterpret_cast<char*>(h), sizeof h);
    h[kVersionAt] = 2;
    const std::uint32_t crc = crc32(h, sizeof h);
    unsigned char le[4] = {static_cast<unsigned char>(crc), static_cast<unsigned char>(crc >> 8),
                           static_cast<unsigned char>(crc >> 16), static_cast<unsigned char>(crc >> 24)};
    s.seekp(0);
    s.write(reinterpret_cast<const char*>(h), sizeof h);
    s.write(reinterpret_cast<const char*>(le), sizeof le);
  });
}

void append_bytes(const fs::path& f) {
  if (rank() == 0) std::ofstream(f, std::ios::binary | std::ios::app) << "tail";
}

// A flipped bit in the payload length: the header's checksum catches it before the length is
// trusted (it would otherwise read as a truncated file).
TEST(Checkpoint, CorruptHeaderFallsBackToThePrevious) {
  torn_newest_falls_back([](const fs::path& f) { flip_byte(f, kLengthAt); }, "corrupt header (checksum)");
  torn_newest_falls_back([](const fs::path& f) { flip_byte(f, kHeaderCrcAt); }, "corrupt header (checksum)");
  torn_newest_falls_back([](const fs::path& f) { flip_byte(f, 0); }, "not an idist checkpoint (magic)");
  torn_newest_falls_back(make_version_2, "format version 2, expected 1");
}

TEST(Checkpoint, TrailingBytesFallBackToThePrevious) { torn_newest_falls_back(append_bytes, "4 bytes follow the"); }

// With no intact file to fall back on, load_latest raises on every rank, naming the file and what is
// wrong with it.
void damaged_only_checkpoint_raises(const std::function<void(const fs::path&)>& damage, const std::string& reason) {
  SharedDir dir;
  auto net = std::make_shared<Net>();
  Checkpoint ckpt(dir.path, {{"model", net}});
  ckpt.save({.iteration = 5});
  ckpt.wait();
  if (rank() == 0) damage(dir.path / "model_5.pt");
  testing::internal::CaptureStderr();
  const std::string msg = idist::test::message_of([&] { ckpt.load_latest(); });
  testing::internal::GetCapturedStderr();
  EXPECT_NE(msg.find("none of the 1 checkpoints of "), std::string::npos) << msg;
  EXPECT_NE(msg.find("can be loaded: model_5.pt: " + reason), std::string::npos) << msg;
  if (rank() == 0) {
    EXPECT_NE(msg.find(dir.path.string()), std::string::npos) << msg;
  }
}

TEST(Checkpoint, DamagedHeaderOrTrailingBytesAloneRaise) {
  damaged_only_checkpoint_raises([](const fs::path& f) { flip_byte(f, kLengthAt); }, "corrupt header (checksum)");
  damaged_only_checkpoint_raises(append_bytes, "4 bytes follow the");
}

TEST(Checkpoint, NoReadableCheckpointIsAnErrorOnEveryRank) {
  SharedDir dir;
  auto net = std::make_shared<Net>();
  Checkpoint ckpt(dir.path, {{"model", net}});
  ckpt.save({.iteration = 5});
  ckpt.wait();
  if (rank() == 0) fs::resize_file(dir.path / "model_5.pt", 10);
  testing::internal::CaptureStderr();
  const std::string msg = idist::test::message_of([&] { ckpt.load_latest(); });
  testing::internal::GetCapturedStderr();
  EXPECT_NE(msg.find("none of the 1 checkpoints"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model_5.pt"), std::string::npos) << msg;
}

TEST(Checkpoint, BadArgumentsRaiseOnEveryRank) {
  SharedDir dir;
  auto net = std::make_shared<Net>();
  using idist::test::message_of;
  EXPECT_NE(message_of([&] { Checkpoint(dir.path, {}); }).find("to_save is empty"), std::string::npos);
  EXPECT_NE(message_of([&] {
              Checkpoint(dir.path, {{"m", net}, {"m", net}});
            }).find("two items are named 'm'"),
            std::string::npos);
  EXPECT_NE(message_of([&] { Checkpoint(dir.path, {{"", net}}); }).find("non-empty name"), std::string::npos);
  EXPECT_NE(message_of([&] { Checkpoint(dir.path, {{"a/b", net}}); }).find("no '/'"), std::string::npos);
  EXPECT_NE(message_of([&] { Checkpoint(dir.path, {{"m", net}}, {.n_saved = 0}); }).find("n_saved"), std::string::npos);
  EXPECT_NE(message_of([&] {
              Checkpoint(dir.path, {{"m", net}}, {.save_on_rank = ws()});
            }).find("save_on_rank"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              Checkpoint(dir.path, {{"m", std::shared_ptr<Net>()}});
            }).find("item 'm' is null"),
            std::string::npos);
  // What only the saving rank can see reaches every rank.
  const std::string missing = message_of([&] { Checkpoint(dir.path / "absent", {{"m", net}}, {.create_dir = false}); });
  EXPECT_NE(missing.find("is not found"), std::string::npos) << missing;
  {
    Checkpoint ckpt(dir.path, {{"m", net}});
    ckpt.save({.iteration = 1});
    ckpt.wait();
  }
  const std::string not_empty = message_of([&] { Checkpoint(dir.path, {{"m", net}}); });
  EXPECT_NE(not_empty.find("m_1.pt"), std::string::npos) << not_empty;
  EXPECT_NE(not_empty.find("require_empty"), std::string::npos) << not_empty;
  Checkpoint ckpt(dir.path, {{"m", net}}, {.require_empty = false});
  EXPECT_NE(message_of([&] { ckpt.save({.values = {{"", 1.0}}}); }).find("empty name"), std::string::npos);
  // Checkpoints that do not fit the items: other parameter names, other shapes, a missing item.
  auto other = std::make_shared<torch::nn::LinearImpl>(4, 5);
  other->to(test_device());
  Checkpoint wrong_names(dir.path, {{"m", other}}, {.require_empty = false});
  const std::string names = message_of([&] { wrong_names.load_latest(); });
  EXPECT_NE(names.find("item 'm'"), std::string::npos) << names;
  EXPECT_NE(names.find("weight"), std::string::npos) << names;
  EXPECT_NE(names.find("are not in the file"), std::string::npos) << names;
  auto lin = std::make_shared<torch::nn::LinearImpl>(4, 3);
  lin->to(test_device());
  Checkpoint lin_ckpt(dir.path, {{"lin", lin}}, {.require_empty = false});
  lin_ckpt.save({.iteration = 2});
  lin_ckpt.wait();  // the objects below read what it wrote
  Checkpoint wrong_shape(dir.path, {{"lin", other}}, {.require_empty = false});
  const std::string shape = message_of([&] { wrong_shape.load_latest(); });
  EXPECT_NE(shape.find("'weight' is Float [3, 4] in the file, Float [5, 4] in the module"), std::string::npos) << shape;
  Checkpoint two(dir.path, {{"a", net}, {"b", lin}}, {.require_empty = false});
  two.save({.iteration = 3});
  two.wait();
  Checkpoint other_items(dir.path, {{"a", net}, {"c", lin}}, {.require_empty = false});
  const std::string item = message_of([&] { other_items.load_latest(); });
  EXPECT_NE(item.find("no item c (it holds a, b)"), std::string::npos) << item;
}

TEST(Checkpoint, AFailedWriteIsRaisedOnEveryRank) {
  SharedDir dir;
  auto net = std::make_shared<Net>();
  for (bool background : {true, false}) {
    Checkpoint ckpt(dir.path / (background ? "bg" : "fg"), {{"model", net}}, {.background_write = background});
    std::error_code ec;
    if (rank() == 0) fs::remove_all(dir.path / (background ? "bg" : "fg"), ec);  // the directory vanishes
    std::string what;
    try {
      ckpt.save({.iteration = 1});
      ckpt.wait();
    } catch (const idist::Error& e) {
      what = e.what();
    }
    EXPECT_NE(what.find("model_1.pt"), std::string::npos) << what;
    EXPECT_NE(what.find("on rank 0"), std::string::npos) << what;
  }
}

// save_on_rank: the last rank writes and reads; the others' directories stay untouched.
TEST(Checkpoint, SaveOnAnotherRank) {
  char tmpl[] = "/tmp/idist-ckpt-rank-XXXXXX";
  const fs::path mine = ::mkdtemp(tmpl);
  const int saver = ws() - 1;
  auto net = std::make_shared<Net>();
  {
    Checkpoint ckpt(mine, {{"model", net}}, {.save_on_rank = saver});
    ckpt.save({.iteration = 9, .values = {{"by", std::int64_t(rank())}}});
    const auto loaded = ckpt.load_latest();
    ASSERT_TRUE(loaded.has_value());
    EXPECT_EQ(loaded->value<std::int64_t>("by"), std::int64_t(saver));
    EXPECT_EQ(ckpt.dirname(), idist::broadcast(mine, saver));
  }
  EXPECT_EQ(fs::exists(mine / "model_9.pt"), rank() == saver);
  fs::remove_all(mine);
}

// An object that saves itself: its save() runs on every rank (collectives allowed), load() too.
struct Counter : idist::Checkpointable {
  std::int64_t value = 0;
  int saves = 0, loads = 0;
  void save(torch::serialize::OutputArchive& a) override {
    ++saves;
    const std::int64_t total = idist::all_reduce(value);  // a collective inside
    a.write("total", c10::IValue(total));
  }
  void load(torch::serialize::InputArchive& a) override {
    ++loads;
    c10::IValue v;
    a.read("total", v);
    value = v.toInt();
  }
};

TEST(Checkpoint, ObjectsThatSaveThemselvesRunOnEveryRank) {
  SharedDir dir;
  auto counter = std::make_shared<Counter>();
  counter->value = rank() + 1;
  std::int64_t seen = 0;
  Checkpoint ckpt(dir.path, {{"counter", counter},
                             {"lambda", [&](torch::serialize::OutputArchive& a) { a.write("x", c10::IValue(42)); },
                              [&](torch::serialize::InputArchive& a) {
                                c10::IValue v;
                                a.read("x", v);
                                seen = v.toInt();
                              }}});
  ckpt.save({.iteration = 1});
  EXPECT_EQ(counter->saves, 1);
  ASSERT_TRUE(ckpt.load_latest().has_value());
  EXPECT_EQ(counter->loads, 1);
  EXPECT_EQ(counter->value, std::int64_t(ws() * (ws() + 1) / 2));
  EXPECT_EQ(seen, 42);
}

// PyTorch's load_state_dict rules: a module copies the saved values into its own tensors (their
// device and dtype), an optimizer's state follows its parameter (device, and dtype when floating;
// steps stay). Saved from float32 parameters, loaded after the parameters moved to float64.
TEST(Checkpoint, StateLoadsOntoTheParametersCurrentDtype) {
  SharedDir dir;
  torch::manual_seed(1);
  auto net = std::make_shared<Net>();
  auto opt = std::make_shared<torch::optim::Adam>(net->parameters(), torch::optim::AdamOptions(0.01));
  train_steps(*net, *opt, 3, 2);
  {
    Checkpoint ckpt(dir.path, {{"model", net}, {"optimizer", opt}});
    ckpt.save({.iteration = 3});
    ckpt.wait();
  }
  auto net2 = std::make_shared<Net>();
  net2->to(torch::kFloat64);
  auto opt2 = std::make_shared<torch::optim::Adam>(net2->parameters(), torch::optim::AdamOptions(0.01));
  Checkpoint ckpt(dir.path, {{"model", net2}, {"optimizer", opt2}}, {.require_empty = false});
  ASSERT_TRUE(ckpt.load_latest().has_value());
  const auto named = net->named_parameters(), named2 = net2->named_parameters();
  for (const auto& p : named) {
    EXPECT_EQ(named2[p.key()].scalar_type(), torch::kFloat64) << p.key();
    EXPECT_TRUE(torch::equal(named2[p.key()].cpu(), p.value().cpu().to(torch::kFloat64))) << p.key();
  }
  const auto ps = net->parameters(), ps2 = net2->parameters();
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const auto* saved = dynamic_cast<torch::optim::AdamParamState*>(idist::checkpoint::state_of(*opt, ps[i]));
    const auto* mine = dynamic_cast<torch::optim::AdamParamState*>(idist::checkpoint::state_of(*opt2, ps2[i]));
    ASSERT_TRUE(saved && mine) << "parameter " << i;
    EXPECT_EQ(mine->exp_avg().scalar_type(), torch::kFloat64);
    EXPECT_EQ(mine->exp_avg_sq().scalar_type(), torch::kFloat64);
    EXPECT_EQ(mine->exp_avg().device(), ps2[i].device());
    EXPECT_EQ(mine->step(), saved->step());
    EXPECT_TRUE(torch::equal(mine->exp_avg().cpu(), saved->exp_avg().cpu().to(torch::kFloat64)));
  }
  // Both continue alike (float32 against float64: to float32's rounding). Not fc.bias: the batch
  // norm after it cancels its gradient, so Adam steps it by normalised rounding noise.
  train_steps(*net, *opt, 2, 5);
  train_steps(*net2, *opt2, 2, 5);
  for (const auto& p : named)
    if (p.key() != "fc.bias")
      EXPECT_TRUE(torch::allclose(named2[p.key()].cpu().to(torch::kFloat), p.value().cpu(), 1e-4, 1e-5)) << p.key();
}

// Records where the tensor it reads was loaded.
struct TensorHolder : idist::Checkpointable {
  torch::Tensor value, loaded;
  void save(torch::serialize::OutputArchive& a) override { a.write("value", value); }
  void load(torch::serialize::InputArchive& a) override { a.read("value", loaded); }
};

// map_location moves every tensor first; then modules and optimizers take theirs where they keep
// them, while user tensors and what a Checkpointable reads stay there. Without it: the host, and
// user tensors saved from a device back on this rank's device.
TEST(Checkpoint, MapLocationAndWhereEachTensorGoes) {
  SharedDir dir;
  auto net = std::make_shared<Net>();
  auto opt = std::make_shared<torch::optim::SGD>(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  train_steps(*net, *opt, 1, 3);
  auto holder = std::make_shared<TensorHolder>();
  holder->value = torch::arange(4, on_test_device());
  {
    Checkpoint ckpt(dir.path, {{"model", net}, {"optimizer", opt}, {"holder", holder}});
    ckpt.save(
        {.iteration = 1, .values = {{"on_device", torch::arange(3, on_test_device())}, {"on_host", torch::arange(2)}}});
    ckpt.wait();
  }
  for (const bool map_to_cpu : {true, false}) {
    SCOPED_TRACE(map_to_cpu ? "map_location cpu" : "no map_location");
    auto net2 = std::make_shared<Net>();
    auto opt2 = std::make_shared<torch::optim::SGD>(net2->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    auto holder2 = std::make_shared<TensorHolder>();
    CheckpointOptions options{.require_empty = false};
    if (map_to_cpu) options.map_location = torch::kCPU;
    Checkpoint ckpt(dir.path, {{"model", net2}, {"optimizer", opt2}, {"holder", holder2}}, options);
    const auto loaded = ckpt.load_latest();
    ASSERT_TRUE(loaded.has_value());
    expect_same_state(*net, *net2);
    for (const auto& p : net2->parameters()) {
      EXPECT_EQ(p.device(), test_device());
      const auto* s = dynamic_cast<torch::optim::SGDParamState*>(idist::checkpoint::state_of(*opt2, p));
      ASSERT_NE(s, nullptr);
      EXPECT_EQ(s->momentum_buffer().device(), test_device());
    }
    const auto& on_device = loaded->value<torch::Tensor>("on_device");
    EXPECT_EQ(on_device.device(), map_to_cpu ? torch::Device(torch::kCPU) : test_device());
    EXPECT_TRUE(torch::equal(on_device.cpu(), torch::arange(3)));
    EXPECT_TRUE(loaded->value<torch::Tensor>("on_host").device().is_cpu());
    EXPECT_TRUE(holder2->loaded.device().is_cpu());
    EXPECT_TRUE(torch::equal(holder2->loaded, torch::arange(4)));
  }
}

// Items given by reference: a module, an optimizer and a Checkpointable on the stack, as
// auto_optim's example builds its optimizer.
TEST(Checkpoint, TakesObjectsByReference) {
  SharedDir dir;
  torch::manual_seed(1);
  Net net;
  torch::optim::SGD opt(net.parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  TensorHolder holder;
  holder.value = torch::full({2}, 7.0);
  train_steps(net, opt, 2, 2);
  {
    Checkpoint ckpt(dir.path, {{"model", net}, {"optimizer", opt}, {"holder", holder}});
    ckpt.save({.iteration = 2});
    ckpt.wait();
  }
  torch::manual_seed(99);
  Net net2;
  torch::optim::SGD opt2(net2.parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  TensorHolder holder2;
  Checkpoint ckpt(dir.path, {{"model", net2}, {"optimizer", opt2}, {"holder", holder2}}, {.require_empty = false});
  ASSERT_TRUE(ckpt.load_latest().has_value());
  expect_same_state(net, net2);
  EXPECT_EQ(opt2.state().size(), opt.state().size());
  EXPECT_TRUE(torch::equal(holder2.loaded, holder.value));
  train_steps(net, opt, 1, 5);
  train_steps(net2, opt2, 1, 5);
  expect_same_state(net, net2);  // the momentum came back
}

using idist::test::index_dataset;
using idist::test::read_indices;

// A loader saved mid-epoch resumes exactly where it stood (same world size), with shuffling by the
// distributed sampler (world size > 1) or LibTorch's RandomSampler over the global generator (serial).
TEST(Checkpoint, LoaderResumesMidEpoch) {
  for (std::size_t workers : {0, 2}) {
    SharedDir dir;
    auto loader = idist::auto_dataloader(
        index_dataset(103), {.batch_size = std::size_t(4 * ws()), .num_workers = workers, .shuffle = true});
    auto net = std::make_shared<Net>();
    Checkpoint ckpt(dir.path, {{"model", net}, {"loader", loader}});
    torch::manual_seed(5);
    loader.set_epoch(2);
    read_indices(loader, 3);
    EXPECT_EQ(loader.position().consumed_samples, std::uint64_t(3 * 4 * ws()));
    ckpt.save({.epoch = 2, .iteration = 3});
    ckpt.wait();  // another Checkpoint object reads it below
    // The whole epoch, uninterrupted, from another loader (LibTorch's loader cannot restart an
    // iteration left unfinished).
    auto reference = idist::auto_dataloader(
        index_dataset(103), {.batch_size = std::size_t(4 * ws()), .num_workers = workers, .shuffle = true});
    torch::manual_seed(5);
    reference.set_epoch(2);
    const auto whole = read_indices(reference);
    const std::vector<std::int64_t> rest(whole.begin() + 12, whole.end());

    auto fresh = idist::auto_dataloader(index_dataset(103),
                                        {.batch_size = std::size_t(4 * ws()), .num_workers = workers, .shuffle = true});
    Checkpoint resumed(dir.path, {{"model", net}, {"loader", fresh}}, {.require_empty = false});
    torch::manual_seed(77);  // another generator state: the checkpoint restores the epoch's
    ASSERT_TRUE(resumed.load_latest().has_value());
    EXPECT_EQ(fresh.sampler().epoch(), 2u);
    fresh.set_epoch(2);  // the same epoch keeps the position
    EXPECT_EQ(read_indices(fresh), rest) << "workers " << workers;
    fresh.set_epoch(3);  // the next epoch starts at its beginning
    EXPECT_EQ(read_indices(fresh).size(), whole.size());
  }
}

TEST(Checkpoint, SetEpochWithAStartSampleSkipsThem) {
  auto loader = idist::auto_dataloader(index_dataset(40), {.batch_size = std::size_t(2 * ws()), .shuffle = false});
  loader.set_epoch(0);
  const auto whole = read_indices(loader);
  loader.set_epoch(0, std::uint64_t(6 * ws()));
  const auto rest = read_indices(loader);
  EXPECT_EQ(rest, std::vector<std::int64_t>(whole.begin() + 6, whole.end()));
  EXPECT_EQ(loader.position().consumed_samples, std::uint64_t(whole.size() * std::size_t(ws())));
}

}  // namespace
