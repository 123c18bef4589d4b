// data.cpp — see data.h.
#include "nn/finetune/data.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "nn/finetune/error.h"
#include "nn/json_depth.h"
#include "nn/tokenizer/json_file.h"

namespace finetune {
namespace {

using nlohmann::json;

// Where a record is, for messages: the file and "line 7" or "element [6]".
struct Place {
  const std::string& file;
  std::string where;
  [[noreturn]] void refuse(const std::string& why) const { throw FinetuneError(file + " " + where + ": " + why); }
};

// ---- reading the file ----

std::string read_data_file(const std::string& path) {
  const auto refuse = [&](const std::string& why) { return FinetuneError("cannot read the data file '" + path + "': " + why); };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw refuse(std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw refuse("it is a folder");
  // A device or FIFO could be endless.
  if (!S_ISREG(st.st_mode)) throw refuse("it is not a regular file (a device, FIFO or socket)");
  if (uint64_t(st.st_size) > kMaxDataFileBytes)
    throw refuse("it has " + std::to_string(st.st_size) + " bytes, over the limit of " +
                 std::to_string(kMaxDataFileBytes) + " bytes for a data file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw refuse(std::strerror(errno));
  std::string bytes(size_t(st.st_size), '\0');
  in.read(bytes.data(), std::streamsize(bytes.size()));
  bytes.resize(size_t(in.gcount()));
  // Spreadsheets start UTF-8 files with a byte-order mark; it is not part of the first field's name.
  if (bytes.starts_with("\xEF\xBB\xBF")) bytes.erase(0, 3);
  return bytes;
}

std::string extension_of(const std::string& path) {
  const size_t slash = path.find_last_of('/'), dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string ext = path.substr(dot);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext;
}

bool is_blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; });
}

// ---- JSON records ----

std::string described(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    default: return "a number";
  }
}

// `text` parsed, its nesting measured first (nlohmann's parser recurses once per level).
json parse_json(std::string_view text, const Place& place) {
  if (nn::json_nesting_depth(text, kMaxDataJsonDepth) > kMaxDataJsonDepth)
    place.refuse("nests deeper than " + std::to_string(kMaxDataJsonDepth) + " levels");
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    place.refuse("is not valid JSON (at byte " + std::to_string(e.byte) + ")");
  } catch (const json::exception&) {
    place.refuse("is not valid JSON (a number out of range)");
  }
}

// f(record, place) for each record: the elements of a JSON array, or each non-blank line of JSON Lines.
template <typename F>
void each_json_record(const std::string& path, const std::string& text, F&& f) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[') {
    const json all = parse_json(text, Place{path, "(a JSON array)"});
    for (size_t i = 0; i < all.size(); ++i) f(all[i], Place{path, "element [" + std::to_string(i) + "]"});
    return;
  }
  std::istringstream lines(text);
  std::string line;
  for (int64_t number = 1; std::getline(lines, line); ++number) {
    if (is_blank(line)) continue;
    const Place place{path, "line " + std::to_string(number)};
    f(parse_json(line, place), place);
  }
}

void expect_object(const json& value, const std::string& name, const Place& place) {
  if (!value.is_object()) place.refuse(name + " is " + described(value) + ", expected an object");
}

// The string member `key` of `object` (reached as `prefix`), or nothing when absent and not `required`.
std::optional<std::string> string_field(const json& object, const std::string& key, const std::string& prefix,
                                        const Place& place, bool required = true) {
  const auto found = object.find(key);
  const std::string name = "field \"" + prefix + key + "\"";
  if (found == object.end()) {
    if (required) place.refuse(name + " is missing");
    return std::nullopt;
  }
  if (!found->is_string()) place.refuse(name + " is " + described(*found) + ", expected a string");
  return found->get<std::string>();
}

AlpacaRecord alpaca_record(const json& record, const Place& place) {
  return AlpacaRecord{*string_field(record, "instruction", "", place),
                      string_field(record, "input", "", place, /*required=*/false).value_or(""),
                      *string_field(record, "output", "", place)};
}

