// json_file.cpp — see json_file.h.
#include "nn/tokenizer/json_file.h"

#include <algorithm>
#include <cctype>
#include <new>

#include "nn/json_depth.h"
#include "nn/tokenizer/error.h"
#include "nn/tokenizer/limits.h"
#include "nn/tokenizer/read_file.h"

namespace tokenizer {

using nlohmann::json;

std::string quoted_for_message(std::string_view text) {
  constexpr size_t kQuotedBytes = 40;
  size_t cut = std::min(text.size(), kQuotedBytes);
  while (cut < text.size() && cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  std::string out = "\"";
  for (char c : text.substr(0, cut)) {
    const auto b = static_cast<unsigned char>(c);
    static const char* hex = "0123456789abcdef";
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (b < 0x20 || b == 0x7F) out += "\\x", out += hex[b >> 4], out += hex[b & 15];
    else out += c;
  }
  return out + (cut < text.size() ? "...\"" : "\"");
}

namespace {

bool is_identifier(std::string_view key) {
  if (key.empty() || std::isdigit(static_cast<unsigned char>(key[0]))) return false;
  return std::all_of(key.begin(), key.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// What a value is, for a message: "a number (7)", "null", "an array", "a string (\"BPE\")".
std::string describe_value(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return value.get<bool>() ? "true" : "false";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float: return "a number (" + value.dump() + ")";  // a scalar: a short dump
    case json::value_t::string: return "a string (" + quoted_for_message(value.get_ref<const std::string&>()) + ")";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    default: return "not a JSON value";
  }
}

// The byte at `offset` (counting from 1, as nlohmann's parse errors do) as a line and a column.
std::string position(std::string_view text, size_t offset) {
  offset = std::min(std::max<size_t>(offset, 1), text.size());
  const std::string_view before = text.substr(0, offset - 1);
  const size_t line = size_t(std::count(before.begin(), before.end(), '\n')) + 1;
  const size_t line_start = before.rfind('\n') == std::string_view::npos ? 0 : before.rfind('\n') + 1;
  return "line " + std::to_string(line) + ", column " + std::to_string(offset - line_start);
}

// Frees `root`'s tree from its last leaves up, never allocating: each step walks down the last children to
// a container whose last child holds nothing below it, and removes that child (a scalar or an empty
// container, whose own destruction allocates nothing). The walk is at most kMaxJsonDepth long.
void free_leaf_by_leaf(json& root) {
  const auto holds_children = [](const json& v) { return (v.is_array() || v.is_object()) && !v.empty(); };
  while (holds_children(root)) {
    json* parent = &root;
    for (;;) {
      json& last = parent->is_array() ? parent->get_ref<json::array_t&>().back()
                                      : std::prev(parent->get_ref<json::object_t&>().end())->second;
      if (!holds_children(last)) break;
      parent = &last;
    }
    if (parent->is_array()) parent->get_ref<json::array_t&>().pop_back();
    else parent->get_ref<json::object_t&>().erase(std::prev(parent->get_ref<json::object_t&>().end()));
  }
}

}  // namespace

JsonField::JsonField(const json& value, const std::string& file, std::string path)
    : value_(&value), file_(&file), path_(std::move(path)) {}

void JsonField::fail(const std::string& why) const {
  throw TokenizerError(*file_ + ": " + (path_.empty() ? std::string("the file") : path_) + " " + why);
}

std::string JsonField::described() const { return describe_value(*value_); }

void JsonField::expect(bool is_right_type, const char* type_wanted) const {
  if (!is_right_type) fail("is " + describe_value(*value_) + ", expected " + type_wanted);
}

std::string JsonField::member_path(std::string_view key) const {
  if (is_identifier(key)) return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  return path_ + "[" + quoted_for_message(key) + "]";
}

JsonField JsonField::operator[](std::string_view key) const {
  std::optional<JsonField> member = find(key);
  if (!member) fail("has no " + quoted_for_message(key));
  return *member;
}

std::optional<JsonField> JsonField::find(std::string_view key) const {
  expect(value_->is_object(), "an object");
  const auto& members = value_->get_ref<const json::object_t&>();
  const auto it = members.find(std::string(key));
  if (it == members.end()) return std::nullopt;
  return JsonField(it->second, *file_, member_path(key));
}

std::string JsonField::string() const {
  expect(value_->is_string(), "a string");
  return value_->get<std::string>();
}

bool JsonField::boolean() const {
  expect(value_->is_boolean(), "true or false");
  return value_->get<bool>();
}

int64_t JsonField::integer(int64_t low, int64_t high) const {
  const auto refuse = [&] {
    fail("is " + describe_value(*value_) + ", not a whole number from " + std::to_string(low) + " to " + std::to_string(high));
  };
  // nlohmann keeps a non-negative whole number as unsigned, a negative one as signed: each is compared whole.
  if (value_->is_number_unsigned()) {
    const uint64_t v = value_->get<uint64_t>();
    if (high < 0 || v > uint64_t(high) || (low > 0 && v < uint64_t(low))) refuse();
    return int64_t(v);
  }
  if (!value_->is_number_integer()) refuse();
  const int64_t v = value_->get<int64_t>();
  if (v < low || v > high) refuse();
  return v;
}

JsonFile::FreedWithoutAllocating::~FreedWithoutAllocating() { free_leaf_by_leaf(value); }

JsonFile::JsonFile(const std::string& path, const char* what) : path_(path) {
  const std::string text = read_file(path, what);
  if (nn::json_nesting_depth(text, kMaxJsonDepth) > kMaxJsonDepth)
    throw TokenizerError(path + ": nests JSON more than " + std::to_string(kMaxJsonDepth) +
                         " levels deep (a tokenizer file needs fewer than 10)");
  // nlohmann's own DOM builder (what json::parse runs), writing into our member: a parse that fails half way
  // leaves a half-built tree there, which the member frees safely.
  nlohmann::detail::json_sax_dom_parser<json> builder(document_.value, true);
  try {
    json::sax_parse(text, &builder);
  } catch (const json::parse_error& e) {
    throw TokenizerError(path + ": not valid JSON (at " + position(text, e.byte) + ")");
  } catch (const json::exception&) {  // a number past a double's range, a container past its largest size
    throw TokenizerError(path + ": not valid JSON (a number or a list too large to hold)");
  } catch (const std::bad_alloc&) {
    free_leaf_by_leaf(document_.value);  // the memory back first, then the message
    throw TokenizerError(path + ": out of memory parsing its " + std::to_string(text.size()) + " bytes of JSON");
  }
}

}  // namespace tokenizer
