// `eagle train --export` (tools/train/export.hpp, npy.hpp): .npy headers numpy's format accepts,
// and a short CPU run's export — config, initial params (the values TrainState::init gives),
// every step's batch, the log.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "test_util.hpp"
#include "train/export.hpp"
#include "train/npy.hpp"

namespace eagle {
namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A .npy file's header dict and data bytes, checking the layout version 1.0 prescribes.
struct Npy {
  std::string dict, data;
};
Npy read_npy(const fs::path& p) {
  const std::string bytes = read_all(p);
  EXPECT_GE(bytes.size(), 10u) << p;
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8)) << p;
  const std::size_t len = static_cast<unsigned char>(bytes[8]) |
                          (static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8);
  EXPECT_EQ((10 + len) % 64, 0u) << p;
  EXPECT_EQ(bytes[9 + len], '\n') << p;
  return {bytes.substr(10, len), bytes.substr(10 + len)};
}

// How numpy writes a shape: "(64, 16)", "(16,)".
std::string npy_shape(const Shape& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

fs::path fresh_dir(const std::string& tag) {
  const fs::path d =
      fs::temp_directory_path() / ("eagle_export_" + tag + "_" + std::to_string(test::rng()()));
  fs::remove_all(d);
  return d;
}

TEST(NpyWriter, HeadersNameDtypeShapeAndAlignTheData) {
  const std::string h2 = train::npy_header("<f4", {2, 3});
  EXPECT_EQ(h2.size() % 64, 0u);
  EXPECT_NE(h2.find("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"),
            std::string::npos);
  EXPECT_EQ(h2.back(), '\n');
  EXPECT_NE(train::npy_header("<i4", {5}).find("'shape': (5,)"), std::string::npos);
  EXPECT_NE(train::npy_header("<f4", {}).find("'shape': ()"), std::string::npos);
}

TEST(NpyWriter, WritesTheValuesAfterTheHeader) {
  const fs::path d = fresh_dir("npy");
  fs::create_directories(d);
  const std::vector<float> f = {1.5f, -2.0f, 3.25f, 0.125f, 7.0f, -0.5f};
  train::write_npy(d / "f.npy", f, {3, 2});
  Npy n = read_npy(d / "f.npy");
  EXPECT_NE(n.dict.find("'descr': '<f4'"), std::string::npos);
  ASSERT_EQ(n.data.size(), f.size() * 4);
  EXPECT_EQ(std::memcmp(n.data.data(), f.data(), n.data.size()), 0);
  const std::vector<int32_t> i = {-100, 7, 1 << 20};
  train::write_npy(d / "i.npy", i, {3});
  n = read_npy(d / "i.npy");
  EXPECT_NE(n.dict.find("'descr': '<i4'"), std::string::npos);
  ASSERT_EQ(n.data.size(), 12u);
  EXPECT_EQ(std::memcmp(n.data.data(), i.data(), 12), 0);
  test::expect_invalid([&] { train::write_npy(d / "bad.npy", i, {2, 2}); }, "holds 4 elements");
  fs::remove_all(d);
}

TEST(TrainExport, WritesConfigInitialParamsEveryBatchAndTheLog) {
  train::TrainOptions o;
  o.docs = fs::path(EAGLE_SOURCE_DIR) / "src";
  o.steps = 3;
  o.capacity = {64, 4};
  o.lookahead = 8;
  o.model.dim = 16;
  o.model.heads = 2;
  o.model.layers = 1;
  o.max_tokens = 50'000;
  o.seed = test::rng()();
  o.export_dir = fresh_dir("run");
  const train::TrainReport r = train::run_training(o, {}, {});
  const fs::path& d = o.export_dir;

  const std::string config = read_all(d / "config.json");
  for (const char* key :
       {"\"rms_norm_eps\": 1e-05", "\"attention_scale\": 0.35355339059327", "\"tied_head\": false",
        "\"weight_decay\": 0.01", "\"tokens\": 64", "\"slots\": 4", "\"mlp\": 64",
        "\"attention_dtype\": \"f32\"", "\"matmul_dtype\": \"f32\""})
    EXPECT_NE(config.find(key), std::string::npos) << key << " in\n" << config;

  // The initial params: what init gives for the seed (the run's updates came after the export).
  const train::TrainState init = train::TrainState::init(o.model, o.seed, Device::cpu());
  ASSERT_EQ(init.names.size(), 11u);  // embed, 8 per block, gf, head
  for (std::size_t i = 0; i < init.names.size(); ++i) {
    const std::string& name = init.names[i];
    EXPECT_NE(config.find("\"name\": \"" + name + "\""), std::string::npos) << name;
    const Npy n = read_npy(d / "params" / (name + ".npy"));
    EXPECT_NE(n.dict.find("'shape': " + npy_shape(init.params[i].shape())), std::string::npos)
        << name << ": " << n.dict;
    const std::vector<float> want = init.params[i].to_vector<float>();
    ASSERT_EQ(n.data.size(), want.size() * 4) << name;
    EXPECT_EQ(std::memcmp(n.data.data(), want.data(), n.data.size()), 0) << name;
  }

  for (int step = 1; step <= 3; ++step)
    for (const char* field : {"input_ids", "labels", "loss_mask", "cu_seqlens"}) {
      const fs::path p =
          d / "batches" / ("step_0000" + std::to_string(step) + "." + field + ".npy");
      ASSERT_TRUE(fs::exists(p)) << p;
      const Npy n = read_npy(p);
      EXPECT_EQ(n.data.size(), std::string(field) == "cu_seqlens" ? 5 * 4u : 64 * 4u) << p;
    }
  EXPECT_FALSE(fs::exists(d / "batches" / "step_00004.input_ids.npy"));

  const std::string log = read_all(d / "log.json");
  EXPECT_NE(log.find("\"steps\": 3"), std::string::npos) << log;
  char first[64];
  std::snprintf(first, sizeof first, "\"loss\": [%.17g, ", r.steps[0].loss);
  EXPECT_NE(log.find(first), std::string::npos) << first << " in\n" << log;
  EXPECT_NE(log.find("\"step_seconds\": ["), std::string::npos);
  EXPECT_NE(log.find("\"pack_seconds\": ["), std::string::npos);
  fs::remove_all(d);
}

TEST(TrainExport, AFolderThatCannotBeMadeIsAnError) {
  const fs::path d = fresh_dir("file");
  fs::create_directories(d.parent_path());
  std::ofstream(d) << "a file, not a folder";
  train::TrainOptions o;
  o.model.dim = 16;
  o.model.heads = 2;
  const train::TrainState s = train::TrainState::init(o.model, 1, Device::cpu());
  try {
    train::RunExport e(d / "sub", o, s);
    ADD_FAILURE() << "no error for a folder under a file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create"), std::string::npos) << e.what();
  }
  fs::remove(d);
}

}  // namespace
}  // namespace eagle
