// test_sft_helpers.h — a tokenizer for the fine-tuning tests whose tokens are single bytes (ids 0..255) plus
// the special tokens it is given (ids 1000, 1001, ...), so that a rendered conversation reads back as text
// and each counted position is one character.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "nn/finetune/template.h"

namespace sft_testing {

class ByteTokenizer : public finetune::TemplateTokenizer {
 public:
  explicit ByteTokenizer(const std::vector<std::string>& specials) {
    for (const std::string& s : specials) specials_.emplace(s, 1000 + int64_t(specials_.size()));
  }
  std::vector<int64_t> encode(std::string_view text) const override {
    std::vector<int64_t> ids;
    for (const unsigned char c : text) ids.push_back(c);
    return ids;
  }
  std::optional<int64_t> special_id(std::string_view text) const override {
    const auto found = specials_.find(std::string(text));
    if (found == specials_.end()) return std::nullopt;
    return found->second;
  }
  // The text of `ids`, special tokens by their spelling; -100 (an ignored target) as "_".
  std::string spell(const std::vector<int64_t>& ids) const {
    std::string out;
    for (const int64_t id : ids) {
      if (id == -100) out += '_';
      else if (id < 256) out += char(id);
      else
        for (const auto& [spelling, special] : specials_)
          if (special == id) out += spelling;
    }
    return out;
  }

 private:
  std::map<std::string, int64_t> specials_;
};

inline ByteTokenizer gpt2_like() { return ByteTokenizer({"<|endoftext|>"}); }
inline ByteTokenizer smollm2_like() { return ByteTokenizer({"<|endoftext|>", "<|im_start|>", "<|im_end|>"}); }
inline ByteTokenizer llama3_like() {
  return ByteTokenizer({"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"});
}

// The ids of `rendered` that are counted (1) or not (0), in order.
inline std::vector<int64_t> ids_where(const finetune::Rendered& rendered, uint8_t counted) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < rendered.ids.size(); ++i)
    if (rendered.counted[i] == counted) out.push_back(rendered.ids[i]);
  return out;
}

}  // namespace sft_testing
