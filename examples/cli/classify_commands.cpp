// classify_commands.cpp — scratchgrad classify, eval --task classify and info on a classifier (classify.h).
#include <algorithm>
#include <numeric>
#include <ostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "autograd/autograd.h"
#include "classify.h"
#include "classify_files.h"
#include "command_line.h"
#include "guards.h"
#include "nn/finetune/error.h"
#include "nn/llama.h"
#include "nn/safetensors.h"

namespace cli {

using namespace autograd;
using finetune::ClassifyExample;

namespace {

// The texts to classify: --prompt, or each line of --text FILE (an empty line is refused: the output has a
// line for each line of the file).
std::vector<std::string> texts_to_classify(const ClassifyOptions& o) {
  require(o.prompt.has_value() != !o.text_file.empty(),
          "classify: give the text, --prompt \"...\" or --text FILE (one text a line)");
  if (o.prompt) {
    require(!o.prompt->empty(), "classify: --prompt is empty");
    return {*o.prompt};
  }
  const std::string text = read_text_file(o.text_file);
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (line.ends_with('\r')) line.pop_back();
    require(!line.empty(), fmt::format("{} line {}: empty (each line is one text to classify)", o.text_file,
                                       lines.size() + 1));
    lines.push_back(std::move(line));
    start = end + 1;
  }
  require(!lines.empty(), fmt::format("{}: no text to classify", o.text_file));
  return lines;
}

}  // namespace

int run_classify(const ClassifyOptions& o, std::ostream& out) {
  std::string note;
  set_num_threads(usable_threads(o.threads, note));
  if (!note.empty()) out << note << "\n";
  use_numerics_for("gpt", o.numerics);
  const std::vector<std::string> texts = texts_to_classify(o);
  const LoadedClassifier c = load_classifier(o.checkpoint, o.tokenizer_file);
  const TextTokenizer tok(c.tokenizer, c.vocab);
  std::vector<ClassifyExample> examples;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string where = o.prompt ? std::string("--prompt") : fmt::format("{} line {}", o.text_file, i + 1);
    try {
      examples.push_back({tok.encode(texts[i]), 0});
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("{}: {}", where, e.what()));
    }
    require(!examples.back().ids.empty(), fmt::format("{}: the text has no tokens", where));
  }
  NoGradGuard no_grad;
  const int64_t per_batch = 8;
  for (size_t first = 0; first < examples.size(); first += per_batch) {
    std::vector<size_t> part(std::min(size_t(per_batch), examples.size() - first));
    std::iota(part.begin(), part.end(), first);
    const finetune::ClassifyBatch batch = finetune::collate_classify(examples, part, padding_id(tok), c.cut);
    const std::vector<float> p = softmax((*c.model)(batch.input_tensor(), batch.last_tensor()), 1).to_vector<float>();
    const size_t classes = c.labels.size();
    for (int64_t r = 0; r < batch.rows; ++r) {
      std::vector<size_t> ranked(classes);
      std::iota(ranked.begin(), ranked.end(), size_t(0));
      const float* row = p.data() + size_t(r) * classes;
      std::stable_sort(ranked.begin(), ranked.end(), [&](size_t a, size_t b) { return row[a] > row[b]; });
      std::string line;
      for (size_t k : ranked) line += fmt::format("{}{} {:.4f}", line.empty() ? "" : "  ", one_line(c.labels[k]), row[k]);
      out << line << "\n";
    }
  }
  return 0;
}

namespace {

// "all", "2" or "lora rank 8", as a run records --train-blocks, in words.
std::string what_trained(const std::string& recorded) {
  if (recorded == "all") return "every parameter the classifier uses";
  if (recorded.starts_with("lora")) return recorded + " adapters and the head";
  return fmt::format("the last {} blocks, the final norm and the head", recorded);
}

}  // namespace

