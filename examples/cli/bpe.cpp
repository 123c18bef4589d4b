// bpe.cpp — `scratchgrad bpe`: learn a byte-level BPE from a text, watch its first merges, and save it for
// `train --tokenizer bpe` and `tokenize`.
#include "tokenize.h"

#include <chrono>
#include <memory>
#include <new>
#include <optional>
#include <ostream>
#include <vector>

#include <fmt/format.h>

#include "guards.h"
#include "nn/safetensors.h"
#include "nn/tokenizer/tokenizer.h"
#include "text.h"

namespace cli {

namespace {

// A token's bytes for a listing: quoted, control characters and bad UTF-8 escaped.
std::string shown(const std::string& bytes) { return "\"" + tokenizer::escape_bytes(bytes) + "\""; }

}  // namespace

int run_bpe(const BpeOptions& o, std::ostream& out) {
  try {
    if (o.text_file.empty()) throw UsageError("bpe: --text is required (the text to learn the merges from)");
    // The checks train makes of its outputs: --save must not name the text it learns from, nor a device
    // (the save renames a new file over its target); a link is written through. Checked before training.
    std::string save_target;
    if (!o.save.empty()) {
      check_distinct_files({{"--text", o.text_file}, {"--save", o.save}});
      save_target = checkpoint_target("--save", o.save);
      nn::check_writable(save_target);
    }
    const std::string text = read_text_file(o.text_file);
    tokenizer::TrainOptions t;
    if (o.vocab_size > 10'000'000) throw UsageError("bpe: --vocab-size " + std::to_string(o.vocab_size) + " is too large");
    t.vocab_size = int(o.vocab_size);
    t.pattern = tokenizer::pattern_from_name(o.pattern);
    if (o.explain) {
      out << "the first merges, as they happen: the most frequent pair of adjacent tokens becomes a new token\n";
      // What each token spells, built up merge by merge: the 256 bytes, then each merge's two parts joined.
      auto pieces = std::make_shared<std::vector<std::string>>();
      for (int b = 0; b < 256; ++b) pieces->push_back(std::string(1, char(b)));
      t.on_merge = [&out, pieces, count = o.explain_count](const tokenizer::MergeStep& s) {
        pieces->push_back((*pieces)[s.merge.left] + (*pieces)[s.merge.right]);
        if (s.rank >= count) return;
        out << fmt::format("merge {:>4}: {} + {} -> token {} {} ({} times)\n", s.rank + 1, shown((*pieces)[s.merge.left]),
                           shown((*pieces)[s.merge.right]), s.merge.result, shown(pieces->back()), s.count)
            << std::flush;
      };
    }
    const auto start = std::chrono::steady_clock::now();
    std::optional<tokenizer::Tokenizer> tok;
    double seconds = 0;
    size_t tokens = 0;
    try {
      tok.emplace(tokenizer::train(text, t));
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      tokens = tok->encode(text).size();
    } catch (const std::bad_alloc&) {  // the text's size is the cause, not a model's (as the command line would say)
      throw UsageError(fmt::format("bpe: out of memory learning merges from {} ({} bytes)", o.text_file, text.size()));
    }
    out << fmt::format("learned {} merges ({} split) from {} bytes in {:.2f} s: vocabulary {}\n", tok->merges().size(),
                       o.pattern, text.size(), seconds, tok->vocab_size());
    out << fmt::format("the text is {} tokens: {:.2f} bytes per token\n", tokens, double(text.size()) / double(tokens));
    if (!o.save.empty()) {
      tok->save(save_target);
      out << "saved " << o.save << "\n";
    }
    return 0;
  } catch (const tokenizer::TokenizerError& e) {
    const std::string what = e.what();
    throw UsageError(what.rfind("bpe:", 0) == 0 ? what : "bpe: " + what);
  }
}

}  // namespace cli
