// test_hardening_files.cpp — model files against crafted input: GPT-2's safetensors, llm.c's .bin and LoRA
// adapters, read by generate, eval, train --init, train --resume, merge and info. Each bad file is refused
// with one line naming the file and the field (exit status 2), never a crash, an exception's text, a
// silently wrong answer or an overwritten input; and info describes every kind of file the others read.
//
// The Hardening.Refuses* tests here are part of docs/reliability.md's catalog (tests/test_catalog.cpp), so
// every file they refuse lives in the test's scratch folder (whose path the catalog writes as <tmp>).
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "autograd/autograd.h"
#include "nn/gpt2.h"
#include "nn/lora.h"
#include "nn/safetensors.h"
#include "test_helpers.h"
#include "test_process.h"

using namespace autograd;
namespace fs = std::filesystem;
using testing_process::scratch;
using testing_process::Shell;
using testing_process::slurp;

namespace {

const std::string kFixtures = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/reference/fixtures/gpt2/";
const std::string kTokenizerDir = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/tokenizer/gpt2";

Shell scratchgrad(const std::string& args) {
  return testing_process::shell(std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad " + args);
}

// Status 2, one short line on stderr naming `needle`, and no exception's own text.
void expect_refused(const Shell& r, const std::string& needle) {
  EXPECT_EQ(r.status, 2) << r.command << "\n" << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_LT(r.err.size(), 600u) << "a short line: " << r.err.substr(0, 600);
  EXPECT_NE(r.err.find("scratchgrad: error:"), std::string::npos) << r.err;
  for (const char* leak : {"internal error", "bad_alloc", "json.exception", "stoll", "regex"})
    EXPECT_EQ(r.err.find(leak), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
  const size_t program = r.command.find("/bin/scratchgrad ");
  const std::string call = program == std::string::npos ? r.command : r.command.substr(program + 5);
  testing_helpers::record_refusal(call, r.err.substr(0, r.err.find('\n')));
}

fs::path write_file(const std::string& name, const std::string& contents) {
  const fs::path p = scratch(name);
  std::ofstream(p, std::ios::binary | std::ios::trunc) << contents;
  return p;
}

// The fixture of tests/reference/make_gpt2_fixture.py (2 blocks, width 32, 4 heads in its metadata,
// context 16, a vocabulary of 50), with `edit` applied to its tensors and metadata, saved in scratch.
fs::path gpt2_file(const std::string& name, const std::function<void(nn::Checkpoint&)>& edit = {}) {
  nn::Checkpoint ck = nn::load_safetensors(kFixtures + "tiny_gpt2.safetensors");
  if (edit) edit(ck);
  const fs::path p = scratch(name);
  nn::save_safetensors(p.string(), ck.tensors, ck.metadata);
  return p;
}

Tensor& tensor_named(nn::Checkpoint& ck, const std::string& name) {
  for (auto& [n, t] : ck.tensors)
    if (n == name) return t;
  throw std::runtime_error("no " + name);
}

const fs::path& ids_file() {
  static const fs::path p = write_file("files_ids.txt", "1 2 3 4 5 6");
  return p;
}

const fs::path& corpus() {
  static const fs::path p = [] {
    std::string text;
    for (int i = 0; i < 20; ++i) text += "The cat sat on the mat, and the dog sat on the log. ";
    return write_file("files_corpus.txt", text);
  }();
  return p;
}

// What generate, eval, train --init and info say of a GPT-2 file: each must refuse it, naming `needle`.
void expect_every_command_refuses(const fs::path& file, const std::string& needle) {
  const std::string f = file.string();
  expect_refused(scratchgrad("generate --checkpoint " + f + " --prompt-ids 1 --tokens 2"), needle);
  expect_refused(scratchgrad("eval --checkpoint " + f + " --ids-file " + ids_file().string()), needle);
  expect_refused(scratchgrad("train --init " + f + " --text " + corpus().string()), needle);
  expect_refused(scratchgrad("info --checkpoint " + f), needle);
}

// A GPT-2 of width 16 and 2 heads with GPT-2's whole vocabulary (so that GPT-2's tokenizer reads text for
// it), drawn from `seed`; `record_heads`: its metadata gives n_head (else the file cannot say: 16 / 64 is 0).
void save_gpt2_vocabulary_model(const fs::path& p, uint64_t seed, bool record_heads) {
  manual_seed(seed);
  nn::GPTModel model(nn::GPTConfig{.vocab_size = 50257, .context_length = 32, .emb_dim = 16, .n_heads = 2,
                                   .n_layers = 2, .drop_rate = 0.0, .qkv_bias = true});
  model.tie_weights();
  std::map<std::string, std::string> metadata = nn::gpt2_metadata(model);
  if (!record_heads) metadata.erase("n_head");
  nn::save_safetensors(p.string(), nn::gpt2_state_dict(model), metadata);
}

}  // namespace

// ---------------------------------------------------------------- 1. names that crashed or blew up

TEST(Hardening, RefusesGpt2TensorNamesTooLongForGpt2) {
  // 300,000 characters: std::regex recursed once per character and overflowed the stack (SIGSEGV)
  const fs::path long_name = gpt2_file("files_long_name.safetensors", [](nn::Checkpoint& ck) {
    ck.tensors.emplace_back("h.0.attn." + std::string(300000, 'x'), zeros({1}));
  });
  expect_every_command_refuses(long_name, "(300009 characters)");
  // and a block number of 300,000 digits
  const fs::path long_number = gpt2_file("files_long_number.safetensors", [](nn::Checkpoint& ck) {
    ck.tensors.emplace_back("h." + std::string(300000, '7') + ".ln_1.weight", zeros({32}));
  });
  expect_every_command_refuses(long_number, "whose names are at most 128 characters");
}

TEST(Hardening, RefusesGpt2BlockNumbersThatAreNotBlocks) {
  // one stray block a million on: the blocks are numbered from the names the file has, so h.2 is missing
  // (it made the loader list 12 million expected names, 2 GB, before comparing any with the file)
  const fs::path stray = gpt2_file("files_stray_block.safetensors", [](nn::Checkpoint& ck) {
    ck.tensors.emplace_back("h.999999.ln_1.weight", zeros({32}));
  });
#if !defined(__SANITIZE_ADDRESS__)  // (AddressSanitizer's shadow memory cannot be mapped under ulimit -v)
  expect_refused(testing_process::shell("ulimit -v 1000000 && " + std::string(SCRATCHGRAD_BIN_DIR) +
                                        "/scratchgrad generate --prompt-ids 1 --checkpoint " + stray.string()),
                 "GPT-2 block h.2 is missing: the blocks are numbered h.0 up, and the file has h.999999");
#else  // the same call without the limit, so that docs/reliability.md's catalog lists it in every build
  expect_refused(scratchgrad("generate --prompt-ids 1 --checkpoint " + stray.string()),
                 "GPT-2 block h.2 is missing: the blocks are numbered h.0 up, and the file has h.999999");
#endif
  expect_refused(scratchgrad("info --checkpoint " + stray.string()), "GPT-2 block h.2 is missing");
  // numbers past int64, and numbers with a leading zero, name no block: tensors GPT-2 does not have
  const fs::path huge = gpt2_file("files_huge_block.safetensors", [](nn::Checkpoint& ck) {
    ck.tensors.emplace_back("h.99999999999999999999999.ln_1.weight", zeros({32}));
  });
  expect_refused(scratchgrad("info --checkpoint " + huge.string()), "unexpected tensor 'h.99999999999999999999999.ln_1.weight'");
  const fs::path zero = gpt2_file("files_zero_block.safetensors", [](nn::Checkpoint& ck) {
    for (auto& [name, t] : ck.tensors)
      if (name == "h.1.ln_1.weight") name = "h.01.ln_1.weight";
  });
  expect_refused(scratchgrad("info --checkpoint " + zero.string()), "GPT-2 tensor 'h.1.ln_1.weight' is missing");
  // the same tensor with and without the "transformer." prefix
  const fs::path twice = gpt2_file("files_twice.safetensors", [](nn::Checkpoint& ck) {
    ck.tensors.emplace_back("transformer.ln_f.bias", zeros({32}));
  });
  expect_refused(scratchgrad("info --checkpoint " + twice.string()), "GPT-2 tensor 'ln_f.bias' appears twice");
}

// ---------------------------------------------------------------- 2. values, dtypes and numbers

TEST(Hardening, RefusesGpt2WeightsThatAreNotNumbers) {
  // generate printed "0 0 0 ..." (NaN logits) with exit status 0
  const fs::path nan_file = gpt2_file("files_nan.safetensors", [](nn::Checkpoint& ck) {
    Tensor& w = tensor_named(ck, "h.1.mlp.c_fc.weight");
    w = w.clone();
    w.data_ptr<float>()[7] = std::nanf("");
  });
  expect_every_command_refuses(nan_file, "tensor 'h.1.mlp.c_fc.weight' holds 1 NaN or infinite values of 4096 (the file "
                                         "is damaged: a model with it computes NaN)");
  const fs::path inf_file = gpt2_file("files_inf.safetensors", [](nn::Checkpoint& ck) {
    tensor_named(ck, "wte.weight") = tensor_named(ck, "wte.weight").clone().fill_(-INFINITY);
  });
  expect_refused(scratchgrad("generate --prompt-ids 1 --checkpoint " + inf_file.string()),
                 "tensor 'wte.weight' holds 1600 NaN or infinite values of 1600");
  // a tensor the model does not use (the attention mask some conversions keep) is not its weights
  const fs::path mask = gpt2_file("files_mask.safetensors", [](nn::Checkpoint& ck) {
    ck.tensors.emplace_back("h.0.attn.masked_bias", full({1}, -INFINITY));
  });
  EXPECT_EQ(scratchgrad("generate --prompt-ids 1 --tokens 2 --checkpoint " + mask.string()).status, 0);

  // llm.c's .bin: its first float (wte's) made NaN
  std::string bin = slurp(kFixtures + "tiny_gpt2_llmc.bin");
  const float nan = std::nanf("");
  std::memcpy(bin.data() + 1024, &nan, 4);
  const fs::path llmc = write_file("files_nan_llmc.bin", bin);
  expect_refused(scratchgrad("generate --prompt-ids 1 --checkpoint " + llmc.string()), "tensor 'wte' holds 1 NaN");
  expect_refused(scratchgrad("info --checkpoint " + llmc.string()), "tensor 'wte' holds 1 NaN");
}

TEST(Hardening, RefusesGpt2TensorsOfOtherDtypesAndMetadataNotWhole) {
  // F16 (and BF16): not read; the message names the tensor, its dtype and the dtypes that are
  const std::string header = R"({"wte.weight":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}})";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
  const fs::path f16 = write_file("files_f16.safetensors", bytes + header + std::string(8, '\0'));
  expect_refused(scratchgrad("generate --prompt-ids 1 --checkpoint " + f16.string()),
                 "tensor 'wte.weight' has unsupported dtype \"F16\" (the dtypes read are F32, F64, I64, BOOL and BF16)");
  const fs::path i64 = gpt2_file("files_i64.safetensors", [](nn::Checkpoint& ck) {
    tensor_named(ck, "ln_f.bias") = zeros({32}, DType::Int64);
  });
  expect_every_command_refuses(i64, "GPT-2 tensor 'ln_f.bias' has dtype int64, expected floating point");
  // n_head read whole: "2x" is not 2
  const fs::path heads = gpt2_file("files_2x_heads.safetensors", [](nn::Checkpoint& ck) { ck.metadata["n_head"] = "2x"; });
  expect_refused(scratchgrad("generate --prompt-ids 1 --checkpoint " + heads.string()),
                 "metadata 'n_head' is not a number of heads: '2x'");
}

namespace {

// Adapters (rank 2, alpha 4, on attn and mlp, non-zero) for the GPT-2 file `base`, saved with `edit`
// applied to their metadata (and re-signed: the checksum is valid).
fs::path lora_file(const std::string& name, const fs::path& base,
                   const std::function<void(std::map<std::string, std::string>&)>& edit = {}) {
  auto model = nn::load_gpt2(base.string());
  manual_seed(4);
  const nn::LoraConfig config{.rank = 2, .alpha = 4, .targets = {"attn", "mlp"}};
  for (auto& [n, p] : nn::add_lora(*model, config)) {
    NoGradGuard no_grad;
    normal_(p, 0.0, 0.3);
  }
  const fs::path p = scratch(name);
  nn::save_lora(p.string(), *model, config, nn::lora_base(base.string()));
  if (edit) {
    nn::Checkpoint ck = nn::load_safetensors(p.string());
    edit(ck.metadata);
    nn::save_safetensors(p.string(), ck.tensors, ck.metadata);
  }
  return p;
}

}  // namespace

TEST(Hardening, RefusesLoraFilesWithBadNumbers) {
  const fs::path base = gpt2_file("files_lora_base.safetensors");
  const fs::path out = scratch("files_lora_merged.safetensors");
  auto merge = [&](const fs::path& lora) { return scratchgrad("merge --lora " + lora.string() + " --out " + out.string()); };
  // a re-signed alpha of 0 or below loaded, and flipped the adapters' update
  expect_refused(merge(lora_file("files_alpha.safetensors", base, [](auto& m) { m["alpha"] = "-16"; })),
                 "LoRA metadata 'alpha' is '-16', not a number above 0");
  expect_refused(merge(lora_file("files_alpha0.safetensors", base, [](auto& m) { m["alpha"] = "0"; })),
                 "LoRA metadata 'alpha' is '0', not a number above 0");
  expect_refused(merge(lora_file("files_alpha_nan.safetensors", base, [](auto& m) { m["alpha"] = "nan"; })),
                 "LoRA metadata 'alpha' is 'nan'");
  // numbers are read whole: "2x" was read as 2
  expect_refused(merge(lora_file("files_rank.safetensors", base, [](auto& m) { m["rank"] = "2x"; })),
                 "LoRA metadata 'rank' is '2x', not a whole number of at least 1");
  // a rank no layer of the base has room for, refused before the adapters are allocated
  expect_refused(merge(lora_file("files_rank_huge.safetensors", base, [](auto& m) { m["rank"] = "999999999999"; })),
                 "LoRA rank 999999999999 is larger than the adapted layers of its base (width 32)");
  expect_refused(merge(lora_file("files_hash.safetensors", base, [](auto& m) { m["base_hash"] = "xyz"; })),
                 "'base_hash' 'xyz' are not a size and 16 hex digits");
  EXPECT_FALSE(fs::exists(out)) << "nothing was written";
}

// ---------------------------------------------------------------- 3. a LoRA file's base, and merge's output

namespace {

// A LoRA run (train --init --lora-rank, 2 steps) on a GPT-2-vocabulary base whose metadata gives no head
// count: --heads 2 says it, and the run records it. Made once per test process.
struct LoraRun {
  fs::path base, adapters;
};
const LoraRun& lora_run() {
  static const LoraRun run = [] {
    LoraRun r{scratch("files_run_base.safetensors"), scratch("files_run_adapters.safetensors")};
    save_gpt2_vocabulary_model(r.base, 21, false);
    const Shell made = scratchgrad("train --init " + r.base.string() + " --heads 2 --tokenizer-file " + kTokenizerDir +
                                   " --text " + corpus().string() + " --lora-rank 2 --steps 2 --sample 0 --save " +
                                   r.adapters.string());
    EXPECT_EQ(made.status, 0) << made.err;
    return r;
  }();
  return run;
}

}  // namespace

TEST(Hardening, RefusesALoraFileWhoseBaseChanged) {
  const LoraRun& run = lora_run();
  const nn::Checkpoint saved = nn::load_safetensors(run.adapters.string());
  EXPECT_EQ(saved.metadata.at("base_bytes"), std::to_string(fs::file_size(run.base)));
  EXPECT_EQ(saved.metadata.at("base_hash"), nn::fingerprint_file(run.base.string()).hash);
  const std::string original = slurp(run.base);
  // another model of the same shape in the base's place: every command that reads the adapters refuses it
  save_gpt2_vocabulary_model(run.base, 22, false);
  const std::string needle = "is not the file the adapters were trained on";
  const std::string a = run.adapters.string();
  expect_refused(scratchgrad("generate --checkpoint " + a + " --tokens 2"), needle);
  expect_refused(scratchgrad("eval --checkpoint " + a + " --text " + corpus().string()), needle);
  expect_refused(scratchgrad("train --resume " + a + " --steps 3"), needle);
  expect_refused(scratchgrad("merge --lora " + a + " --out " + scratch("files_run_merged.safetensors").string()), needle);
  const Shell info = scratchgrad("info --checkpoint " + a);
  EXPECT_EQ(info.status, 0) << info.err;
  EXPECT_NE(info.out.find("refused by generate, eval and merge"), std::string::npos) << info.out;
  // and a base that is gone is named
  fs::remove(run.base);
  expect_refused(scratchgrad("generate --checkpoint " + a + " --tokens 2"), "its base " + run.base.string() + ": cannot open");
  // the base they were trained on, put back, is taken again
  std::ofstream(run.base, std::ios::binary) << original;
  const Shell again = scratchgrad("generate --checkpoint " + a + " --tokens 2");
  EXPECT_EQ(again.status, 0) << again.err;
}

TEST(Hardening, RefusesALoraFileThatIsItsOwnBase) {
  // a file from before bases were fingerprinted (nothing to compare) whose base is itself went round
  // until the stack overflowed
  const fs::path self = lora_file("files_self.safetensors", gpt2_file("files_self_base.safetensors"), [](auto& m) {
    m.erase("base_bytes");
    m.erase("base_hash");
  });
  nn::Checkpoint ck = nn::load_safetensors(self.string());
  ck.metadata["base"] = self.string();
  nn::save_safetensors(self.string(), ck.tensors, ck.metadata);
  expect_refused(scratchgrad("generate --checkpoint " + self.string()),
                 "more than 16 LoRA files, each the base of the one before");
}

TEST(Hardening, RefusesMergeOutputsThatAreItsInputs) {
  const fs::path base = gpt2_file("files_merge_base.safetensors");
  const fs::path lora = lora_file("files_merge_lora.safetensors", base);
  const std::string base_bytes = slurp(base), lora_bytes = slurp(lora);
  const std::string m = "merge --lora " + lora.string();
  expect_refused(scratchgrad(m + " --out " + lora.string()), "--lora " + lora.string() + " and --out");
  expect_refused(scratchgrad(m + " --out " + base.string()), "--lora's base " + base.string() + " and --out");
  expect_refused(scratchgrad(m + " --base " + base.string() + " --out " + base.string()), "--base " + base.string() + " and --out");
  const fs::path link = scratch("files_merge_link.safetensors");
  fs::remove(link);
  fs::create_symlink(base, link);  // the same file by another name
  expect_refused(scratchgrad(m + " --out " + link.string()), "name the same file");
  expect_refused(scratchgrad(m + " --out " + base.parent_path().string()), "is a folder, not a file to write");
  EXPECT_EQ(slurp(base), base_bytes);
  EXPECT_EQ(slurp(lora), lora_bytes);
  // --base names another file of the same shape: not the adapters' base
  const fs::path other = gpt2_file("files_merge_other.safetensors", [](nn::Checkpoint& ck) {
    tensor_named(ck, "ln_f.bias") = tensor_named(ck, "ln_f.bias") + 1.0;
  });
  expect_refused(scratchgrad(m + " --base " + other.string() + " --out " + scratch("files_merge_out.safetensors").string()),
                 "is not the file the adapters were trained on");
}

TEST(Hardening, AMergeThatFailsKeepsThePreviousOutput) {
  const fs::path base = gpt2_file("files_atomic_base.safetensors");
  const fs::path lora = lora_file("files_atomic_lora.safetensors", base);
  const fs::path out = write_file("files_atomic_out.safetensors", "the previous output");
  // a file-size limit (16 KiB) the merged file (about 110 KB) is over: the write fails, the old file stays
  const Shell r = testing_process::shell("ulimit -f 16 && " + std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad merge --lora " +
                                         lora.string() + " --out " + out.string());
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("File too large"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(out), "the previous output");
  for (const auto& entry : fs::directory_iterator(out.parent_path()))
    EXPECT_FALSE(entry.path().filename().string().starts_with("files_atomic_out.safetensors.tmp")) << entry.path();
}

// ---------------------------------------------------------------- 4. info describes every file

TEST(HardeningFiles, InfoDescribesGpt2LlmcAndLoraFiles) {
  const Shell gpt2 = scratchgrad("info --checkpoint " + kFixtures + "tiny_gpt2.safetensors");
  ASSERT_EQ(gpt2.status, 0) << gpt2.err;
  EXPECT_NE(gpt2.out.find("model: GPT-2 (Hugging Face's layout), 2 blocks, vocab 50 dim 32 context 16 heads 4 (its "
                          "metadata's n_head)"),
            std::string::npos)
      << gpt2.out;
  EXPECT_NE(gpt2.out.find("h.1.mlp.c_fc.weight"), std::string::npos) << gpt2.out;
  const int64_t parameters = nn::load_gpt2(kFixtures + "tiny_gpt2.safetensors")->num_parameters();
  EXPECT_NE(gpt2.out.find("parameters: " + std::to_string(parameters) + "\n"), std::string::npos) << gpt2.out;

  const Shell llmc = scratchgrad("info --checkpoint " + kFixtures + "tiny_gpt2_llmc.bin");
  ASSERT_EQ(llmc.status, 0) << llmc.err;
  EXPECT_NE(llmc.out.find("model: GPT-2 (llm.c's format, version 3), 2 blocks, vocab 50 dim 32 context 16 heads 4"),
            std::string::npos)
      << llmc.out;
  EXPECT_NE(llmc.out.find("parameters: " + std::to_string(parameters) + "\n"), std::string::npos) << llmc.out;

  // a file that does not give its head count, of a width that is no multiple of 64
  const fs::path no_heads = scratch("files_info_no_heads.safetensors");
  save_gpt2_vocabulary_model(no_heads, 3, false);
  const Shell unknown = scratchgrad("info --checkpoint " + no_heads.string());
  ASSERT_EQ(unknown.status, 0) << unknown.err;
  EXPECT_NE(unknown.out.find("heads not in the file (and width 16 is not a multiple of 64: give --heads)"), std::string::npos)
      << unknown.out;

  const LoraRun& run = lora_run();
  const Shell lora = scratchgrad("info --checkpoint " + run.adapters.string());
  ASSERT_EQ(lora.status, 0) << lora.err;
  EXPECT_NE(lora.out.find("LoRA adapters: rank 2 alpha 16 (scale alpha / rank = 8) on attn, trained 2 steps"),
            std::string::npos)
      << lora.out;
  const nn::FileFingerprint base = nn::fingerprint_file(run.base.string());
  EXPECT_NE(lora.out.find(fmt::format("base: {} ({} bytes, hash {}): the file there is that one", run.base.string(),
                                      base.bytes, base.hash)),
            std::string::npos)
      << lora.out;
}

// merge and info read the environment through the checks every command makes (they ended in "internal error")
TEST(HardeningFiles, MergeAndInfoCheckTheEnvironment) {
  const fs::path base = gpt2_file("files_env_base.safetensors");
  const fs::path lora = lora_file("files_env_lora.safetensors", base);
  const std::string bin = std::string(SCRATCHGRAD_BIN_DIR) + "/scratchgrad ";
  const std::string merge = "merge --lora " + lora.string() + " --out " + scratch("files_env_out.safetensors").string();
  expect_refused(testing_process::shell("SCRATCHGRAD_KERNELS=bogus " + bin + "info --checkpoint " + base.string()),
                 "SCRATCHGRAD_KERNELS: unknown kernels 'bogus'");
  expect_refused(testing_process::shell("SCRATCHGRAD_KERNELS=bogus " + bin + merge), "SCRATCHGRAD_KERNELS: unknown kernels");
  expect_refused(testing_process::shell("SCRATCHGRAD_NUMERICS=bogus " + bin + merge), "SCRATCHGRAD_NUMERICS: unknown numerics");
  const Shell ok = scratchgrad(merge);
  EXPECT_EQ(ok.status, 0) << ok.err;
}

// ---------------------------------------------------------------- 5. heads for a file that cannot say

TEST(HardeningFiles, FineTuneTakesHeadsForAFileThatDoesNotGiveThem) {
  const LoraRun& run = lora_run();  // trained with --heads 2 on a file without n_head
  const std::string init = "train --init " + run.base.string() + " --text " + corpus().string();
  expect_refused(scratchgrad(init), "cannot split emb_dim 16 into 0 heads (the file does not give its head count");
  expect_refused(scratchgrad(init + " --heads 3"), "cannot split emb_dim 16 into 3 heads (the head count asked for)");
  expect_refused(scratchgrad(init + " --heads 0"), "--heads must be at least 1");
  // the run recorded its heads: generate and a resume read the base with them
  const Shell gen = scratchgrad("generate --checkpoint " + run.adapters.string() + " --tokens 3");
  EXPECT_EQ(gen.status, 0) << gen.err;
  const fs::path resumed = scratch("files_run_resumed.safetensors");
  fs::copy_file(run.adapters, resumed, fs::copy_options::overwrite_existing);
  const Shell resume = scratchgrad("train --resume " + resumed.string() + " --steps 3 --save " + resumed.string());
  EXPECT_EQ(resume.status, 0) << resume.err;
  // merged, the file gives its head count (n_head 2): a count that contradicts it is refused
  const fs::path merged = scratch("files_run_merged_ok.safetensors");
  const Shell m = scratchgrad("merge --lora " + run.adapters.string() + " --out " + merged.string());
  ASSERT_EQ(m.status, 0) << m.err;
  EXPECT_EQ(nn::load_safetensors(merged.string()).metadata.at("n_head"), "2");
  expect_refused(scratchgrad("generate --prompt-ids 1 --checkpoint " + merged.string() + " --heads 4"),
                 "its metadata gives n_head 2, not the 4 heads asked for");
  expect_refused(scratchgrad("train --init " + merged.string() + " --text " + corpus().string() + " --heads 4"),
                 "its metadata gives n_head 2, not the 4 heads asked for");
  // llm.c's header gives its count too
  expect_refused(scratchgrad("train --init " + kFixtures + "tiny_gpt2_llmc.bin --text " + corpus().string() + " --heads 2"),
                 "its header gives 4 heads, not the 2 asked for");
}
