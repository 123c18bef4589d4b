// test_sft_templates.cpp — the chat templates (nn/finetune/template.h): the text each renders, written here
// from the formats' documentation (the book's chapter 7 for Alpaca, ChatML as SmolLM2 and Qwen use it,
// Meta's Llama 3 prompt format), which positions they count, and how a template is chosen.
#include <gtest/gtest.h>

#include "nn/finetune/error.h"
#include "nn/finetune/template.h"
#include "test_helpers.h"
#include "test_sft_helpers.h"

#ifndef SCRATCHGRAD_SOURCE_DIR
#define SCRATCHGRAD_SOURCE_DIR "."
#endif

namespace {

using namespace finetune;
using sft_testing::ByteTokenizer;
using sft_testing::ids_where;

const char* const kHeader =
    "Below is an instruction that describes a task. Write a response that appropriately completes the request.";

// The book's example record (chapter 7), with and without its input.
const AlpacaRecord kWithInput{"Identify the correct spelling of the following word.", "Ocassion",
                              "The correct spelling is 'Occasion.'"};
const AlpacaRecord kWithoutInput{"What is an antonym of 'complicated'?", "", "An antonym of 'complicated' is 'simple'."};

TEST(SftTemplates, AlpacaIsTheBooksPromptFollowedByTheEndOfText) {
  const ByteTokenizer tok = sft_testing::gpt2_like();
  const auto alpaca = make_template("alpaca", tok);
  const Rendered r = alpaca->render(from_alpaca(kWithInput, *alpaca));
  EXPECT_EQ(tok.spell(r.ids), std::string(kHeader) +
                                  "\n\n### Instruction:\nIdentify the correct spelling of the following word."
                                  "\n\n### Input:\nOcassion"
                                  "\n\n### Response:\nThe correct spelling is 'Occasion.'<|endoftext|>");
  // The Input section is left out when the input is empty.
  const Rendered bare = alpaca->render(from_alpaca(kWithoutInput, *alpaca));
  EXPECT_EQ(tok.spell(bare.ids), std::string(kHeader) +
                                     "\n\n### Instruction:\nWhat is an antonym of 'complicated'?"
                                     "\n\n### Response:\nAn antonym of 'complicated' is 'simple'.<|endoftext|>");
  // Counted: the response and the end-of-text after it; everything before is prompt.
  EXPECT_EQ(tok.spell(ids_where(r, 1)), "The correct spelling is 'Occasion.'<|endoftext|>");
  EXPECT_EQ(r.ids.back(), 1000);
}

TEST(SftTemplates, ChatMlWritesEachMessageBetweenImStartAndImEnd) {
  const ByteTokenizer tok = sft_testing::smollm2_like();
  const auto chatml = make_template("chatml", tok);
  const Conversation c{{"system", "Be brief."}, {"user", "Hi!"}, {"assistant", "Hello."},
                       {"user", "Colour of the sky?"}, {"assistant", "Blue."}};
  const Rendered r = chatml->render(c);
  EXPECT_EQ(tok.spell(r.ids),
            "<|im_start|>system\nBe brief.<|im_end|>\n"
            "<|im_start|>user\nHi!<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n"
            "<|im_start|>user\nColour of the sky?<|im_end|>\n"
            "<|im_start|>assistant\nBlue.<|im_end|>\n");
  // Each reply and its <|im_end|> count; the newline after it is the template's, as is the header.
  EXPECT_EQ(tok.spell(ids_where(r, 1)), "Hello.<|im_end|>Blue.<|im_end|>");
  EXPECT_EQ(tok.spell(chatml->generation_prompt({{"user", "Hi!"}})), "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(chatml->end_of_turn_id(), *tok.special_id("<|im_end|>"));
  EXPECT_EQ(chatml->padding_id(), *tok.special_id("<|endoftext|>"));
}

TEST(SftTemplates, Llama3WritesHeadersAndEndsEachTurnWithEotId) {
  const ByteTokenizer tok = sft_testing::llama3_like();
  const auto llama3 = make_template("llama3", tok);
  const Conversation c{{"system", "Be brief."}, {"user", "Hi!"}, {"assistant", "Hello."}};
  const Rendered r = llama3->render(c);
  EXPECT_EQ(tok.spell(r.ids),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>");
  EXPECT_EQ(tok.spell(ids_where(r, 1)), "Hello.<|eot_id|>");
  EXPECT_EQ(tok.spell(llama3->generation_prompt({{"user", "Hi!"}})),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(llama3->padding_id(), *tok.special_id("<|end_of_text|>"));
  // Llama 3 writes each content without the whitespace around it, as Meta's encoder does.
  EXPECT_EQ(tok.spell(llama3->render({{"user", " Hi!\n"}, {"assistant", "\tHello. "}}).ids),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>");
}

TEST(SftTemplates, AlpacaConversationIsTheHeaderOnceThenEachTurnsSections) {
  const ByteTokenizer tok = sft_testing::gpt2_like();
  const auto alpaca = make_template("alpaca", tok);
  const Conversation c{{"user", "Add 2 and 3."}, {"assistant", "5"}, {"user", "And 4?"}, {"assistant", "9"}};
  EXPECT_EQ(tok.spell(alpaca->render(c).ids), std::string(kHeader) +
                                                  "\n\n### Instruction:\nAdd 2 and 3.\n\n### Response:\n5<|endoftext|>"
                                                  "\n\n### Instruction:\nAnd 4?\n\n### Response:\n9<|endoftext|>");
  // A system message takes the header's place; the generation prompt opens the response section.
  EXPECT_EQ(tok.spell(alpaca->generation_prompt({{"system", "You add."}, {"user", "1 + 1?"}})),
            "You add.\n\n### Instruction:\n1 + 1?\n\n### Response:\n");
}

TEST(SftTemplates, TheChatPiecesConcatenateToTheRenderedConversation) {
  // What a chat appends turn by turn is what training rendered (so a cached conversation is the same ids).
  const ByteTokenizer tok = sft_testing::smollm2_like();
  const auto chatml = make_template("chatml", tok);
  Pieces pieces = chatml->opening("Be brief.");
  for (const auto& part : {chatml->user_turn("Hi!"), chatml->assistant_header()}) pieces.insert(pieces.end(), part.begin(), part.end());
  std::vector<int64_t> ids = chatml->tokenize(pieces).ids;
  for (const int64_t id : tok.encode("Hello.")) ids.push_back(id);
  ids.push_back(chatml->end_of_turn_id());
  for (const int64_t id : chatml->tokenize(chatml->after_reply()).ids) ids.push_back(id);
  EXPECT_EQ(ids, chatml->render({{"system", "Be brief."}, {"user", "Hi!"}, {"assistant", "Hello."}}).ids);
}

TEST(SftTemplates, MarkersTypedInAMessageAreOrdinaryText) {
  const ByteTokenizer tok = sft_testing::smollm2_like();
  const auto chatml = make_template("chatml", tok);
  const Rendered r = chatml->render({{"user", "<|im_end|>"}, {"assistant", "ok"}});
  // Two <|im_end|> ids: the user's turn's and the reply's; the typed one is bytes.
  EXPECT_EQ(std::count(r.ids.begin(), r.ids.end(), *tok.special_id("<|im_end|>")), 2);
}

TEST(SftTemplates, Gpt2AlpacaIsTheWholeTextTokenizedThenEndOfText) {
  const tokenizer::Tokenizer gpt2 = tokenizer::load_gpt2_tokenizer(std::string(SCRATCHGRAD_SOURCE_DIR) + "/tests/tokenizer/gpt2");
  const BpeTemplateTokenizer tok(gpt2);
  const auto alpaca = make_template("alpaca", tok);
  const Rendered r = alpaca->render(from_alpaca(kWithInput, *alpaca));
  const std::string prompt = std::string(kHeader) +
                             "\n\n### Instruction:\nIdentify the correct spelling of the following word."
                             "\n\n### Input:\nOcassion\n\n### Response:\n";
  std::vector<int32_t> expected = gpt2.encode_ordinary(prompt + kWithInput.output);
  expected.push_back(50256);
  EXPECT_EQ(r.ids, std::vector<int64_t>(expected.begin(), expected.end()));
  const std::vector<int64_t> reply = ids_where(r, 1);
  EXPECT_EQ(gpt2.decode(std::vector<int32_t>(reply.begin(), reply.end())), kWithInput.output + "<|endoftext|>");
  EXPECT_EQ(ids_where(r, 0).size(), gpt2.encode_ordinary(prompt).size());
}

TEST(SftTemplates, ATokenMergedAcrossThePromptsEndCountsAsReply) {
  // A BPE whose first merge joins "a" and "b": "xa" + "b" tokenizes whole as x, ab. The token "ab" holds the
  // reply's byte, so it counts (a reply token cannot be split); "x" alone is prompt.
  std::vector<int32_t> byte_ids(256);
  for (int b = 0; b < 256; ++b) byte_ids[b] = b;
  const tokenizer::Tokenizer bpe_end(byte_ids, {tokenizer::Merge{'a', 'b', 256}}, {{"<|endoftext|>", 257}},
                                     tokenizer::SplitPattern::none);
  struct Plain : ChatTemplate {  // the pieces are given directly; the template's own markers are unused
    explicit Plain(const TemplateTokenizer& t) : ChatTemplate("plain", t, "<|endoftext|>", "<|endoftext|>") {}
    Pieces opening(const std::string&) const override { return {}; }
    Pieces user_turn(const std::string&) const override { return {}; }
    Pieces assistant_header() const override { return {}; }
  };
  const BpeTemplateTokenizer tok_end(bpe_end);
  const Plain plain(tok_end);
  const Rendered r = plain.tokenize({Piece{"xa", false, false}, Piece{"b", false, true}});
  EXPECT_EQ(r.ids, (std::vector<int64_t>{'x', 256}));
  EXPECT_EQ(r.counted, (std::vector<uint8_t>{0, 1}));
}

TEST(SftTemplates, ChosenByNameOrByTheTokenizersSpecialTokens) {
  EXPECT_EQ(template_name_for(sft_testing::gpt2_like()), "alpaca");
  EXPECT_EQ(template_name_for(sft_testing::smollm2_like()), "chatml");
  EXPECT_EQ(template_name_for(sft_testing::llama3_like()), "llama3");
  const ByteTokenizer tok = sft_testing::smollm2_like();
  EXPECT_EQ(make_template(template_name_for(tok), tok)->name(), "chatml");
  EXPECT_THROW_WITH(make_template("vicuna", tok), FinetuneError, "unknown template \"vicuna\"", "alpaca, chatml or llama3");
  // A template whose markers the tokenizer lacks is refused, naming the marker.
  EXPECT_THROW_WITH(make_template("chatml", sft_testing::gpt2_like()), FinetuneError, "chatml", "<|im_end|>");
  EXPECT_THROW_WITH(make_template("llama3", sft_testing::smollm2_like()), FinetuneError, "llama3", "<|eot_id|>");
  EXPECT_THROW_WITH(make_template("alpaca", ByteTokenizer({})), FinetuneError, "end-of-text", "<|endoftext|>");
  // A system message after the first is refused rather than written where no template puts it.
  const auto chatml = make_template("chatml", tok);
  EXPECT_THROW_WITH(chatml->render({{"user", "a"}, {"system", "b"}, {"assistant", "c"}}), FinetuneError, "message 1",
                    "system");
}

}  // namespace
