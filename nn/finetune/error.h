// error.h — the fine-tuning library's one exception type and the sizes its readers accept.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>

namespace finetune {

// A bad input (a data file that is not what it claims, a template the tokenizer cannot spell, a split that
// does not add up): the message is one line naming the file, line or record, and the field at fault.
class FinetuneError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The largest data file read (JSON, JSONL, CSV, TSV). The book's instruction data is 200 kB, Alpaca's 52,000
// records 22 MB; a file is read whole and a JSON array parsed whole (several times its size in memory).
inline constexpr uint64_t kMaxDataFileBytes = uint64_t(256) << 20;  // 256 MiB
// How deep a record's JSON may nest ({"messages": [{...}]} needs 3 levels), checked before it is parsed:
// nlohmann's parser recurses once per level.
inline constexpr size_t kMaxDataJsonDepth = 16;
// The most classes a classification file may have: the head is a Linear(width, classes), and a file whose
// "labels" are really free text (a column mix-up) should be refused, not turned into a huge head.
inline constexpr size_t kMaxClasses = 1024;

}  // namespace finetune