Conversation conversation(const json& record, const Place& place) {
  const json& messages = record["messages"];
  if (!messages.is_array() || messages.empty())
    place.refuse("field \"messages\" is " + (messages.is_array() ? std::string("empty") : described(messages)) +
                 ", expected an array of messages");
  Conversation out;
  bool has_reply = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string prefix = "messages[" + std::to_string(i) + "].";
    expect_object(messages[i], "field \"messages[" + std::to_string(i) + "]\"", place);
    Message m{*string_field(messages[i], "role", prefix, place), *string_field(messages[i], "content", prefix, place)};
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      place.refuse("field \"" + prefix + "role\" is " + tokenizer::quoted_for_message(m.role) +
                   ", expected system, user or assistant");
    // Every template writes the system prompt once, at the start (Alpaca's is its header).
    if (m.role == "system" && i > 0) place.refuse("field \"" + prefix + "role\" is system: only the first message may be");
    has_reply = has_reply || m.role == "assistant";
    out.push_back(std::move(m));
  }
  if (!has_reply) place.refuse("field \"messages\" has no assistant message (nothing to learn)");
  return out;
}

InstructionExample instruction_example(const json& record, const Place& place) {
  expect_object(record, "the record", place);
  const bool alpaca = record.contains("instruction"), chat = record.contains("messages");
  if (alpaca && chat) place.refuse("has both \"instruction\" and \"messages\": expected one form");
  if (!alpaca && !chat) place.refuse("has neither \"instruction\" (with \"output\") nor \"messages\"");
  if (alpaca) return alpaca_record(record, place);
  return conversation(record, place);
}

void expect_json_extension(const std::string& path, const std::string& ext, const char* extra) {
  if (ext != ".json" && ext != ".jsonl")
    throw FinetuneError("cannot tell the format of the data file '" + path + "' from its extension \"" + ext +
                        "\": expected .json or .jsonl" + extra);
}

// ---- CSV and TSV (RFC 4180) ----

struct Row {
  int64_t line;  // where the row starts (a quoted field may hold newlines)
  std::vector<std::string> fields;
};

