// test_gpt2.cpp — GPT-2's Hugging Face layout into GPTModel (nn/gpt2.h): a small random GPT-2 written by
// tests/reference/make_gpt2_fixture.py with HF's names and Conv1D layouts, loaded here, must give the logits
// of the PyTorch GPT-2 forward that script writes from the architecture; and every kind of bad file is
// refused with a message that names the tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

#include <fmt/format.h>

#include <unistd.h>

#include "nn/gpt2.h"
#include "nn/safetensors.h"
#include "test_helpers.h"

#ifndef SCRATCHGRAD_SOURCE_DIR
#define SCRATCHGRAD_SOURCE_DIR "/work/main"
#endif

namespace {

using namespace autograd;

const std::string kDir = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/gpt2/";
const std::string kModel = kDir + "tiny_gpt2.safetensors";

Tensor expected(const std::string& name) {
  static const nn::Checkpoint ck = nn::load_safetensors(kDir + "tiny_gpt2_logits.safetensors");
  for (const auto& [n, t] : ck.tensors)
    if (n == name) return t;
  throw std::runtime_error("fixture has no " + name);
}

// Both are float32 sums of the same products in different orders (BLIS blocks, PyTorch's kernels): each
// logit may differ by a few float32 roundings of the magnitudes it adds up, never by more.
void expect_logits_match(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.shape(), want.shape());
  const std::vector<float> g = got.contiguous().to_vector<float>(), w = want.to_vector<float>();
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double error = std::abs(double(g[i]) - double(w[i])) / (1.0 + std::abs(double(w[i])));
    worst = std::max(worst, error);
  }
  EXPECT_LT(worst, 64 * 1.2e-7) << "worst relative difference of the logits";
}

std::string temp_file(const std::string& tag) {
  return ::testing::TempDir() + "gpt2_" + tag + "_" + std::to_string(::getpid()) + ".safetensors";
}

// The message of the CheckpointError that loading `ck` throws (or "no error").
std::string load_error(const nn::Checkpoint& ck, int64_t heads = 0) {
  try {
    nn::gpt2_from_checkpoint(ck, "model.safetensors", heads);
  } catch (const nn::CheckpointError& e) {
    return e.what();
  }
  return "no error";
}

nn::Checkpoint fixture() { return nn::load_safetensors(kModel); }

Tensor& tensor_named(nn::Checkpoint& ck, const std::string& name) {
  for (auto& [n, t] : ck.tensors)
    if (n == name) return t;
  throw std::runtime_error("no " + name);
}

TEST(Gpt2Import, ConfigurationComesFromTheShapes) {
  auto model = nn::load_gpt2(kModel);
  EXPECT_EQ(model->cfg.vocab_size, 50);
  EXPECT_EQ(model->cfg.context_length, 16);
  EXPECT_EQ(model->cfg.emb_dim, 32);
  EXPECT_EQ(model->cfg.n_layers, 2);
  EXPECT_EQ(model->cfg.n_heads, 4);  // from the metadata's n_head
  EXPECT_TRUE(model->cfg.qkv_bias);
  EXPECT_EQ(&model->out_head->weight.impl(), &model->tok_emb->weight.impl()) << "the head is tied to wte";
  EXPECT_FALSE(model->is_training());
}

TEST(Gpt2Import, LogitsMatchPyTorchsGpt2Forward) {
  auto model = nn::load_gpt2(kModel);
  NoGradGuard no_grad;
  expect_logits_match((*model)(expected("ids")), expected("logits"));
}

TEST(Gpt2Import, AcceptsTheTransformerPrefix) {
  nn::Checkpoint ck = fixture();
  for (auto& [name, t] : ck.tensors) name = "transformer." + name;
  auto model = nn::gpt2_from_checkpoint(ck, "prefixed.safetensors");
  NoGradGuard no_grad;
  expect_logits_match((*model)(expected("ids")), expected("logits"));
}

