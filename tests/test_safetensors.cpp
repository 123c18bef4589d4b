// test_safetensors.cpp — checkpoint files: round trip of every dtype, metadata, atomic writes, and the
// loader's checks.
#include <gtest/gtest.h>

#include "test_process.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "nn/nn.h"
#include "nn/safetensors.h"

#ifndef SCRATCHGRAD_SOURCE_DIR
#define SCRATCHGRAD_SOURCE_DIR "."
#endif

using namespace autograd;
namespace fs = std::filesystem;

namespace {

fs::path temp(const std::string& name) {
  return fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()) + ".safetensors");
}

using testing_process::slurp;

TEST(Safetensors, RoundTripsEveryDtypeAndMetadata) {
  nn::NamedTensors tensors = {
      {"f32", tensor({{1.5, -2.0}, {3.25, 0.0}})},
      {"f64", tensor({1.0, 2.0, 3.0}, DType::Float64)},
      {"i64", tensor({7, -8, 9})},
      {"flag", tensor({true, false}, DType::Bool)},
      {"scalar", scalar_tensor(4.0)},
      {"empty", zeros({0, 3})},
      {"view", tensor({{1.0, 2.0}, {3.0, 4.0}}).t()},  // non-contiguous: saved in row-major order
  };
  fs::path p = temp("roundtrip");
  nn::save_safetensors(p, tensors, {{"note", "hello"}, {"vocab", "ab\n\u00e9"}});
  nn::Checkpoint ck = nn::load_safetensors(p);
  ASSERT_EQ(ck.tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(ck.tensors[i].first, tensors[i].first);
    EXPECT_EQ(ck.tensors[i].second.dtype(), tensors[i].second.dtype());
    EXPECT_TRUE(equal(ck.tensors[i].second, tensors[i].second)) << tensors[i].first;
  }
  EXPECT_EQ(ck.metadata["note"], "hello");
  EXPECT_EQ(ck.metadata["vocab"], "ab\n\u00e9");
  // data starts 8-byte aligned after the padded header, as the format asks
  std::string bytes = slurp(p);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[size_t(i)])) << (8 * i);
  EXPECT_EQ(n % 8, 0u);
  fs::remove(p);
}

TEST(Safetensors, ReadingIntoGivenTensorsWritesThemInPlace) {
  fs::path p = temp("in_place");
  nn::save_safetensors(p, {{"a", tensor({{1.0, 2.0}, {3.0, 4.0}})}, {"b", tensor({5.0, 6.0})}}, {{"k", "v"}});
  Tensor a = zeros({2, 2});
  std::vector<std::string> order;
  std::map<std::string, std::string> metadata;
  nn::read_safetensors(p, {.on_header = [&](const std::vector<nn::TensorHeader>& headers,
                                            const std::map<std::string, std::string>& m) {
                             for (const auto& h : headers) order.push_back(h.name);
                             metadata = m;
                           },
                           .destination = [&](const nn::TensorHeader& h) { return h.name == "a" ? a : Tensor(); },
                           .on_tensor = [&](const nn::TensorHeader& h, const Tensor& t) {
                             if (h.name == "a") EXPECT_EQ(&t.impl(), &a.impl());
                             else EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{5, 6}));
                           }});
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(metadata, (std::map<std::string, std::string>{{"k", "v"}}));
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  // a destination of another shape is the caller's bug, named
  EXPECT_THROW(nn::read_safetensors(p, {.on_header = {}, .destination = [](const nn::TensorHeader&) { return zeros({3}); },
                                        .on_tensor = {}}),
               std::logic_error);
  fs::remove(p);
}

TEST(Safetensors, ModuleStateDictRoundTrip) {
  manual_seed(3);
  nn::MiniSelfAttention a({.vocab = 5, .dim = 8, .context = 4, .heads = 2});
  manual_seed(4);
  nn::MiniSelfAttention b({.vocab = 5, .dim = 8, .context = 4, .heads = 2});
  fs::path p = temp("module");
  nn::save_safetensors(p, a.state_dict());
  b.load_state_dict(nn::load_safetensors(p).tensors);
  for (size_t i = 0; i < a.state_dict().size(); ++i)
    EXPECT_TRUE(equal(a.state_dict()[i].second, b.state_dict()[i].second)) << a.state_dict()[i].first;
  fs::remove(p);
}

