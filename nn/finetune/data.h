// data.h — fine-tuning data read from a user's files, every bad record refused with its place named.
//
// Instruction data (.json: an array of records; .json or .jsonl: one record a line):
//   {"instruction": "...", "input": "...", "output": "..."}              the book's and Alpaca's records
//   {"messages": [{"role": "system"|"user"|"assistant", "content": "..."}, ...]}   a conversation
// Classification data:
//   .csv or .tsv: a header row naming a "label" and a "text" column (any order, any case, other columns
//   ignored), fields quoted as RFC 4180 says ("a ""quoted"" word", separators and newlines inside quotes)
//   .json or .jsonl: {"text": "...", "label": "..."} (a whole-number label is read as its decimal text,
//   so that 1 in a JSONL file and 1 in a CSV file are the same label)
//
// A message reads "<file> line 7: field \"output\" is a number, expected a string" (JSONL, CSV) or
// "<file> element [6]: ..." (a JSON array); files over kMaxDataFileBytes, JSON nested deeper than
// kMaxDataJsonDepth and more than kMaxClasses labels are refused (error.h).
#pragma once
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "nn/finetune/template.h"

namespace finetune {

// One instruction example: a record of the book's form, or a conversation.
using InstructionExample = std::variant<AlpacaRecord, Conversation>;

// FinetuneError (naming the file, the line or element, and the field) for a file that cannot be read, a
// record that is not an object, a missing or mistyped field, a role other than system/user/assistant, a
// system message after the first, a conversation without an assistant message, and a file with no records.
std::vector<InstructionExample> read_instruction_data(const std::string& path);
// The example as a conversation in `chat`'s terms (an Alpaca record becomes a user and an assistant message).
Conversation to_conversation(const InstructionExample& example, const ChatTemplate& chat);

struct TextExample {
  std::string text;
  std::string label;
  std::string place;  // "line 12" or "element [11]", for a message about this example
};

struct ClassificationData {
  std::vector<TextExample> examples;
  // The distinct labels in the order they first appear in the file: class i is labels[i]. First-seen
  // order lets the file's author choose the numbering (the book's spam data lists "ham" first: class 0),
  // and does not depend on the split's seed (the checkpoint stores this list).
  std::vector<std::string> labels;
};

// FinetuneError for an unknown extension, a header without "label" or "text", a row with another number
// of fields than the header, an unclosed quote, text after a closing quote or a quote inside an unquoted
// field, an empty label or text, text that is not UTF-8, too many labels, and a file with no examples.
ClassificationData read_classification_data(const std::string& path);

// Each example's class in `labels` (a checkpoint's list: eval reads a file with the labels training saw).
// FinetuneError naming the file, the example's place and the label when one is not in `labels`.
std::vector<int64_t> label_indices(const ClassificationData& data, const std::vector<std::string>& labels,
                                   const std::string& path);

}  // namespace finetune