TEST(Gpt2Import, WritingBackGivesTheFilesTensorsBitForBit) {
  const nn::Checkpoint ck = fixture();
  auto model = nn::gpt2_from_checkpoint(ck, kModel);
  const nn::NamedTensors written = nn::gpt2_state_dict(*model);
  size_t compared = 0;
  for (const auto& [name, t] : written)
    for (const auto& [n, original] : ck.tensors)
      if (n == name) {
        EXPECT_EQ(t.contiguous().to_vector<float>(), original.to_vector<float>()) << name;
        ++compared;
      }
  EXPECT_EQ(compared, written.size());
  EXPECT_EQ(written.size(), 2 + 12 * 2 + 2u);

  // and a file written from it loads as the same model
  const std::string path = temp_file("roundtrip");
  nn::save_safetensors(path, written, nn::gpt2_metadata(*model));
  auto reloaded = nn::load_gpt2(path);
  std::remove(path.c_str());
  NoGradGuard no_grad;
  EXPECT_EQ((*reloaded)(expected("ids")).to_vector<float>(), (*model)(expected("ids")).to_vector<float>());
}

TEST(Gpt2Import, LoadingFromTheFileGivesTheModelOfTheCheckpoint) {
  // load_gpt2 reads each tensor straight into its parameter; gpt2_from_checkpoint copies from memory
  auto from_file = nn::load_gpt2(kModel);
  auto from_memory = nn::gpt2_from_checkpoint(fixture(), kModel);
  const nn::NamedTensors a = from_file->named_parameters(), b = from_memory->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.contiguous().to_vector<float>(), b[i].second.contiguous().to_vector<float>()) << a[i].first;
  }
  EXPECT_EQ(&from_file->out_head->weight.impl(), &from_file->tok_emb->weight.impl()) << "one matrix for wte and the head";
}

TEST(Gpt2Import, AFileWithABadTensorIsRefusedBeforeItsDataIsRead) {
  nn::Checkpoint ck = fixture();
  tensor_named(ck, "h.0.mlp.c_fc.weight") = zeros({128, 32});
  const std::string path = temp_file("badshape");
  nn::save_safetensors(path, ck.tensors, ck.metadata);
  std::string message = "no error";
  try {
    nn::load_gpt2(path);
  } catch (const nn::CheckpointError& e) {
    message = e.what();
  }
  std::remove(path.c_str());
  EXPECT_NE(message.find("'h.0.mlp.c_fc.weight' has shape [128, 32], expected [32, 128]"), std::string::npos) << message;
}

TEST(Gpt2Import, AWrongShapeNamesTheTensorAndBothShapes) {
  nn::Checkpoint ck = fixture();
  tensor_named(ck, "h.1.attn.c_attn.weight") = zeros({32, 90});
  const std::string message = load_error(ck);
  EXPECT_NE(message.find("model.safetensors"), std::string::npos) << message;
  EXPECT_NE(message.find("'h.1.attn.c_attn.weight'"), std::string::npos) << message;
  EXPECT_NE(message.find("[32, 90]"), std::string::npos) << message;
  EXPECT_NE(message.find("[32, 96]"), std::string::npos) << message;

  // a transposed (Linear-style) weight is a wrong shape too, not silently accepted
  ck = fixture();
  tensor_named(ck, "h.0.mlp.c_fc.weight") = zeros({128, 32});
  EXPECT_NE(load_error(ck).find("'h.0.mlp.c_fc.weight' has shape [128, 32], expected [32, 128]"), std::string::npos)
      << load_error(ck);

  ck = fixture();
  tensor_named(ck, "wpe.weight") = zeros({16, 31});
  EXPECT_NE(load_error(ck).find("'wpe.weight' has shape [16, 31], expected [16, 32]"), std::string::npos) << load_error(ck);
}

