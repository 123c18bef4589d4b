// test_fuzz_regressions.cpp — one test per crash or broken promise the fuzzers in tests/fuzz/ found.
// Each crashing input is also kept in the target's corpus (tests/fuzz/corpus/<target>/crash-*), which
// the tests fuzz_replay.<target> run again; docs/reliability.md lists them.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "autograd/autograd.h"
#include "nn/safetensors.h"
#include "test_helpers.h"
#include "test_process.h"
#include "command_line.h"
#include "text.h"
#include "commands.h"

using namespace autograd;
namespace fs = std::filesystem;

namespace {
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char((header.size() >> (8 * i)) & 0xff);
  return bytes + header + data;
}
}  // namespace

// fuzz_safetensors: a BOOL tensor whose bytes are not 0 or 1 was loaded, and reading it was undefined
// behaviour (UBSan: "load of value 7, which is not a valid value for type 'const bool'").
TEST(Fuzzed, ABoolTensorHoldingAByteOtherThan0Or1IsRefused) {
  const fs::path path = testing_process::scratch("bool7.safetensors");
  std::ofstream(path, std::ios::binary)
      << safetensors_bytes(R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", std::string("\x00\x07", 2));
  EXPECT_THROW_WITH(nn::load_safetensors(path.string()), nn::CheckpointError, path.string(), "'m'", "BOOL",
                    "byte 7 at element 1");
  std::ofstream(path, std::ios::binary)
      << safetensors_bytes(R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", std::string("\x01\x00", 2));
  nn::Checkpoint ck = nn::load_safetensors(path.string());
  EXPECT_EQ(ck.tensors.at(0).second.to(DType::Int64).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
}

// fuzz_text: decode_utf8 accepted an overlong form (C0 80 for NUL), UTF-16 surrogates and code points past
// U+10FFFF, so one character had two spellings and text Python refuses trained here.
TEST(Fuzzed, UTF8WithOverlongFormsSurrogatesOrPastUnicodeIsRefused) {
  EXPECT_THROW_WITH(cli::decode_utf8("a\xC0\x80"), cli::UsageError, "not valid UTF-8", "overlong", "U+0000", "offset 1");
  EXPECT_THROW_WITH(cli::decode_utf8("\xE0\x81\x81"), cli::UsageError, "overlong", "U+0041");
  EXPECT_THROW_WITH(cli::decode_utf8("\xF0\x82\x82\xAC"), cli::UsageError, "overlong", "U+20AC");
  EXPECT_THROW_WITH(cli::decode_utf8("\xED\xA0\x80"), cli::UsageError, "surrogate U+D800");
  EXPECT_THROW_WITH(cli::decode_utf8("\xF4\x90\x80\x80"), cli::UsageError, "U+110000", "past U+10FFFF");
  // the shortest forms, up to the last code point, still decode
  EXPECT_EQ(cli::decode_utf8("\x7F\xC2\x80\xE0\xA0\x80\xED\x9F\xBF\xEE\x80\x80\xF0\x90\x80\x80\xF4\x8F\xBF\xBF"),
            (std::u32string{0x7F, 0x80, 0x800, 0xD7FF, 0xE000, 0x10000, 0x10FFFF}));
}

// fuzz_ops: sum over dim 0 of a 0-d tensor wrote past the end of an empty vector<bool> (UBSan: "store
// to null pointer"). PyTorch's sum(0) of a 0-d tensor is the tensor's value.
TEST(Fuzzed, SumOrMeanOverDim0OfA0dTensorIsItsValue) {
  Tensor x = scalar_tensor(3.0, DType::Float64).requires_grad_();
  Tensor s = x.sum(0);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item(), 3.0);
  EXPECT_EQ(x.sum(-1, true).dim(), 0);
  EXPECT_EQ(x.mean(0).item(), 3.0);
  s.backward();
  EXPECT_EQ(x.grad().item(), 1.0);
  EXPECT_THROW_WITH(x.sum(1), std::out_of_range, "sum", "dimension 1 out of range");
}

// Found reading the code behind the sum crash: narrow, select, slice, chunk and split of a 0-d tensor
// read shape()[0] of an empty shape. PyTorch refuses them; so does scratchgrad now.
TEST(Fuzzed, OpsThatTakeALengthOfADimRefuseA0dTensor) {
  Tensor x = scalar_tensor(3.0);
  EXPECT_THROW_WITH(x.narrow(0, 0, 1), std::invalid_argument, "narrow", "0-d tensor has no dimensions");
  EXPECT_THROW_WITH(x.select(0, 0), std::invalid_argument, "select", "0-d");
  EXPECT_THROW_WITH(x.slice(-1, 0, 1), std::invalid_argument, "slice", "0-d");
  EXPECT_THROW_WITH(chunk(x, 2, 0), std::invalid_argument, "chunk", "0-d");
  EXPECT_THROW_WITH(split(x, 1, 0), std::invalid_argument, "split", "0-d");
}

// fuzz_ops: from_vector of no values passed a null pointer to memcpy (UBSan: "null pointer passed as
// argument 2, which is declared to never be null").
TEST(Fuzzed, FromVectorOfNoValues) {
  EXPECT_EQ(from_vector(std::vector<double>{}, {0, 3}, DType::Float64).numel(), 0);
  EXPECT_EQ(from_vector(std::vector<int64_t>{}, {2, 0}).shape(), (Shape{2, 0}));
  EXPECT_EQ(from_vector(std::vector<float>{}, {0}).numel(), 0);
}

// fuzz_ops: softmax over a dim of size 0 (with other dims not empty) read one value before a row of
// none for its max (ASan: heap-buffer-overflow in row_max), and its backward the same in the lane sums
// (softmax_backward_row). PyTorch gives an empty result.
TEST(Fuzzed, SoftmaxOverADimOfSize0IsEmpty) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Tensor x = zeros({3, 0}, dtype).t().requires_grad_();  // [0, 3], not contiguous
    EXPECT_EQ(softmax(x, 0).shape(), (Shape{0, 3}));
    EXPECT_EQ(log_softmax(x, 0).shape(), (Shape{0, 3}));
    EXPECT_EQ(softmax(zeros({2, 0}, dtype), 1).numel(), 0);
    softmax(x, 0).sum().backward();
    EXPECT_EQ(x.grad().shape(), (Shape{0, 3}));
    // and the backward of a contiguous one, over the last dim (the lane sums read past a row of none)
    Tensor y = zeros({4, 4, 0}, dtype).requires_grad_();
    (softmax(y, 2) * 2.0).sum().backward();
    EXPECT_EQ(y.grad().shape(), (Shape{4, 4, 0}));
    log_softmax(y, -1).sum().backward();
  }
}

