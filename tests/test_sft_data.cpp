// test_sft_data.cpp — the fine-tuning data readers (nn/finetune/data.h): what they read, and every bad record
// refused with the file, line or element, and field named.
#include <gtest/gtest.h>

#include <fstream>

#include "nn/finetune/data.h"
#include "nn/finetune/error.h"
#include "test_helpers.h"
#include "test_process.h"
#include "test_sft_helpers.h"

namespace {

using namespace finetune;

std::string write(const std::string& name, const std::string& text) {
  const std::string path = testing_process::scratch(name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(SftData, ReadsAlpacaRecordsAndConversationsFromJsonAndJsonl) {
  const std::string array = write("instruct.json", R"([
    {"instruction": "Name a colour.", "input": "", "output": "Blue."},
    {"instruction": "Translate.", "input": "Hallo", "output": "Hello"}
  ])");
  const auto records = read_instruction_data(array);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(std::get<AlpacaRecord>(records[1]).input, "Hallo");
  const std::string lines = write("instruct.jsonl",
                                  "{\"instruction\": \"Name a colour.\", \"output\": \"Blue.\"}\n\n"
                                  "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, "
                                  "{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Yo\"}]}\r\n");
  const auto mixed = read_instruction_data(lines);
  ASSERT_EQ(mixed.size(), 2u);
  EXPECT_EQ(std::get<AlpacaRecord>(mixed[0]).input, "");  // "input" may be left out
  EXPECT_EQ(std::get<Conversation>(mixed[1]).size(), 3u);
  // An Alpaca record becomes a conversation in the template's terms.
  const sft_testing::ByteTokenizer tok = sft_testing::smollm2_like();
  const auto chatml = make_template("chatml", tok);
  const Conversation c = to_conversation(records[1], *chatml);
  EXPECT_EQ(c[0].content, "Translate.\n\nHallo");
  EXPECT_EQ(c[1].content, "Hello");
}

TEST(SftData, RefusesBadInstructionRecordsNamingTheirPlaceAndField) {
  const auto refused = [](const std::string& name, const std::string& text, std::initializer_list<const char*> parts) {
    SCOPED_TRACE(name);
    const std::string path = write(name, text);
    try {
      read_instruction_data(path);
      ADD_FAILURE() << "accepted " << text;
    } catch (const FinetuneError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(path), std::string::npos) << message;
      for (const char* part : parts) EXPECT_NE(message.find(part), std::string::npos) << message << " lacks " << part;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  };
  refused("a.jsonl", "{\"instruction\": \"x\", \"output\": \"y\"}\n{\"instruction\": \"x\"}\n", {"line 2", "\"output\" is missing"});
  refused("b.jsonl", "{\"instruction\": 7, \"output\": \"y\"}\n", {"line 1", "\"instruction\" is a number, expected a string"});
  refused("c.json", "[{\"instruction\": \"x\", \"output\": \"y\"}, 5]", {"element [1]", "is a number, expected an object"});
  refused("d.jsonl", "{\"instruction\": \"x\", \"output\": \"y\"}\n{not json}\n", {"line 2", "not valid JSON"});
  refused("e.jsonl", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"bot\", \"content\": \"y\"}]}\n",
          {"line 1", "messages[1].role", "\"bot\"", "system, user or assistant"});
  refused("f.jsonl", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}\n", {"line 1", "no assistant message"});
  refused("g.jsonl", "{\"messages\": [{\"role\": \"user\"}, {\"role\": \"assistant\", \"content\": \"y\"}]}\n",
          {"messages[0].content", "missing"});
  refused("h.jsonl",
          "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"system\", \"content\": \"s\"}, "
          "{\"role\": \"assistant\", \"content\": \"y\"}]}\n",
          {"messages[1].role", "only the first"});
  refused("i.jsonl", "{\"messages\": [], \"instruction\": \"x\"}\n", {"line 1", "both"});
  refused("j.jsonl", "{\"prompt\": \"x\"}\n", {"line 1", "neither"});
  refused("k.jsonl", "{\"messages\": {}}\n", {"line 1", "\"messages\" is an object"});
  refused("l.jsonl", "\n\n", {"no examples"});
  std::string deep = "{\"messages\": ";
  for (int i = 0; i < 100; ++i) deep += "[";
  refused("m.jsonl", deep + std::string(100, ']') + "}\n", {"line 1", "deeper than 16"});
  refused("m.json", std::string(100, '[') + std::string(100, ']'), {"(a JSON array)", "deeper than 16"});
  refused("n.txt", "{}", {"extension", ".json or .jsonl"});
  refused("o.json", "[{\"instruction\": \"x\", \"output\": \"y\"}", {"not valid JSON"});
  // Not a regular file, and missing.
  const auto folder = testing_process::scratch("folder.json");
  std::filesystem::create_directories(folder);
  EXPECT_THROW_WITH(read_instruction_data(folder.string()), FinetuneError, "cannot read", "it is a folder");
  EXPECT_THROW_WITH(read_instruction_data("/nonexistent/x.jsonl"), FinetuneError, "/nonexistent/x.jsonl", "cannot read");
}

TEST(SftData, ReadsClassificationCsvWithQuotedFieldsPerRfc4180) {
  const std::string path = write("spam.csv",
                                 "\xEF\xBB\xBFLabel,Text\r\n"
                                 "ham,Hello there\r\n"
                                 "spam,\"WIN a prize, now\"\r\n"
                                 "ham,\"She said \"\"hi\"\"\nand left\"\r\n"
                                 "\r\n"
                                 "other,plain\n");
  const ClassificationData data = read_classification_data(path);
  ASSERT_EQ(data.examples.size(), 4u);
  EXPECT_EQ(data.examples[1].text, "WIN a prize, now");
  EXPECT_EQ(data.examples[2].text, "She said \"hi\"\nand left");
  EXPECT_EQ(data.examples[3].place, "line 7");  // the quoted newline counts as a line
  // Labels in the order they first appear: class 0 is ham.
  EXPECT_EQ(data.labels, (std::vector<std::string>{"ham", "spam", "other"}));
  EXPECT_EQ(label_indices(data, data.labels, path), (std::vector<int64_t>{0, 1, 0, 2}));
  // Another file's labels map through the model's list; one it lacks is refused by name.
  EXPECT_EQ(label_indices(data, {"other", "spam", "ham"}, path), (std::vector<int64_t>{2, 1, 2, 0}));
  EXPECT_THROW_WITH(label_indices(data, {"ham", "spam"}, path), FinetuneError, "line 7", "\"other\"", "2 classes");
}

TEST(SftData, ReadsClassificationTsvAndJsonl) {
  const ClassificationData tsv = read_classification_data(write("c.tsv", "text\tlabel\nfine, thanks\tpositive\n"));
  EXPECT_EQ(tsv.examples[0].text, "fine, thanks");
  EXPECT_EQ(tsv.labels, (std::vector<std::string>{"positive"}));
  const ClassificationData jsonl =
      read_classification_data(write("c.jsonl", "{\"text\": \"good\", \"label\": 1}\n{\"text\": \"bad\", \"label\": \"0\"}\n"));
  // A whole-number label is its decimal text: 1 here is "1" in a CSV.
  EXPECT_EQ(jsonl.labels, (std::vector<std::string>{"1", "0"}));
}

TEST(SftData, RefusesBadClassificationFilesNamingLineAndField) {
  const auto refused = [](const std::string& name, const std::string& text, std::initializer_list<const char*> parts) {
    SCOPED_TRACE(name);
    const std::string path = write(name, text);
    try {
      read_classification_data(path);
      ADD_FAILURE() << "accepted " << text;
    } catch (const FinetuneError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(path), std::string::npos) << message;
      for (const char* part : parts) EXPECT_NE(message.find(part), std::string::npos) << message << " lacks " << part;
    }
  };
  refused("a.csv", "text,category\nx,y\n", {"line 1", "no \"label\" column"});
  refused("b.csv", "label,text\nham,hi,there\n", {"line 2", "3 fields", "header row 2"});
  refused("c.csv", "label,text\nham,\"never closed\n", {"line 2", "quoted field 2 is never closed"});
  refused("d.csv", "label,text\nham,\"quoted\" then more\n", {"line 2", "text after the closing quote of field 2"});
  refused("e.csv", "label,text\nham,say \"hi\"\n", {"line 2", "quote inside the unquoted field 2"});
  refused("f.csv", "label,text\n,hello\n", {"line 2", "\"label\" is empty"});
  refused("g.csv", "label,text\nham,\n", {"line 2", "\"text\" is empty"});
  refused("h.csv", "label,text\nham,caf\xE9\n", {"line 2", "\"text\" is not valid UTF-8"});
  refused("i.csv", "label,text\n", {"no examples"});
  refused("j.csv", "", {"empty"});
  refused("k.jsonl", "{\"text\": \"x\", \"label\": 1.5}\n", {"line 1", "\"label\" is a number", "string or a whole number"});
  refused("l.jsonl", "{\"label\": \"x\"}\n", {"line 1", "\"text\" is missing"});
  refused("m.xlsx", "", {"extension", ".csv or .tsv"});
  std::string many = "label,text\n";
  for (size_t i = 0; i <= kMaxClasses; ++i) many.append("l").append(std::to_string(i)).append(",t\n");
  refused("n.csv", many, {"line 1026", "limit of 1024 classes"});
}

}  // namespace