TEST(Gpt2Import, AMissingTensorIsNamed) {
  nn::Checkpoint ck = fixture();
  std::erase_if(ck.tensors, [](const auto& entry) { return entry.first == "h.1.mlp.c_fc.bias"; });
  EXPECT_NE(load_error(ck).find("'h.1.mlp.c_fc.bias' is missing"), std::string::npos) << load_error(ck);

  ck = fixture();
  std::erase_if(ck.tensors, [](const auto& entry) { return entry.first == "ln_f.weight"; });
  EXPECT_NE(load_error(ck).find("'ln_f.weight' is missing"), std::string::npos) << load_error(ck);

  ck = fixture();  // a gap in the blocks: h.1 missing entirely while h.2 exists
  for (auto& [name, t] : ck.tensors)
    if (name.starts_with("h.1.")) name.replace(0, 4, "h.2.");
  EXPECT_NE(load_error(ck).find("GPT-2 block h.1 is missing: the blocks are numbered h.0 up, and the file has h.2"),
            std::string::npos)
      << load_error(ck);

  ck = fixture();  // one tensor of a block the file has not got
  ck.tensors.emplace_back("h.2.ln_1.weight", zeros({32}));
  EXPECT_NE(load_error(ck).find("'h.2.ln_1.bias' is missing"), std::string::npos) << load_error(ck);
}

TEST(Gpt2Import, OtherFilesAndTensorsAreRefused) {
  nn::Checkpoint ck = fixture();
  ck.tensors.emplace_back("h.0.attn.extra", zeros({2}));
  EXPECT_NE(load_error(ck).find("unexpected tensor 'h.0.attn.extra'"), std::string::npos) << load_error(ck);

  ck = fixture();
  std::erase_if(ck.tensors, [](const auto& entry) { return entry.first == "wte.weight"; });
  EXPECT_FALSE(nn::is_gpt2_checkpoint(ck));
  EXPECT_NE(load_error(ck).find("not a GPT-2 checkpoint"), std::string::npos) << load_error(ck);

  ck = fixture();
  tensor_named(ck, "ln_f.bias") = zeros({32}, DType::Int64);
  EXPECT_NE(load_error(ck).find("'ln_f.bias' has dtype int64"), std::string::npos) << load_error(ck);
}

TEST(Gpt2Import, TheHeadCountComesFromTheMetadataTheArgumentOrTheHeadWidth) {
  nn::Checkpoint ck = fixture();
  EXPECT_EQ(nn::gpt2_from_checkpoint(ck, kModel)->cfg.n_heads, 4);     // the metadata's n_head
  EXPECT_EQ(nn::gpt2_from_checkpoint(ck, kModel, 4)->cfg.n_heads, 4);  // a count that agrees with it
  EXPECT_NE(load_error(ck, 8).find("its metadata gives n_head 4, not the 8 heads asked for"), std::string::npos)
      << load_error(ck, 8);
  ck.metadata.erase("n_head");  // 32 / 64 heads: none, so the file needs the count from elsewhere
  EXPECT_EQ(nn::gpt2_from_checkpoint(ck, kModel, 8)->cfg.n_heads, 8);
  EXPECT_NE(load_error(ck).find("cannot split emb_dim 32 into 0 heads (the file does not give its head count"),
            std::string::npos)
      << load_error(ck);
  EXPECT_NE(load_error(ck, 3).find("cannot split emb_dim 32 into 3 heads"), std::string::npos) << load_error(ck, 3);
  // read whole: not "four", not "4x" (once read as 4), not 0
  for (const char* bad : {"four", "4x", " 4", "0", "-4", "99999999999999999999"}) {
    ck.metadata["n_head"] = bad;
    EXPECT_NE(load_error(ck).find("metadata 'n_head' is not a number of heads"), std::string::npos) << bad << ": " << load_error(ck);
  }
  ck.metadata["n_head"] = "5";
  EXPECT_NE(load_error(ck).find("cannot split emb_dim 32 into 5 heads (its metadata's n_head)"), std::string::npos)
      << load_error(ck);
}