bool at_line_end(const std::string& s, size_t i) { return s[i] == '\n' || (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n'); }

// The rows of `text`, fields separated by `separator`; blank lines are skipped.
std::vector<Row> parse_rows(const std::string& path, const std::string& text, char separator) {
  std::vector<Row> rows;
  size_t i = 0;
  int64_t line = 1;
  const auto end_line = [&] { i += text[i] == '\r' ? 2 : 1, ++line; };
  while (i < text.size()) {
    if (at_line_end(text, i)) {
      end_line();
      continue;
    }
    Row row{line, {}};
    const Place place{path, "line " + std::to_string(line)};
    for (bool more = true; more;) {
      std::string field;
      const std::string which = "field " + std::to_string(row.fields.size() + 1);
      if (text[i] == '"') {  // quoted: "" is one quote; separators and newlines are text
        for (++i;; ++i) {
          if (i >= text.size()) place.refuse("the quoted " + which + " is never closed");
          if (text[i] == '"' && (i + 1 >= text.size() || text[i + 1] != '"')) break;
          if (text[i] == '"') ++i;
          if (text[i] == '\n') ++line;
          field += text[i];
        }
        ++i;  // the closing quote
        if (i < text.size() && text[i] != separator && !at_line_end(text, i))
          place.refuse("text after the closing quote of " + which);
      } else {
        while (i < text.size() && text[i] != separator && !at_line_end(text, i)) field += text[i++];
        if (field.find('"') != std::string::npos)
          place.refuse("a quote inside the unquoted " + which + " (quote the whole field and double the quote)");
      }
      row.fields.push_back(std::move(field));
      more = i < text.size() && text[i] == separator;
      if (more) ++i;
    }
    if (i < text.size()) end_line();
    rows.push_back(std::move(row));
  }
  return rows;
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    const int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
    if (extra < 0 || i + extra >= s.size()) return false;
    uint32_t code = extra == 0 ? c : c & (0x3F >> extra);
    for (int k = 1; k <= extra; ++k) {
      const unsigned char next = s[i + k];
      if ((next & 0xC0) != 0x80) return false;
      code = code << 6 | (next & 0x3F);
    }
    static const uint32_t kSmallest[] = {0, 0x80, 0x800, 0x10000};  // shorter forms are overlong
    if (code < kSmallest[extra] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

std::vector<TextExample> delimited_examples(const std::string& path, const std::string& text, char separator) {
  const std::vector<Row> rows = parse_rows(path, text, separator);
  if (rows.empty()) throw FinetuneError(path + ": the file is empty (expected a header row such as label,text)");
  const Row& header = rows.front();
  const auto column = [&](const char* name) {
    for (size_t k = 0; k < header.fields.size(); ++k)
      if (lowercase(header.fields[k]) == name) return k;
    Place{path, "line " + std::to_string(header.line)}.refuse(std::string("the header row has no \"") + name +
                                                               "\" column (expected a header such as label,text)");
  };
  const size_t label_column = column("label"), text_column = column("text");
  std::vector<TextExample> out;
  for (size_t r = 1; r < rows.size(); ++r) {
    const Place place{path, "line " + std::to_string(rows[r].line)};
    if (rows[r].fields.size() != header.fields.size())
      place.refuse("has " + std::to_string(rows[r].fields.size()) + " fields, the header row " +
                   std::to_string(header.fields.size()));
    TextExample example{rows[r].fields[text_column], rows[r].fields[label_column], place.where};
    for (const auto& [name, value] : {std::pair{"label", &example.label}, std::pair{"text", &example.text}})
      if (!is_valid_utf8(*value)) place.refuse(std::string("field \"") + name + "\" is not valid UTF-8");
    out.push_back(std::move(example));
  }
  return out;
}

std::vector<TextExample> json_text_examples(const std::string& path, const std::string& text) {
  std::vector<TextExample> out;
  each_json_record(path, text, [&](const json& record, const Place& place) {
    expect_object(record, "the record", place);
    TextExample example{*string_field(record, "text", "", place), "", place.where};
    const auto label = record.find("label");
    if (label == record.end()) place.refuse("field \"label\" is missing");
    if (label->is_string()) example.label = label->get<std::string>();
    else if (label->is_number_integer()) example.label = label->dump();
    else place.refuse("field \"label\" is " + described(*label) + ", expected a string or a whole number");
    out.push_back(std::move(example));
  });
  return out;
}

}  // namespace

std::vector<InstructionExample> read_instruction_data(const std::string& path) {
  expect_json_extension(path, extension_of(path), "");
  const std::string text = read_data_file(path);
  std::vector<InstructionExample> out;
  each_json_record(path, text, [&](const json& record, const Place& place) { out.push_back(instruction_example(record, place)); });
  if (out.empty()) throw FinetuneError(path + ": the file holds no examples");
  return out;
}

Conversation to_conversation(const InstructionExample& example, const ChatTemplate& chat) {
  if (const auto* record = std::get_if<AlpacaRecord>(&example)) return from_alpaca(*record, chat);
  return std::get<Conversation>(example);
}

ClassificationData read_classification_data(const std::string& path) {
  const std::string ext = extension_of(path);
  if (ext != ".csv" && ext != ".tsv") expect_json_extension(path, ext, ", .csv or .tsv");
  const std::string text = read_data_file(path);
  ClassificationData data;
  data.examples = ext == ".csv" ? delimited_examples(path, text, ',')
                  : ext == ".tsv" ? delimited_examples(path, text, '\t')
                                  : json_text_examples(path, text);
  if (data.examples.empty()) throw FinetuneError(path + ": the file holds no examples");
  for (const TextExample& example : data.examples) {
    const Place place{path, example.place};
    // An empty text has no last token for the classifier to read.
    if (example.text.empty()) place.refuse("field \"text\" is empty");
    if (example.label.empty()) place.refuse("field \"label\" is empty");
    if (std::find(data.labels.begin(), data.labels.end(), example.label) != data.labels.end()) continue;
    if (data.labels.size() == kMaxClasses)
      place.refuse("brings a label past the limit of " + std::to_string(kMaxClasses) + " classes");
    data.labels.push_back(example.label);
  }
  return data;
}

std::vector<int64_t> label_indices(const ClassificationData& data, const std::vector<std::string>& labels,
                                   const std::string& path) {
  std::vector<int64_t> out;
  for (const TextExample& example : data.examples) {
    const auto found = std::find(labels.begin(), labels.end(), example.label);
    if (found == labels.end())
      Place{path, example.place}.refuse("the label " + tokenizer::quoted_for_message(example.label) + " is not one of the model's " +
                                        std::to_string(labels.size()) + " classes");
    out.push_back(found - labels.begin());
  }
  return out;
}

}  // namespace finetune
