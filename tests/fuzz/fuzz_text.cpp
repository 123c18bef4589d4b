// fuzz_text.cpp — the text loader: `train --text FILE` reads the file, decodes its UTF-8, builds the
// sorted character vocabulary and encodes the text to ids.
//
// Checks: invalid UTF-8 is refused with a one-line cli::UsageError; valid text encodes back to exactly
// the bytes read (so every byte sequence has one meaning), its vocabulary is sorted and distinct, and ids
// decode back to the text; a short run of `train --text FILE` (two steps of a tiny model) trains or
// refuses the file cleanly. Corpus: corpus/text/.
#include <algorithm>
#include <sstream>

#include "fuzz_common.h"
#include "nn/safetensors.h"
#include "text.h"
#include "commands.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("input.txt", data, size);
  std::string raw = cli::read_text_file(path);
  fuzz::expect(raw == std::string(reinterpret_cast<const char*>(data), size), "read_text_file changed the bytes");
  std::u32string text;
  try {
    text = cli::decode_utf8(raw);
  } catch (const cli::UsageError& e) {
    fuzz::check_message(e, "UsageError");
    return 0;
  }
  for (char32_t c : text)
    fuzz::expect(c <= 0x10FFFF && (c < 0xD800 || c > 0xDFFF), "decode_utf8 accepted a code point that is no character");
  fuzz::expect(cli::encode_utf8(text) == raw, "decode_utf8 accepted bytes that do not encode back to themselves");
  cli::Vocabulary vocab = cli::Vocabulary::from_text(text);
  const std::u32string& chars = vocab.chars();
  fuzz::expect(std::adjacent_find(chars.begin(), chars.end(), [](char32_t a, char32_t b) { return a >= b; }) == chars.end(),
               "the vocabulary is not sorted and distinct");
  std::vector<int64_t> ids = vocab.encode(text);
  for (int64_t id : ids) fuzz::expect(id >= 0 && id < vocab.size(), "an id outside the vocabulary");
  fuzz::expect(vocab.decode(ids) == text, "ids do not decode back to the text");
  for (char32_t c : chars) (void)cli::printable(c);

  if (size > 4096) return 0;  // training is for small files: keep the target fast
  cli::TrainOptions o;
  o.text_file = path;
  o.steps = 2, o.batch = 2, o.context = 3, o.dim = 4, o.heads = 2, o.eval_every = 1, o.sample_tokens = 3;
  std::ostringstream out;
  try {
    cli::run_train(o, out);
  } catch (const cli::UsageError& e) {
    fuzz::check_message(e, "UsageError");
  } catch (const std::exception& e) {
    fuzz::fail(std::string("train --text: an error the command line calls internal: ") + e.what());
  }
  return 0;
}
