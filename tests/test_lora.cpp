// test_lora.cpp — LoRA (nn/layers.h LoRA, nn/lora.h): the adapted Linear's backward gradchecked in float64
// (batched, broadcast and non-contiguous inputs), a fresh adapter changing nothing, only the adapters
// training, their checkpoint naming the base file, and merging.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include <fmt/format.h>

#include <unistd.h>

#include "autograd/inspect/gradcheck.h"
#include "nn/gpt2.h"
#include "nn/lora.h"
#include "optim/optim.h"
#include "test_helpers.h"
#include "test_process.h"

#ifndef SCRATCHGRAD_SOURCE_DIR
#define SCRATCHGRAD_SOURCE_DIR "/work/main"
#endif

namespace {

using namespace autograd;
using autograd::inspect::gradcheck;
using testing_helpers::leaf;
using testing_helpers::sliced_leaf;
using testing_helpers::transposed_leaf;
using Inputs = std::vector<Tensor>;

const std::string kBase = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/gpt2/tiny_gpt2.safetensors";

std::string slurp_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// An adapted Linear (in 3, out 4, rank 2, alpha 3) with every tensor taken from the gradcheck's inputs:
// x, weight, bias, A, B. The base weights require grad here too, so their backward through the sum is
// checked along with the adapter's.
Tensor adapted_linear(const Inputs& x) {
  nn::Linear layer(3, 4);
  layer.add_lora(2, 3.0);
  layer.weight = x[1];
  layer.bias = x[2];
  layer.lora->A = x[3];
  layer.lora->B = x[4];
  return layer(x[0]);
}

TEST(GradcheckLora, TheAdaptedLinearsBackward) {
  EXPECT_GRADCHECK(adapted_linear, Inputs{leaf({2, 3}, 1), leaf({4, 3}, 2), leaf({4}, 3), leaf({2, 3}, 4), leaf({4, 2}, 5)});
  // batched input, and B non-zero so that A's gradient is not zero
  EXPECT_GRADCHECK(adapted_linear,
                   Inputs{leaf({2, 5, 3}, 6), leaf({4, 3}, 7), leaf({4}, 8), leaf({2, 3}, 9), leaf({4, 2}, 10)});
  // non-contiguous everything
  EXPECT_GRADCHECK(adapted_linear, Inputs{transposed_leaf({2, 3}, 11), transposed_leaf({4, 3}, 12), sliced_leaf({4}, 13),
                                          transposed_leaf({2, 3}, 14), sliced_leaf({4, 2}, 15)});
  // a broadcast input: one row expanded (stride 0) over a batch of 3
  EXPECT_GRADCHECK([](const Inputs& x) { return adapted_linear({x[0].expand({3, 2, 3}), x[1], x[2], x[3], x[4]}); },
                   Inputs{leaf({1, 2, 3}, 16), leaf({4, 3}, 17), leaf({4}, 18), leaf({2, 3}, 19), leaf({4, 2}, 20)});
}

TEST(GradcheckLora, TheCheckerSeesAWrongScale) {
  // the same function with the scale applied twice differs, so the check above can fail
  Inputs in{leaf({2, 3}, 21), leaf({4, 3}, 22), leaf({4}, 23), leaf({2, 3}, 24), leaf({4, 2}, 25)};
  const Tensor right = adapted_linear(in);
  const Tensor doubled = linear(in[0], in[1], in[2]) + linear(linear(in[0], in[3]), in[4]) * (1.5 * 1.5);
  EXPECT_GT((right - doubled).abs().max().item(), 1e-3);
}

TEST(Lora, AFreshAdapterChangesNothingAndOnlyAdaptersTrain) {
  auto model = nn::load_gpt2(kBase);
  const Tensor ids = from_vector(std::vector<int64_t>{3, 14, 15, 9, 26, 5, 35, 8}, {1, 8});
  Tensor before;
  {
    NoGradGuard no_grad;
    before = (*model)(ids);
  }
  const nn::NamedTensors adapters = nn::add_lora(*model, {.rank = 4, .alpha = 8, .targets = {"attn", "mlp"}});
  ASSERT_EQ(adapters.size(), 2u * 6 * 2);  // 2 blocks × 6 layers × (A, B)
  EXPECT_EQ(adapters[0].first, "trf_blocks.0.att.W_query.lora.A");
  for (const auto& [name, p] : model->named_parameters())
    EXPECT_EQ(p.requires_grad(), name.find(".lora.") != std::string::npos) << name;
  {
    NoGradGuard no_grad;
    const std::vector<float> after = (*model)(ids).to_vector<float>(), was = before.to_vector<float>();
    for (size_t i = 0; i < after.size(); ++i) ASSERT_NEAR(after[i], was[i], 1e-6 * (1 + std::abs(was[i]))) << i;
  }

  // a few AdamW steps on the adapters alone: the loss falls, the base weights keep every bit
  const std::vector<float> wte = model->tok_emb->weight.to_vector<float>();
  const std::vector<float> c_fc = model->trf_blocks->operator[](1).ff->expand->weight.to_vector<float>();
  std::vector<Tensor> params;
  for (const auto& [name, p] : adapters) params.push_back(p);
  optim::AdamW opt(params, {.lr = 1e-2, .weight_decay = 0.0});
  const Tensor targets = from_vector(std::vector<int64_t>{14, 15, 9, 26, 5, 35, 8, 1}, {8});
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    opt.zero_grad();
    Tensor loss = cross_entropy((*model)(ids).view({8, 50}), targets);
    loss.backward();
    EXPECT_FALSE(model->tok_emb->weight.grad().defined()) << "the frozen embedding gets no gradient";
    opt.step();
    (step == 0 ? first : last) = loss.item();
  }
  EXPECT_LT(last, first - 0.5);
  EXPECT_EQ(model->tok_emb->weight.to_vector<float>(), wte);
  EXPECT_EQ(model->trf_blocks->operator[](1).ff->expand->weight.to_vector<float>(), c_fc);
}

