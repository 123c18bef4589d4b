// json_depth.h — how deep a JSON text nests, counted without parsing it. nlohmann's parser and its dump()
// recurse once per level, so a crafted file of 100,000 '[' would overflow the stack: every reader of a
// user's JSON (checkpoint headers, tokenizer files) measures the depth first and refuses what is too deep.
#pragma once
#include <cstddef>
#include <string_view>

namespace nn {

// The deepest nesting of [ and { in `text`, outside strings; stops counting once past `limit` (a value
// over `limit` means "too deep").
size_t json_nesting_depth(std::string_view text, size_t limit);

}  // namespace nn