TEST(Safetensors, OverwriteIsAtomicAndLeavesNoTempFiles) {
  fs::path p = temp("atomic");
  nn::save_safetensors(p, {{"x", ones({3})}});
  nn::save_safetensors(p, {{"x", zeros({5})}});
  EXPECT_EQ(nn::load_safetensors(p).tensors[0].second.numel(), 5);
  for (const auto& entry : fs::directory_iterator(p.parent_path()))
    EXPECT_EQ(entry.path().string().find(p.string() + ".tmp"), std::string::npos) << entry.path();
  fs::remove(p);
}

TEST(Safetensors, ErrorsNameTheFileAndTheProblem) {
  fs::path p = temp("errors");
  nn::save_safetensors(p, {{"w", ones({2, 2})}});
  std::string good = slurp(p);
  auto expect_error = [&](const std::string& contents, const std::string& needle) {
    std::ofstream(p, std::ios::binary) << contents;
    try {
      nn::load_safetensors(p);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const nn::CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("", "too short");
  expect_error(good.substr(0, good.size() - 4), "truncated");
  std::string offsets = good;
  offsets.replace(offsets.find("[0,16]"), 6, "[0,12]");
  expect_error(offsets, "needs 16 bytes");
  std::string shape = good;
  shape.replace(shape.find("[2,2]"), 5, "[2,-2]");
  expect_error(shape, "malformed shape");
  EXPECT_THROW(nn::load_safetensors("/nonexistent/file.safetensors"), nn::CheckpointError);
  EXPECT_THROW(nn::save_safetensors("/nonexistent/dir/x.safetensors", {{"w", ones({1})}}), nn::CheckpointError);
  fs::remove(p);
}

TEST(Safetensors, LoadStateDictErrorsNameTheKey) {
  nn::Linear lin(3, 2);
  nn::NamedTensors state = lin.state_dict();
  state[0].second = zeros({2, 4});
  try {
    lin.load_state_dict(state);
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("weight"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("[2, 4]"), std::string::npos);
  }
  EXPECT_THROW(lin.load_state_dict({{"weight", zeros({2, 3})}}), std::invalid_argument);  // missing bias
  nn::NamedTensors extra = lin.state_dict();
  extra.emplace_back("gamma", zeros({1}));
  EXPECT_THROW(lin.load_state_dict(extra), std::invalid_argument);
  EXPECT_NO_THROW(lin.load_state_dict(extra, /*strict=*/false));
}

// A file written by Python's safetensors library (when it is installed) opens here, and ours there.
TEST(Safetensors, InteroperatesWithPythonSafetensorsWhenInstalled) {
  if (std::system("/usr/bin/python3 -c 'import safetensors.torch' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3 safetensors is not installed";
  fs::path ours = temp("ours");
  nn::save_safetensors(ours, {{"a", tensor({{1.0, 2.0}, {3.0, 4.0}})}, {"b", tensor({5, 6})}});
  std::string cmd = "/usr/bin/python3 -c \"import safetensors.torch as s; t = s.load_file('" + ours.string() +
                    "'); assert t['a'].tolist() == [[1.0, 2.0], [3.0, 4.0]] and t['b'].tolist() == [5, 6]\"";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  fs::remove(ours);
}

// A file laid out by a Python script from the format's description (tests/reference/make_safetensors_fixture.py).
TEST(Safetensors, OpensAFileWrittenByPython) {
  nn::Checkpoint ck = nn::load_safetensors(std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/safetensors/python.safetensors");
  ASSERT_EQ(ck.tensors.size(), 2u);
  EXPECT_EQ(ck.metadata.at("source"), "torch");
  EXPECT_TRUE(equal(ck.tensors[0].second, tensor({{0.5, -1.0, 2.0}, {4.0, 8.0, -16.0}})));
  EXPECT_TRUE(equal(ck.tensors[1].second, tensor({1, 2, 3})));
}

}  // namespace