TEST(Gpt2Import, NamesAreReadWithoutRecursionAndTheBlocksCountedFromTheFile) {
  nn::Checkpoint ck = fixture();  // 300,000 characters: std::regex recursed once per character
  ck.tensors.emplace_back("h.0.attn." + std::string(300000, 'x'), zeros({1}));
  EXPECT_NE(load_error(ck).find("unexpected tensor 'h.0.attn.xxxx"), std::string::npos) << load_error(ck).substr(0, 300);
  EXPECT_LT(load_error(ck).size(), 300u) << "the name is cut in the message";
  ck = fixture();  // a block a million on: h.2 missing, found without listing a million blocks' names
  ck.tensors.emplace_back("h.999999.ln_1.weight", zeros({32}));
  EXPECT_NE(load_error(ck).find("GPT-2 block h.2 is missing"), std::string::npos) << load_error(ck);
  for (const char* name : {"h.-1.ln_1.weight", "h.+1.ln_1.weight", "h.1e3.ln_1.weight", "h..ln_1.weight", "h.7",
                           "h.00.attn.bias"}) {
    ck = fixture();  // not a block's name (and not tolerated as a mask either)
    ck.tensors.emplace_back(name, zeros({32}));
    EXPECT_NE(load_error(ck).find(fmt::format("unexpected tensor '{}'", name)), std::string::npos) << load_error(ck);
  }
  ck = fixture();  // the masks some conversions keep are accepted, in any block the file has
  ck.tensors.emplace_back("h.1.attn.masked_bias", zeros({1}));
  ck.tensors.emplace_back("transformer.h.0.attn.masked_bias", zeros({1}));
  EXPECT_EQ(load_error(ck), "no error");
}

TEST(Gpt2Import, ValuesThatAreNotNumbersAreRefusedNamingTheTensor) {
  nn::Checkpoint ck = fixture();
  Tensor& w = tensor_named(ck, "h.0.attn.c_attn.weight");
  w = w.clone();
  w.data_ptr<float>()[100] = std::numeric_limits<float>::infinity();
  w.data_ptr<float>()[200] = std::nanf("");
  EXPECT_NE(load_error(ck).find("model.safetensors: tensor 'h.0.attn.c_attn.weight' holds 2 NaN or infinite values of "
                                "3072 (the file is damaged: a model with it computes NaN)"),
            std::string::npos)
      << load_error(ck);
  // read from the file, straight into the parameter (wte) or through a buffer (c_attn): the same check
  const std::string path = temp_file("nan");
  nn::save_safetensors(path, ck.tensors, ck.metadata);
  EXPECT_THROW_WITH(nn::load_gpt2(path), nn::CheckpointError, "tensor 'h.0.attn.c_attn.weight' holds 2 NaN");
  EXPECT_THROW_WITH(nn::inspect_gpt2_file(path), nn::CheckpointError, "tensor 'h.0.attn.c_attn.weight' holds 2 NaN");
  ck = fixture();
  tensor_named(ck, "wte.weight") = tensor_named(ck, "wte.weight").clone().fill_(std::nan(""));
  nn::save_safetensors(path, ck.tensors, ck.metadata);
  EXPECT_THROW_WITH(nn::load_gpt2(path), nn::CheckpointError, "tensor 'wte.weight' holds 1600 NaN");
  std::remove(path.c_str());
}

TEST(Gpt2Import, InspectingAFileDescribesItAsLoadingWould) {
  const nn::Gpt2FileInfo info = nn::inspect_gpt2_file(kModel);
  EXPECT_EQ(info.config.n_layers, 2);
  EXPECT_EQ(info.config.emb_dim, 32);
  EXPECT_EQ(info.config.vocab_size, 50);
  EXPECT_EQ(info.config.context_length, 16);
  EXPECT_EQ(info.config.n_heads, 4);
  EXPECT_TRUE(info.heads_in_file);
  EXPECT_EQ(info.parameters, nn::load_gpt2(kModel)->num_parameters());
  EXPECT_EQ(info.tensors.size(), fixture().tensors.size());
  // without n_head and at a width that is no multiple of 64, the head count is unknown (0), not an error
  nn::Checkpoint ck = fixture();
  ck.metadata.erase("n_head");
  const std::string path = temp_file("inspect");
  nn::save_safetensors(path, ck.tensors, ck.metadata);
  EXPECT_EQ(nn::inspect_gpt2_file(path).config.n_heads, 0);
  EXPECT_FALSE(nn::inspect_gpt2_file(path).heads_in_file);
  std::remove(path.c_str());
}