// A model with trained (non-zero) adapters on both targets.
std::unique_ptr<nn::GPTModel> adapted_model(const nn::LoraConfig& config) {
  auto model = nn::load_gpt2(kBase);
  manual_seed(8);
  for (auto& [name, p] : nn::add_lora(*model, config)) {
    NoGradGuard no_grad;
    normal_(p, 0.0, 0.3);
  }
  return model;
}

TEST(Lora, AdaptersCheckpointNamesItsBaseAndLoadsOntoIt) {
  const nn::LoraConfig config{.rank = 2, .alpha = 5, .targets = {"mlp", "attn"}};
  auto model = adapted_model(config);
  const std::string path = ::testing::TempDir() + "lora_" + std::to_string(::getpid()) + ".safetensors";
  nn::save_lora(path, *model, config, nn::lora_base(kBase));
  const nn::LoraCheckpoint file = nn::load_lora(path);
  EXPECT_EQ(file.base_path, kBase);
  EXPECT_EQ(file.config.rank, 2);
  EXPECT_EQ(file.config.alpha, 5.0);
  EXPECT_EQ(file.config.targets, (std::vector<std::string>{"mlp", "attn"}));
  EXPECT_EQ(file.checkpoint.tensors.size(), nn::lora_parameters(*model).size()) << "adapters only";

  auto reloaded = nn::load_gpt2(file.base_path);
  nn::apply_lora(*reloaded, file, path);
  NoGradGuard no_grad;
  const Tensor ids = from_vector(std::vector<int64_t>{1, 2, 3, 4}, {1, 4});
  EXPECT_EQ((*reloaded)(ids).to_vector<float>(), (*model)(ids).to_vector<float>());

  // a base of another shape is refused, naming the tensor
  nn::LoraCheckpoint wrong = file;
  for (auto& [name, t] : wrong.checkpoint.tensors)
    if (name == "trf_blocks.0.ff.layers.0.lora.A") t = zeros({2, 31});
  auto base = nn::load_gpt2(kBase);
  try {
    nn::apply_lora(*base, wrong, path);
    FAIL() << "no error";
  } catch (const nn::CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("'trf_blocks.0.ff.layers.0.lora.A' has shape [2, 31], the base model needs [2, 32]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(nn::load_lora(kBase), nn::CheckpointError);  // not an adapters file
  std::remove(path.c_str());
}

// A file with these bytes, in this test process's temporary folder.
std::string file_with(const std::string& name, const std::string& bytes) {
  const std::string path = testing_process::scratch("lora_" + name).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}

TEST(LoraBase, TheFingerprintIsTheSizeAndAHashOfEveryByte) {
  // FNV-1a's step over 8-byte little-endian words, then the tail's bytes: computed here the long way
  auto expected = [](const std::string& bytes) {
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i = 0;
    for (; i + 8 <= bytes.size(); i += 8) {
      uint64_t w = 0;
      for (int k = 7; k >= 0; --k) w = (w << 8) | static_cast<unsigned char>(bytes[i + size_t(k)]);
      h = (h ^ w) * 0x100000001b3ull;
    }
    for (; i < bytes.size(); ++i) h = (h ^ static_cast<unsigned char>(bytes[i])) * 0x100000001b3ull;
    return fmt::format("{:016x}", h);
  };
  std::string bytes;
  for (int i = 0; i < (1 << 20) + 13; ++i) bytes += char(i * 7 + (i >> 9));  // past one read's chunk, with a tail
  for (size_t size : {size_t(0), size_t(1), size_t(7), size_t(8), size_t(9), size_t(1) << 20, bytes.size()}) {
    const nn::FileFingerprint f = nn::fingerprint_file(file_with("fp", bytes.substr(0, size)));
    EXPECT_EQ(f.bytes, size);
    EXPECT_EQ(f.hash, expected(bytes.substr(0, size))) << size;
  }
  // one changed byte anywhere changes it, a word's or the tail's
  const std::string whole = nn::fingerprint_file(file_with("fp", bytes)).hash;
  for (size_t at : {size_t(0), size_t(5), size_t(1) << 19, bytes.size() - 1}) {
    std::string changed = bytes;
    changed[at] ^= 1;
    EXPECT_NE(nn::fingerprint_file(file_with("fp", changed)).hash, whole) << at;
  }
  EXPECT_THROW_WITH(nn::fingerprint_file("/nonexistent/base.safetensors"), nn::CheckpointError,
                    "/nonexistent/base.safetensors: cannot open");
  EXPECT_THROW_WITH(nn::fingerprint_file("/dev/zero"), nn::CheckpointError, "/dev/zero: is not a regular file");
}

TEST(LoraBase, AdaptersOnlyLoadWithTheBaseTheyWereTrainedOn) {
  const nn::LoraConfig config{.rank = 2, .alpha = 5, .targets = {"attn"}};
  auto model = adapted_model(config);
  const std::string base = file_with("base", slurp_file(kBase));
  const std::string path = ::testing::TempDir() + "lora_base_" + std::to_string(::getpid()) + ".safetensors";
  nn::save_lora(path, *model, config, nn::lora_base(base));
  const nn::LoraCheckpoint file = nn::load_lora(path);
  ASSERT_TRUE(file.base_file);
  EXPECT_EQ(*file.base_file, nn::fingerprint_file(kBase)) << "a copy is the same file";

  // the same size, one byte changed: refused, naming both files and both fingerprints
  std::string changed = slurp_file(kBase);
  changed[changed.size() - 5] ^= 0x40;
  file_with("base", changed);
  const nn::FileFingerprint now = nn::fingerprint_file(base);
  EXPECT_THROW_WITH(nn::load_lora(path), nn::CheckpointError, path, base,
                    fmt::format("is not the file the adapters were trained on: that one had {} bytes and hash {}, this "
                                "one has {} bytes and hash {}",
                                file.base_file->bytes, file.base_file->hash, now.bytes, now.hash));
  // another base given instead (merge --base) is held to the same
  EXPECT_THROW_WITH(nn::load_lora(path, base), nn::CheckpointError, "is not the file the adapters were trained on");
  EXPECT_EQ(nn::load_lora(path, kBase).base_path, kBase);
  // read_lora alone does not look at the base
  EXPECT_EQ(nn::read_lora(nn::load_safetensors(path), path).base_path, base);

  // a file from before the base's fingerprint was recorded has nothing to compare: it loads
  nn::Checkpoint old = nn::load_safetensors(path);
  old.metadata.erase("base_bytes");
  old.metadata.erase("base_hash");
  nn::save_safetensors(path, old.tensors, old.metadata);
  EXPECT_FALSE(nn::load_lora(path).base_file);
  std::remove(path.c_str());
}

TEST(LoraBase, TheMetadataIsReadWholeAndAlphaIsPositive) {
  const nn::LoraConfig config{.rank = 2, .alpha = 5, .targets = {"attn"}};
  auto model = adapted_model(config);
  const std::string path = ::testing::TempDir() + "lora_meta_" + std::to_string(::getpid()) + ".safetensors";
  nn::save_lora(path, *model, config, nn::lora_base(kBase));
  auto with = [&](const std::string& key, const std::string& value) {
    nn::Checkpoint ck = nn::load_safetensors(path);
    ck.metadata[key] = value;
    return ck;
  };
  for (const char* alpha : {"-5", "0", "nan", "inf", "5x", ""})
    EXPECT_THROW_WITH(nn::read_lora(with("alpha", alpha), path), nn::CheckpointError, "LoRA metadata 'alpha'",
                      "not a number above 0");
  for (const char* rank : {"0", "-2", "2x", " 2", "2.0", "99999999999999999999"})
    EXPECT_THROW_WITH(nn::read_lora(with("rank", rank), path), nn::CheckpointError, "LoRA metadata 'rank'",
                      "not a whole number of at least 1");
  EXPECT_THROW_WITH(nn::read_lora(with("targets", "attn,head"), path), nn::CheckpointError, "LoRA metadata 'targets'",
                    "'head' is not a target");
  EXPECT_THROW_WITH(nn::read_lora(with("base_bytes", "12x"), path), nn::CheckpointError, "'base_bytes' '12x'");
  nn::Checkpoint no_rank = nn::load_safetensors(path);
  no_rank.metadata.erase("rank");
  EXPECT_THROW_WITH(nn::read_lora(std::move(no_rank), path), nn::CheckpointError, "LoRA metadata has no 'rank'");
  // an adapter holding NaN (a run that diverged) is refused, naming it
  nn::Checkpoint nan = nn::load_safetensors(path);
  nan.tensors[0].second = nan.tensors[0].second.clone().fill_(std::nan(""));
  EXPECT_THROW_WITH(nn::read_lora(std::move(nan), path), nn::CheckpointError, "NaN or infinite");
  // a rank no layer of the base has room for is refused before anything is allocated
  nn::LoraCheckpoint huge = nn::read_lora(nn::load_safetensors(path), path);
  huge.config.rank = 4'000'000'000'000;
  auto base = nn::load_gpt2(kBase);
  EXPECT_THROW_WITH(nn::apply_lora(*base, huge, path), nn::CheckpointError,
                    "LoRA rank 4000000000000 is larger than the adapted layers of its base (width 32)");
  std::remove(path.c_str());
}

TEST(Lora, MergingGivesTheSameModelWithoutAdapters) {
  auto model = adapted_model({.rank = 3, .alpha = 6, .targets = {"attn", "mlp"}});
  const Tensor ids = from_vector(std::vector<int64_t>{7, 7, 1, 0, 49, 20}, {1, 6});
  NoGradGuard no_grad;
  const Tensor adapted = (*model)(ids);
  nn::merge_lora(*model);
  EXPECT_TRUE(nn::lora_parameters(*model).empty());
  EXPECT_FALSE(model->trf_blocks->operator[](0).att->W_key->lora);
  const std::vector<float> merged = (*model)(ids).to_vector<float>(), want = adapted.to_vector<float>();
  for (size_t i = 0; i < merged.size(); ++i) EXPECT_NEAR(merged[i], want[i], 2e-5 * (1 + std::abs(want[i]))) << i;
  // and it writes out as a GPT-2 file again
  EXPECT_EQ(nn::gpt2_state_dict(*model).size(), 2 + 12 * 2 + 2u);
}

TEST(Lora, BadConfigurationsAreRefused) {
  EXPECT_THROW(nn::parse_lora_targets("attn,ffn"), std::invalid_argument);
  EXPECT_THROW(nn::parse_lora_targets(""), std::invalid_argument);
  EXPECT_EQ(nn::parse_lora_targets("mlp,attn,mlp"), (std::vector<std::string>{"mlp", "attn"}));
  auto model = nn::load_gpt2(kBase);
  EXPECT_THROW(nn::add_lora(*model, {.rank = 0}), std::invalid_argument);
  nn::Linear layer(3, 4);
  layer.add_lora(1, 1.0);
  EXPECT_THROW(layer.add_lora(1, 1.0), std::invalid_argument);
  nn::Linear plain(3, 4);
  EXPECT_THROW(plain.merge_lora(), std::invalid_argument);
}

}  // namespace