int describe_classifier(const std::string& path, std::ostream& out) {
  const LoadedClassifier c = load_classifier(path, "");
  const nn::Checkpoint ck = nn::load_safetensors(path);  // (its metadata: load_classifier keeps none)
  auto said = [&](const std::string& key) {
    const auto it = ck.metadata.find(key);
    return it == ck.metadata.end() || it->second.empty() ? std::string("-") : one_line(it->second);
  };
  std::vector<std::string> labels;
  for (const std::string& label : c.labels) labels.push_back(one_line(label));
  const nn::LanguageModel& model = *c.model->backbone;
  out << fmt::format("classifier: {} classes ({}), texts cut at {} tokens\n", labels.size(), fmt::join(labels, ", "), c.cut);
  out << fmt::format("model: {}, {} blocks, width {}, {} parameters with the head\n",
                     dynamic_cast<const nn::LlamaModel*>(&model) ? "Llama" : "GPT", finetune::block_count(model),
                     finetune::hidden_width(model), c.model->num_parameters());
  out << fmt::format("tokenizer: {}\n", c.tokenizer.is_char() ? fmt::format("char, {} characters", c.vocab.size())
                                                               : c.tokenizer.kind);
  out << fmt::format("trained: from {} on {}, {} trained, split {}, {} steps\n", said("run.init"), said("run.data"),
                     what_trained(said("run.train_blocks")),
                     said("run.split"), said("steps"));
  out << fmt::format("accuracy: train {}, validation {}, test {}\n", said("classify.accuracy.train"),
                     said("classify.accuracy.validation"), said("classify.accuracy.test"));
  return 0;
}

int eval_classifier(const EvalOptions& o, std::ostream& out) {
  for (const char* flag : {"--text", "--ids-file", "--stride", "--heads"})
    require(!o.given.count(flag), fmt::format("{} is for eval --task text; eval --task classify reads --data FILE", flag));
  require(!o.data_file.empty(), "eval --task classify needs --data FILE (labelled texts, as train --task classify reads them)");
  std::string note;
  set_num_threads(usable_threads(o.threads, note));
  if (!note.empty()) out << note << "\n";
  use_numerics_for("gpt", o.numerics);
  const LoadedClassifier c = load_classifier(o.checkpoint, o.tokenizer_file);
  const finetune::ClassificationData data = read_data(o.data_file);
  std::vector<int64_t> labels;
  try {
    labels = finetune::label_indices(data, c.labels, o.data_file);
  } catch (const finetune::FinetuneError& e) {
    throw UsageError(e.what());
  }
  const TextTokenizer tok(c.tokenizer, c.vocab);
  const std::vector<ClassifyExample> examples = encode_examples(data, labels, tok, o.data_file);
  std::vector<size_t> all(examples.size());
  std::iota(all.begin(), all.end(), size_t(0));
  const Score s = score(*c.model, examples, all, Batching{.padding_id = padding_id(tok), .cut = c.cut, .batch = 8,
                                                           .device = Device::cpu()});
  const size_t classes = c.labels.size();
  std::vector<std::vector<int64_t>> confusion(classes, std::vector<int64_t>(classes, 0));  // [true][predicted]
  for (size_t i = 0; i < examples.size(); ++i) ++confusion[size_t(labels[i])][size_t(s.predicted[i])];
  out << fmt::format("examples {}\nmean loss {:.4f} nats\naccuracy {:.3f}\n", s.count, s.loss, s.accuracy);
  size_t width = 5;  // "label"
  for (const std::string& label : c.labels) width = std::max(width, one_line(label).size());
  out << fmt::format("{:<{}}  precision  recall  examples\n", "label", width);
  for (size_t k = 0; k < classes; ++k) {
    int64_t predicted = 0, actual = 0;
    for (size_t j = 0; j < classes; ++j) predicted += confusion[j][k], actual += confusion[k][j];
    // a class never predicted has no precision, one never present no recall: "-", not a made-up 0 or 1
    const std::string precision = predicted ? fmt::format("{:.3f}", double(confusion[k][k]) / double(predicted)) : "-";
    const std::string recall = actual ? fmt::format("{:.3f}", double(confusion[k][k]) / double(actual)) : "-";
    out << fmt::format("{:<{}}  {:>9}  {:>6}  {:>8}\n", one_line(c.labels[k]), width, precision, recall, actual);
  }
  out << "confusion matrix (a row for each true label, a column for each predicted one):\n";
  size_t cell = 6;
  for (const std::string& label : c.labels) cell = std::max(cell, one_line(label).size());
  std::string header = fmt::format("{:<{}}", "", width);
  for (const std::string& label : c.labels) header += fmt::format("  {:>{}}", one_line(label), cell);
  out << header << "\n";
  for (size_t k = 0; k < classes; ++k) {
    std::string row = fmt::format("{:<{}}", one_line(c.labels[k]), width);
    for (size_t j = 0; j < classes; ++j) row += fmt::format("  {:>{}}", confusion[k][j], cell);
    out << row << "\n";
  }
  return 0;
}

}  // namespace cli