TEST(Gpt2Import, WithoutMetadataTheHeadsAre64Wide) {
  // as in every released GPT-2 (768/12 ... 1600/25): a file of emb_dim 128 and no n_head has 2 heads
  manual_seed(3);
  nn::GPTModel model(nn::GPTConfig{.vocab_size = 5, .context_length = 4, .emb_dim = 128, .n_heads = 2, .n_layers = 1,
                                   .drop_rate = 0.0, .qkv_bias = true});
  model.tie_weights();
  nn::Checkpoint ck;
  ck.tensors = nn::gpt2_state_dict(model);
  EXPECT_EQ(nn::gpt2_from_checkpoint(ck, "no-metadata")->cfg.n_heads, 2);
}

TEST(LlmcImport, TheSameWeightsFromLlmcsFormatGiveTheSameLogits) {
  const std::string path = kDir + "tiny_gpt2_llmc.bin";
  EXPECT_TRUE(nn::is_llmc_checkpoint(path));
  EXPECT_FALSE(nn::is_llmc_checkpoint(kModel));
  auto model = nn::load_llmc_gpt2(path);
  EXPECT_EQ(model->cfg.vocab_size, 50);  // not the padded 64
  EXPECT_EQ(model->cfg.n_heads, 4);
  EXPECT_EQ(&model->out_head->weight.impl(), &model->tok_emb->weight.impl());
  NoGradGuard no_grad;
  expect_logits_match((*model)(expected("ids")), expected("logits"));
  // the same numbers as the safetensors file's, bit for bit
  EXPECT_EQ((*model)(expected("ids")).to_vector<float>(), (*nn::load_gpt2(kModel))(expected("ids")).to_vector<float>());
}

TEST(LlmcImport, ATruncatedOrForeignFileIsRefused) {
  std::ifstream in(kDir + "tiny_gpt2_llmc.bin", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto message_for = [&](const std::string& contents) {
    const std::string path = temp_file("llmc");
    std::ofstream(path, std::ios::binary) << contents;
    std::string message = "no error";
    try {
      nn::load_llmc_gpt2(path);
    } catch (const nn::CheckpointError& e) {
      message = e.what();
    }
    std::remove(path.c_str());
    return message;
  };
  EXPECT_NE(message_for(bytes.substr(0, bytes.size() - 4)).find("implies 113152 bytes, the file has 113148"), std::string::npos)
      << message_for(bytes.substr(0, bytes.size() - 4));
  EXPECT_NE(message_for(bytes.substr(0, 100)).find("shorter than its 1024-byte header"), std::string::npos);
  std::string version = bytes;
  version[4] = 5;
  EXPECT_NE(message_for(version).find("version 5; only version 3"), std::string::npos) << message_for(version);
  std::string heads = bytes;
  heads[20] = 3;  // 32 is not divisible by 3 heads
  EXPECT_NE(message_for(heads).find("llm.c header is inconsistent"), std::string::npos) << message_for(heads);
  EXPECT_NE(message_for("not llm.c at all, but long enough? no").find("shorter than"), std::string::npos);
  // a value that is not a number, under llm.c's name for its tensor (qkvw: after wte, wpe, ln1w and ln1b)
  std::string nan = bytes;
  const float not_a_number = std::nanf("");
  std::memcpy(nan.data() + 1024 + 4 * (64 * 32 + 16 * 32 + 2 * 2 * 32 + 5), &not_a_number, 4);
  EXPECT_NE(message_for(nan).find("tensor 'qkvw' holds 1 NaN or infinite values of 6144"), std::string::npos)
      << message_for(nan);
}

TEST(LlmcImport, TheHeaderGivesTheHeadCount) {
  const std::string path = kDir + "tiny_gpt2_llmc.bin";
  EXPECT_EQ(nn::load_llmc_gpt2(path, 4)->cfg.n_heads, 4);
  EXPECT_THROW_WITH(nn::load_llmc_gpt2(path, 2), nn::CheckpointError, "its header gives 4 heads, not the 2 asked for");
  EXPECT_FALSE(nn::is_llmc_checkpoint("/dev/zero"));  // not a regular file: not read (a FIFO would block)
}

}  // namespace