// fuzz_cli: a parse error quoting an argument that holds a line break was printed over two lines.
TEST(Fuzzed, TheCommandLinePrintsEachErrorOnOneLine) {
  EXPECT_EQ(cli::one_line("a\nb\r\x01" "c"), "a\\nb\\r\\x01c");
  std::ostringstream out, err;
  const char* argv[] = {"scratchgrad", "train", "two\nlines", nullptr};
  EXPECT_EQ(cli::run_command_line(3, argv, out, err), 2);
  EXPECT_EQ(err.str().find('\n'), err.str().size() - 1) << err.str();
  EXPECT_NE(err.str().find("two\\nlines"), std::string::npos) << err.str();
}

// fuzz_ops: embedding's backward with a weight of width 0 reshaped its gradient to {-1, 0}, which
// reshape refuses as ambiguous (an uncaught "reshape: shape [-1, 0] is invalid" out of backward()).
// matmul of [..., M, 0] @ [0, N] and linear with 0 in_features folded their batch the same way.
TEST(Fuzzed, ProductsAndEmbeddingsOverASize0DimFoldWithoutInferring) {
  Tensor w = zeros({4, 0}, DType::Float64).requires_grad_();
  Tensor e = embedding(w, from_vector(std::vector<int64_t>{1, 2, 3}, {3}));
  EXPECT_EQ(e.shape(), (Shape{3, 0}));
  e.sum().backward();
  EXPECT_EQ(w.grad().shape(), (Shape{4, 0}));
  Tensor a = zeros({2, 3, 0}).requires_grad_(), b = zeros({0, 5}).requires_grad_();
  Tensor p = matmul(a, b);
  EXPECT_EQ(p.shape(), (Shape{2, 3, 5}));
  EXPECT_EQ(p.abs().sum().item(), 0.0);
  p.sum().backward();
  EXPECT_EQ(a.grad().shape(), (Shape{2, 3, 0}));
  EXPECT_EQ(linear(zeros({2, 3, 0}), zeros({5, 0}), zeros({5})).shape(), (Shape{2, 3, 5}));
}

