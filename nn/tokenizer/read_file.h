// read_file.h — a whole file as bytes, or a TokenizerError naming it (shared by the loaders).
#pragma once
#include <string>

namespace tokenizer {
std::string read_file(const std::string& path, const char* what);
}
