// fuzz_tokenizer.cpp — the byte-level BPE of nn/tokenizer/: its merges-file loader, and encode and decode.
//
// The input is read five ways. As a scratchgrad-bpe file: it loads or is refused with a one-line
// TokenizerError, and a loaded tokenizer writes itself back to a file that loads to the same text. As a
// Hugging Face tokenizer.json (read as GPT-2's, and as its file says: hf_json.h), and as GPT-2's encoder.json
// (beside a vocab.bpe of one merge): it loads, and round-trips its own bytes (up to NFC where the file
// normalizes; not where an added token strips whitespace), or is refused with a one-line TokenizerError, never another
// exception. As a text:
// a small BPE trained on it (GPT-2 split, GPT-4 split, raw bytes) must give decode(encode(x)) == x, on the
// input and on its halves, with every id in range. As ids: decoding arbitrary ids either works or is
// refused for an id out of range. Corpus: corpus/tokenizer/.
#include <string>

#include "fuzz_common.h"
#include "nn/tokenizer/hf_json.h"
#include "nn/tokenizer/normalize.h"
#include "nn/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  try {
    const tokenizer::Tokenizer t = tokenizer::Tokenizer::from_text(input, "fuzz.bpe");
    const std::string text = t.to_text();
    fuzz::expect(tokenizer::Tokenizer::from_text(text, "again.bpe").to_text() == text, "a saved tokenizer loads differently");
    fuzz::expect(t.decode(t.encode(input)) == input, "a loaded tokenizer does not round-trip its own file's bytes");
  } catch (const tokenizer::TokenizerError& e) {
    fuzz::check_message(e, "TokenizerError");
  }

  // The JSON loaders (nn/tokenizer/json_file.h: the depth bound, every field's type, ids read whole).
  static const std::string vocab_bpe = [] {
    const std::string merge = "#version: 0.2\n\xc4\xa0 t\n";
    return fuzz::write_scratch("vocab.bpe", reinterpret_cast<const uint8_t*>(merge.data()), merge.size());
  }();
  const std::string json_file = fuzz::write_scratch("tokenizer.json", data, size);
  for (int as_encoder = 0; as_encoder < 2; ++as_encoder) {
    try {
      const tokenizer::Tokenizer t = as_encoder ? tokenizer::load_gpt2_tokenizer(json_file, vocab_bpe)
                                                : tokenizer::load_hugging_face_tokenizer(json_file);
      fuzz::expect(t.decode(t.encode(input)) == input, "a tokenizer read from JSON does not round-trip its file's bytes");
    } catch (const tokenizer::TokenizerError& e) {
      fuzz::check_message(e, "TokenizerError");
    }
  }
  try {
    const tokenizer::Tokenizer t = tokenizer::load_tokenizer_json(json_file);
    const tokenizer::HuggingFaceRules& rules = *t.hugging_face();
    bool strips = false;
    for (const tokenizer::AddedToken& a : rules.added) strips = strips || a.lstrip || a.rstrip;
    const std::string back = t.decode(t.encode(input));
    // NFC applies to the text between added tokens, piece by piece; NFC of the whole is the same either way.
    if (!strips)
      fuzz::expect(rules.nfc ? tokenizer::nfc(back) == tokenizer::nfc(input) : back == input,
                   "a tokenizer.json's tokenizer does not round-trip its file's bytes");
  } catch (const tokenizer::TokenizerError& e) {
    fuzz::check_message(e, "TokenizerError");
  }

  if (size > 2048) return 0;  // training is for small inputs: keep the target fast
  for (tokenizer::SplitPattern p : {tokenizer::SplitPattern::gpt2, tokenizer::SplitPattern::gpt4, tokenizer::SplitPattern::none,
                                    tokenizer::SplitPattern::qwen2, tokenizer::SplitPattern::gpt2_digits}) {
    tokenizer::TrainOptions o;
    o.pattern = p;
    o.vocab_size = 256 + int(size % 40);
    o.specials = {"<|endoftext|>"};
    try {
      const tokenizer::Tokenizer t = tokenizer::train(input, o);
      for (const std::string& x : {input, input.substr(0, size / 2), input.substr(size / 2)}) {
        const std::vector<int32_t> ids = t.encode(x);
        for (int32_t id : ids) fuzz::expect(id >= 0 && id < t.vocab_size(), "encode made an id outside the vocabulary");
        fuzz::expect(t.decode(ids) == x, "decode(encode(x)) != x");
        fuzz::expect(t.decode(t.encode_ordinary(x)) == x, "decode(encode_ordinary(x)) != x");
      }
    } catch (const tokenizer::TokenizerError& e) {
      fuzz::check_message(e, "TokenizerError");
    }
  }
  try {
    const tokenizer::Tokenizer t = tokenizer::load_tokenizer_json(json_file);
    const tokenizer::HuggingFaceRules& rules = *t.hugging_face();
    bool strips = false;
    for (const tokenizer::AddedToken& a : rules.added) strips = strips || a.lstrip || a.rstrip;
    const std::string back = t.decode(t.encode(input));
    // NFC applies to the text between added tokens, piece by piece; NFC of the whole is the same either way.
    if (!strips)
      fuzz::expect(rules.nfc ? tokenizer::nfc(back) == tokenizer::nfc(input) : back == input,
                   "a tokenizer.json's tokenizer does not round-trip its file's bytes");
  } catch (const tokenizer::TokenizerError& e) {
    fuzz::check_message(e, "TokenizerError");
  }

  const tokenizer::Tokenizer bytes;
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 2 <= size && ids.size() < 64; i += 2) ids.push_back(int32_t(data[i] | (data[i + 1] << 8)) - 300);
  try {
    fuzz::expect(bytes.decode(ids).size() == ids.size(), "byte ids decode to one byte each");
  } catch (const tokenizer::TokenizerError& e) {
    fuzz::check_message(e, "TokenizerError");
  }
  return 0;
}