// fuzz_ops: embedding checked its indices against [0, rows) but let through the one value -1 - rows
// (a sentinel meant as "nothing is ignored"), and then read that row, before the weight (ASan:
// heap-buffer-overflow in index_select_rows). Found with rows 0 and index -1; rows 3 and -4 is the same.
TEST(Fuzzed, EmbeddingRefusesTheIndexMinus1MinusRows) {
  Tensor w3 = zeros({3, 2});
  EXPECT_THROW_WITH(embedding(w3, from_vector(std::vector<int64_t>{1, -4}, {2})), std::out_of_range, "embedding",
                    "index -4", "flat position 1", "3 embedding rows");
  EXPECT_THROW_WITH(embedding(zeros({0, 3}), from_vector(std::vector<int64_t>{-1}, {})), std::out_of_range, "embedding",
                    "index -1", "0 embedding rows");
  EXPECT_EQ(embedding(zeros({0, 3}), from_vector(std::vector<int64_t>{}, {0})).shape(), (Shape{0, 3}));
  // nll_loss's ignore_index is still honoured, and only it
  Tensor lp = log_softmax(zeros({2, 3}), 1);
  EXPECT_NO_THROW(nll_loss(lp, from_vector(std::vector<int64_t>{-100, 1}, {2})));
  EXPECT_THROW_WITH(nll_loss(lp, from_vector(std::vector<int64_t>{-4, 1}, {2})), std::out_of_range, "nll_loss", "-4");
}

// fuzz_checkpoint: metadata whose "dim" (or "context", "layers") lies built a model of that size before
// any tensor was compared with it, and asked the allocator for terabytes (ASan: requested allocation size
// exceeds maximum supported size). The sizes are now checked against the file's own tensors first.
TEST(Fuzzed, CheckpointMetadataThatLiesAboutTheSizesIsRefusedBeforeBuilding) {
  const std::string corpus = std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/fuzz/corpus/checkpoint/";
  std::ostringstream out;
  nn::Checkpoint ck = nn::load_safetensors(corpus + "mini.safetensors");
  ck.metadata["dim"] = "99999999999";
  const std::string huge = testing_process::scratch("huge-dim.safetensors").string();
  nn::save_safetensors(huge, ck.tensors, ck.metadata);
  EXPECT_THROW_WITH(cli::run_info(huge, out), nn::CheckpointError, huge, "size mismatch for head.weight",
                    "dim 99999999999", "[29, 4]");
  const std::string layers = corpus + "gpt-many-layers.safetensors";  // the GPT, "layers" 9 for 1 block
  EXPECT_THROW_WITH(cli::run_info(layers, out), nn::CheckpointError, layers, "trf_blocks.8.att.W_key.weight", "lacks");
  EXPECT_NO_THROW(cli::run_info(corpus + "gpt.safetensors", out));
  EXPECT_NO_THROW(cli::run_info(corpus + "mini.safetensors", out));
}
