// json_file.h — a user's JSON file (tokenizer.json, encoder.json) read with every field's type checked.
//
//   const JsonFile file(path, "the tokenizer.json");  // read, nesting depth checked, parsed
//   const JsonField model = file.root()["model"];      // a member that must be there
//   if (model["type"].string() != "BPE") model["type"].fail("is not \"BPE\"");
//   model["merges"].each_element([](const JsonField& merge) { ... });
//
// A missing field, or one of another type, is a TokenizerError naming the file and the field's path
// ("tokenizer.json: model.type is a number (7), expected a string"), never nlohmann's exception text.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tokenizer {

// A key or string of a file, quoted for a message: as it is (GPT-2's tokens read best as spelt: "Ġthe"),
// with quotes, backslashes and control characters escaped (a message is one line), and cut at a character
// boundary after 40 bytes (a crafted file's key may be megabytes long).
std::string quoted_for_message(std::string_view text);

class JsonField {
 public:
  JsonField(const nlohmann::json& value, const std::string& file, std::string path);

  // An object's member that must be there; `find` gives nothing when it is not.
  JsonField operator[](std::string_view key) const;
  std::optional<JsonField> find(std::string_view key) const;

  std::string string() const;
  bool boolean() const;  // true or false, nothing else
  // A whole number from `low` to `high`, read whole: 2^32 + 5 is out of range, never 5; 5.0 is not whole.
  int64_t integer(int64_t low, int64_t high) const;

  bool is_string() const { return value_->is_string(); }
  bool is_array() const { return value_->is_array(); }
  bool is_object() const { return value_->is_object(); }
  bool is_null() const { return value_->is_null(); }
  bool is_boolean() const { return value_->is_boolean(); }
  size_t size() const { return value_->size(); }  // of an array or object

  // f(const JsonField& element) for each element of an array (which this must be).
  template <typename F>
  void each_element(F&& f) const {
    expect(value_->is_array(), "an array");
    size_t index = 0;
    for (const nlohmann::json& element : *value_) f(JsonField(element, *file_, path_ + "[" + std::to_string(index++) + "]"));
  }
  // f(const std::string& key, const JsonField& value) for each member of an object (which this must be).
  template <typename F>
  void each_member(F&& f) const {
    expect(value_->is_object(), "an object");
    for (const auto& [key, member] : value_->items()) f(key, JsonField(member, *file_, member_path(key)));
  }

  // What the value is, for a message: "a number (7)", "null", "an array", "a string (\"BPE\")".
  std::string described() const;
  // Throws TokenizerError: "<file>: <path> <why>".
  [[noreturn]] void fail(const std::string& why) const;
  const std::string& path() const { return path_; }

 private:
  void expect(bool is_right_type, const char* type_wanted) const;
  std::string member_path(std::string_view key) const;

  const nlohmann::json* value_;
  const std::string* file_;
  std::string path_;  // "model.vocab[\"Ġthe\"]", "model.merges[17]"; empty for the whole file
};

class JsonFile {
 public:
  // Reads `path` (read_file.h: a regular file within kMaxFileBytes), refuses JSON nested deeper than
  // kMaxJsonDepth, then parses it. `what` names the file in messages ("GPT-2's encoder.json").
  JsonFile(const std::string& path, const char* what);
  JsonField root() const { return JsonField(document_.value, path_, ""); }

 private:
  // nlohmann's destructor moves a container's children onto a heap vector before freeing them; when memory
  // has run out (a bad_alloc unwinding through a half-parsed file), that allocation fails inside a noexcept
  // destructor and ends the process. This member frees its tree leaf by leaf instead, allocating nothing.
  struct FreedWithoutAllocating {
    nlohmann::json value;
    FreedWithoutAllocating() = default;
    FreedWithoutAllocating(const FreedWithoutAllocating&) = delete;
    FreedWithoutAllocating& operator=(const FreedWithoutAllocating&) = delete;
    ~FreedWithoutAllocating();
  };

  std::string path_;
  FreedWithoutAllocating document_;
};

}  // namespace tokenizer
