// gpt2_files.h — how byte-level BPE files spell their tokens, shared by GPT-2's loader (gpt2.cpp) and the
// tokenizer.json loader (hf_json.cpp).
#pragma once
#include <string>
#include <string_view>
#include <utility>

#include "nn/tokenizer/json_file.h"

namespace tokenizer {

// A token as the files spell it (GPT-2's byte-to-unicode table: "Ġthe") back to its bytes (" the"); false
// if a character is not in the table.
bool byte_level_bytes(std::string_view written, std::string& bytes);

// A merge of tokenizer.json: "Ġ t" or ["Ġ", "t"]; a TokenizerError naming the field otherwise.
std::pair<std::string, std::string> hugging_face_merge(const JsonField& merge);

}  // namespace tokenizer
