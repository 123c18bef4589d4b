// classify.cpp — train --task classify, scratchgrad classify and eval --task classify (classify.h).
#include "classify.h"

#include "classify_files.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <ostream>
#include <span>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "autograd/autograd.h"
#include "command_line.h"
#include "finetune.h"
#include "folders.h"
#include "guards.h"
#include "model_files.h"
#include "nn/finetune/classifier.h"
#include "nn/finetune/collate.h"
#include "nn/finetune/data.h"
#include "nn/finetune/error.h"
#include "nn/finetune/seeded.h"
#include "nn/hf_folder.h"
#include "nn/lora.h"
#include "nn/numbers.h"
#include "nn/safetensors.h"
#include "nn/tokenizer/tokenizer.h"
#include "optim/optim.h"
#include "ranks.h"
#include "sampling.h"
#include "token_text.h"

namespace cli {

using namespace autograd;
using finetune::ClassifyExample;
using finetune::Classifier;

// ------------------------------------------------------------------------------------------- the flags

namespace {

// The flags of one task only: given with another, each is refused, naming what it is for.
struct TaskFlag {
  const char* flag;
  const char* task;
  const char* is_for;
};
const std::vector<TaskFlag>& task_flags() {
  static const std::vector<TaskFlag> flags{
      {"--data", "classify", "the labelled texts of --task classify"},
      {"--train-blocks", "classify", "--task classify (how many of the last blocks train)"},
      {"--split", "classify", "--task classify (the training, validation and test fractions of --data)"},
      {"--epochs", "classify", "--task classify (passes over the training split)"},
      {"--max-length", "classify", "--task classify (the tokens of a text the classifier reads)"},
      {"--text", "text", "--task text (next-token training on a text); --task classify reads --data FILE"},
      {"--resume", "text", "--task text (a classification run is not resumed)"},
      {"--sample", "text", "--task text (a classifier generates no text)"},
      {"--save-every", "text", "--task text (a classification run saves at its end)"},
      {"--accumulate", "text", "--task text"},
      {"--graph", "text", "--task text"},
      {"--plot", "text", "--task text"},
      {"--deterministic-reduce", "text", "--task text under mpirun"},
      {"--reduce-shards", "text", "--task text under mpirun"},
      {"--check-every", "text", "--task text under mpirun"},
      {"--no-overlap", "text", "--task text under mpirun"},
      {"--allow-other-text", "text", "--task text --resume"},
  };
  return flags;
}

}  // namespace

void apply_task_options(TrainOptions& o, const std::function<bool(const char*)>& given) {
  require(o.task == "text" || o.task == "classify",
          fmt::format("--task must be text (next-token training on --text) or classify (a label for each text of "
                      "--data), got '{}'",
                      o.task));
  for (const TaskFlag& f : task_flags())
    if (given(f.flag) && o.task != f.task)
      throw UsageError(fmt::format("{} is for {}; this run is --task {}: leave it out", f.flag, f.is_for, o.task));
  if (o.task != "classify") return;
  require(!o.data_file.empty(), "--task classify needs --data FILE (CSV or TSV with a label and a text column, or "
                                "JSONL of {\"text\": ..., \"label\": ...})");
  require(!o.init.empty() || o.model != "mini",
          "--task classify trains a GPT or a Llama: give --init FILE (GPT-2's weights, a Hugging Face folder or a "
          "checkpoint of ours) or --model gpt|llama to train one from scratch");
  require(o.init.empty() || !given("--context"),
          fmt::format("--context cannot be given with --init {}: the model's context is its own; --max-length cuts "
                      "the texts",
                      o.init));
  require(!(given("--steps") && given("--epochs")), "give --steps or --epochs, not both: each says how long to train");
  require(!(given("--train-blocks") && given("--lora-rank")),
          "--train-blocks and --lora-rank each say what trains: choose one (LoRA trains the adapters and the head)");
  if (o.init.empty()) return;  // from scratch: the preset's recipe
  // The book's recipe for fine-tuning a classifier (chapter 6): batch 8, AdamW lr 5e-5. Adapters start from
  // zero and take a larger rate.
  if (!given("--batch")) o.batch = 8;
  if (!given("--lr")) o.lr = o.lora_rank > 0 ? 1e-3 : 5e-5;
}

namespace {

// ------------------------------------------------------------------------------ the model to train

// The model a classification run starts from, and the tokenizer its texts are read with.
struct Backbone {
  std::shared_ptr<nn::LanguageModel> model;
  RunTokenizer tokenizer;
  Vocabulary vocab{std::u32string()};  // char: the characters
};

// --tokenizer, when given with --init, must be the file's own.
void check_tokenizer_fits(const TrainOptions& o, const std::string& kind, const std::string& why) {
  require(o.tokenizer.empty() || o.tokenizer == kind,
          fmt::format("--tokenizer {} does not fit {}: {} (leave --tokenizer out, or give --tokenizer {})", o.tokenizer,
                      o.init, why, kind));
}

// Our Llama checkpoints record the shape of Llama 2 and 3.0, SmolLM2 and Mistral (model_files.h's
// llama_metadata): a classifier of another Llama-family model could be trained but not read back, so its
// --save is refused before the run.
void refuse_unsaveable(const nn::LlamaConfig& c, const std::string& path) {
  std::vector<std::string> unrecorded;
  if (c.attention_bias) unrecorded.push_back("q/k/v biases (attention_bias)");
  if (c.qk_norm) unrecorded.push_back("q/k norms");
  if (c.rope_scaling) unrecorded.push_back("rope_scaling");
  if (c.head_dim > 0 && c.head_dim * c.num_attention_heads != c.hidden_size) unrecorded.push_back("its own head_dim");
  if (unrecorded.empty()) return;
  throw UsageError(fmt::format("--save: a classifier of {} cannot be saved yet: our checkpoints do not record its {} "
                               "(train without --save to see its accuracy)",
                               path, fmt::join(unrecorded, ", ")));
}

RunTokenizer gpt2_tokenizer_from(const std::string& file) {
  RunTokenizer t;
  t.kind = "gpt2";
  t.gpt2_path = absolute_path(file);
  t.bpe = std::make_shared<tokenizer::Tokenizer>(load_gpt2_tokenizer_for("train", file));
  t.gpt2_hash = t.bpe->fingerprint();
  return t;
}

// --init's weights: a Hugging Face folder (its tokenizer.json), GPT-2's file (GPT-2's tokenizer from
// --tokenizer-file) or a GPT or Llama of ours (its own tokenizer; a LoRA run's adapters merged in).
Backbone load_backbone(const TrainOptions& o) {
  Backbone b;
  if (nn::is_hf_folder(o.init)) {
    FolderModel folder = open_folder(o.init, "train --init", o.init_heads > 0);
    if (!o.save.empty() && !folder.folder.is_gpt2()) refuse_unsaveable(folder.folder.llama, o.init);
    check_tokenizer_fits(o, "gpt2", "the folder's model reads its tokenizer.json's tokens");
    const std::string file = o.tokenizer_file.empty() ? folder_tokenizer_file(o.init) : o.tokenizer_file;
    require(!file.empty(), fmt::format("--init {}: the folder has no tokenizer.json to read --data with: give "
                                       "--tokenizer-file (the model's tokenizer.json)",
                                       o.init));
    b.model = std::move(folder.model);
    b.tokenizer = gpt2_tokenizer_from(file);
    return b;
  }
  if (std::unique_ptr<nn::GPTModel> gpt2 = load_gpt2_weights(o.init, o.init_heads)) {
    check_tokenizer_fits(o, "gpt2", "GPT-2's weights read GPT-2's tokens (with --tokenizer-file DIR)");
    require(!o.tokenizer_file.empty(), fmt::format("--init {}: GPT-2's weights read GPT-2's tokens: give "
                                                   "--tokenizer-file (the folder of encoder.json and vocab.bpe, or a "
                                                   "tokenizer.json)",
                                                   o.init));
    b.model = std::move(gpt2);
    b.tokenizer = gpt2_tokenizer_from(o.tokenizer_file);
    return b;
  }
  LoadedModel ours = load_model(o.init, o.tokenizer_file);
  if (!ours.decoder())
    throw UsageError(fmt::format("--init {}: a checkpoint of the workshop's one-layer model; a classifier is made of a "
                                 "GPT or a Llama (GPT-2's weights, a Hugging Face folder, or a checkpoint of train "
                                 "--model gpt or llama)",
                                 o.init));
  if (ours.gpt) check_heads_agree(o.init_heads, *ours.gpt, o.init);
  check_tokenizer_fits(o, ours.tokenizer.kind, fmt::format("the checkpoint reads its own {} tokenizer", ours.tokenizer.kind));
  if (ours.gpt) b.model = std::move(ours.gpt);
  else b.model = std::move(ours.llama);
  if (!nn::lora_parameters(*b.model).empty()) nn::merge_lora(*b.model);
  b.tokenizer = ours.tokenizer;
  b.vocab = ours.vocab;
  return b;
}

// From scratch: the tokenizer learned from (char, bpe) or read for (gpt2) the training texts, and a new
// model of the run's shape (drawn after manual_seed).
Backbone new_backbone(const TrainOptions& o, const finetune::ClassificationData& data, const finetune::Split& split) {
  Backbone b;
  std::string training_text;
  for (size_t i : split.train) training_text += data.examples[i].text + "\n";
  if (o.tokenizer == "char") {
    std::string all;  // every character of the file: classify and eval must read the validation and test texts
    for (const finetune::TextExample& e : data.examples) all += e.text;
    b.vocab = Vocabulary::from_text(decode_utf8(all));
  } else if (o.tokenizer == "bpe") {
    require(o.vocab_size >= 256 && o.vocab_size <= 65536,
            fmt::format("--vocab-size must be in 256..65536 for --tokenizer bpe, got {}", o.vocab_size));
    tokenizer::TrainOptions t;
    t.vocab_size = int(o.vocab_size);
    b.tokenizer.kind = "bpe";
    try {
      b.tokenizer.bpe = std::make_shared<tokenizer::Tokenizer>(tokenizer::train(training_text, t));
    } catch (const tokenizer::TokenizerError& e) {
      throw UsageError(fmt::format("train: --tokenizer bpe on the training texts of {}: {}", o.data_file, e.what()));
    }
  } else {
    require(!o.tokenizer_file.empty(), "--tokenizer gpt2 needs --tokenizer-file (the folder of GPT-2's encoder.json and "
                                       "vocab.bpe, or a tokenizer.json)");
    b.tokenizer = gpt2_tokenizer_from(o.tokenizer_file);
  }
  const int64_t vocab = b.tokenizer.is_char() ? b.vocab.size() : b.tokenizer.bpe->vocab_size();
  manual_seed(o.seed);
  if (o.model == "llama") {
    nn::LlamaConfig c;
    c.vocab_size = vocab, c.hidden_size = o.dim, c.intermediate_size = o.ffn_dim, c.num_hidden_layers = o.layers;
    c.num_attention_heads = o.heads, c.num_key_value_heads = o.kv_heads, c.max_position_embeddings = o.context;
    c.rope_theta = 10000.0, c.tie_word_embeddings = true;  // as train --model llama makes one
    b.model = std::make_shared<nn::LlamaModel>(c);
  } else {
    b.model = std::make_shared<nn::GPTModel>(nn::GPTConfig{.vocab_size = vocab, .context_length = o.context,
                                                           .emb_dim = o.dim, .n_heads = o.heads, .n_layers = o.layers,
                                                           .drop_rate = o.dropout, .qkv_bias = false});
  }
  return b;
}

// What trains: "all", or the last N blocks (with the final norm and the head), or (--lora-rank) LoRA adapters
// and the head.
void choose_what_trains(Classifier& classifier, const TrainOptions& o) {
  if (o.lora_rank > 0) {
    for (Tensor& p : classifier.parameters()) p.requires_grad_(false);
    nn::add_lora(*classifier.backbone, lora_config(o, *classifier.backbone));
    for (Tensor p : classifier.head->parameters()) p.requires_grad_(true);
    return;
  }
  const int64_t blocks = finetune::block_count(*classifier.backbone);
  int64_t n = -1;
  if (o.train_blocks != "all") {
    const std::optional<int64_t> parsed = nn::parse_whole(o.train_blocks, 0, blocks);
    require(parsed.has_value(), fmt::format("--train-blocks must be all or a whole number from 0 to {} (the model's "
                                            "blocks), got '{}'",
                                            blocks, o.train_blocks));
    n = *parsed;
  }
  finetune::freeze_for_classification(classifier, n);
}

// AdamW over the parameters that train: the Linear weights decayed, the rest (norms, biases, embeddings) not.
optim::AdamW classifier_optimizer(const Classifier& classifier, const TrainOptions& o) {
  auto [decay, no_decay] = nn::weight_decay_groups(classifier);
  auto trained = [](const nn::NamedTensors& group) {
    std::vector<Tensor> out;
    for (const auto& [name, p] : group)
      if (p.requires_grad()) out.push_back(p);
    return out;
  };
  std::vector<Tensor> decayed = trained(decay), plain = trained(no_decay);
  const optim::AdamW::Options options{.lr = o.lr, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                                    .weight_decay = decayed.empty() ? 0.0 : o.weight_decay};
  optim::AdamW opt(decayed.empty() ? plain : decayed, options);
  if (!decayed.empty() && !plain.empty()) opt.add_param_group(plain, {{"weight_decay", 0.0}});
  return opt;
}

// ------------------------------------------------------------------------------ the checkpoint

void save_classifier(const std::string& path, const Classifier& classifier, const Backbone& b,
                     const std::vector<std::string>& labels, const TrainOptions& o, int64_t cut,
                     const std::map<std::string, std::string>& scores) {
  const nn::LanguageModel& model = *classifier.backbone;
  std::map<std::string, std::string> m;
  const Vocabulary vocab = b.tokenizer.is_char() ? b.vocab : Vocabulary(std::u32string());
  if (const auto* llama = dynamic_cast<const nn::LlamaModel*>(&model)) m = llama_metadata(llama->cfg, vocab, U"", o.steps);
  else m = gpt_metadata(dynamic_cast<const nn::GPTModel&>(model).cfg, vocab, U"", o.steps,
                        head_is_tied(dynamic_cast<const nn::GPTModel&>(model)));
  if (!b.tokenizer.is_char()) m.merge(b.tokenizer.metadata());
  m["classify.model_format"] = m["format"];  // what load_model reads the model with
  m["format"] = kClassifierFormat;
  m["classify.labels"] = std::to_string(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) m[fmt::format("classify.label.{}", i)] = labels[i];
  m["classify.max_length"] = std::to_string(cut);
  m["run.data"] = absolute_path(o.data_file);
  m["run.init"] = o.init.empty() ? "" : absolute_path(o.init);
  m["run.train_blocks"] = o.lora_rank > 0 ? fmt::format("lora rank {}", o.lora_rank) : o.train_blocks;
  m["run.split"] = o.split;
  m["run.seed"] = std::to_string(o.seed);
  m["run.lr"] = fmt::format("{:.17g}", o.lr);
  m["run.batch"] = std::to_string(o.batch);
  m.merge(std::map<std::string, std::string>(scores));
  nn::NamedTensors tensors = decoder_state(model);
  tensors.emplace_back("classify.head.weight", classifier.head->weight);
  tensors.emplace_back("classify.head.bias", classifier.head->bias);
  nn::save_safetensors(path, tensors, m);
}

// --------------------------------------------------------------------------------- training

// A run's progress: every --eval-every steps, the batch's loss, and accuracy and loss on (up to five
// batches of) the training and validation parts, as the book's evaluate_model reports them.
std::string progress_line(int64_t step, double loss, const Score& train, const Score* val, double seconds) {
  std::string line = fmt::format("step {:>4} | loss {:.3f} | train acc {:.3f} loss {:.3f}", step, loss, train.accuracy,
                                 train.loss);
  if (val) line += fmt::format(" | val acc {:.3f} loss {:.3f}", val->accuracy, val->loss);
  return line + fmt::format(" | {} elapsed", format_duration(seconds));
}

std::string part_line(const char* name, const Score& s) {
  if (s.count == 0) return fmt::format("{:<10} no examples", name);
  return fmt::format("{:<10} accuracy {:.3f} loss {:.4f} ({} examples)", name, s.accuracy, s.loss, s.count);
}

// The data of a run: the texts and labels of --data, split (--split, --seed) into its three parts.
struct RunData {
  finetune::ClassificationData data;
  std::vector<int64_t> labels;  // each example's class
  finetune::Split split;
};

// Reads and splits --data; with --epochs, sets the steps (and the warm-up and reports left to their
// defaults) from the training part's size.
RunData read_run_data(TrainOptions& o) {
  RunData d{read_data(o.data_file), {}, {}};
  require(d.data.labels.size() >= 2, fmt::format("{}: every example has the label '{}': a classifier needs at least "
                                                 "two labels",
                                                 o.data_file, one_line(d.data.labels.front())));
  d.labels = finetune::label_indices(d.data, d.data.labels, o.data_file);
  try {
    d.split = finetune::split_examples(d.data.examples.size(), finetune::parse_split(o.split), o.seed);
  } catch (const finetune::FinetuneError& e) {
    throw UsageError(std::string("--") + e.what());  // "--split \"0.5,0.5\": ..."
  }
  require(!d.split.train.empty(), fmt::format("--split {} leaves no training examples of the {} in {}", o.split,
                                              d.data.examples.size(), o.data_file));
  if (o.given.count("--epochs")) {
    require(o.epochs >= 1 && o.epochs <= int64_t(1) << 40,
            fmt::format("--epochs must be from 1 to 2^40, got {}", o.epochs));
    o.steps = (o.epochs * int64_t(d.split.train.size()) + o.batch - 1) / o.batch;
    if (!o.given.count("--warmup")) o.warmup = o.steps / 10;
    if (!o.given.count("--eval-every")) o.eval_every = std::max<int64_t>(o.steps / 10, 1);
  }
  return d;
}

// The model's embedding must have a row for every id the tokenizer makes (a Hugging Face model may have
// more rows than its tokenizer has tokens).
void check_vocabulary_fits(const Backbone& b, const TrainOptions& o) {
  const int64_t vocab = b.tokenizer.is_char() ? b.vocab.size() : b.tokenizer.bpe->vocab_size();
  require(vocab <= b.model->vocab_size(),
          fmt::format("{} has a vocabulary of {} tokens and its {} tokenizer {}: the model has no row for the tokenizer's "
                      "last ids",
                      o.init, b.model->vocab_size(), b.tokenizer.kind, vocab));
}

// The weights, the trained ones' gradients and Adam moments, and a batch of the longest texts' activations
// (about 24 numbers a position, a block and a unit of width, and the attention scores, as a block keeps
// them for backward) must fit the machine's memory.
void check_classifier_fits(const Classifier& classifier, int64_t trained, int64_t longest, const TrainOptions& o) {
  const nn::LanguageModel& model = *classifier.backbone;
  const double positions = double(o.batch) * double(longest) * double(finetune::block_count(model));
  check_fits_in_memory(4.0 * double(classifier.num_parameters()) + 12.0 * double(trained) +
                           4.0 * positions * (24.0 * double(finetune::hidden_width(model)) + 4.0 * double(longest)),
                       fmt::format("a classifier of {} at --batch {} and {} tokens a text",
                                   o.init.empty() ? "a new model" : o.init, o.batch, longest));
}

// The run's first two lines: the data, and the model with what trains and the recipe.
void describe_run(const RunData& d, const Backbone& b, const Classifier& classifier, int64_t trained, int64_t cut,
                  const TrainOptions& o, std::ostream& out) {
  out << fmt::format("classifying {} texts of {} into {} classes ({}): {} to train, {} to validate, {} to test\n",
                     d.data.examples.size(), o.data_file, d.data.labels.size(), fmt::join(d.data.labels, ", "),
                     d.split.train.size(), d.split.validation.size(), d.split.test.size());
  const std::string what_trains = o.lora_rank > 0 ? fmt::format("LoRA rank {} adapters and the head", o.lora_rank)
                                  : o.train_blocks == "all" ? std::string("every parameter the classifier uses")
                                                            : fmt::format("the last {} blocks, the final norm and the head",
                                                                          o.train_blocks);
  const nn::LanguageModel& model = *b.model;
  out << fmt::format("{} ({}), {} blocks, width {}: {} of {} parameters train ({}); {} steps of batch {}, lr {}, texts "
                     "cut at {} tokens, on {}\n",
                     o.init.empty() ? fmt::format("a new {}", o.model == "llama" ? "Llama" : "GPT") : o.init,
                     b.tokenizer.kind == "char" ? "characters" : b.tokenizer.kind + " tokens",
                     finetune::block_count(model), finetune::hidden_width(model), trained, classifier.num_parameters(),
                     what_trains, o.steps, o.batch, o.lr, cut, o.device);
}

// The optimizer steps: each a batch of the training part, in a new shuffled order every pass; a progress
// line every --eval-every steps and at the last.
void train_steps(Classifier& classifier, const std::vector<ClassifyExample>& examples, const finetune::Split& split,
                 const Batching& batching, const TrainOptions& o, std::ostream& out) {
  std::vector<Tensor> trained;  // (after to(device): the tensors the optimizer updates)
  for (const auto& [name, p] : finetune::trainable_parameters(classifier)) trained.push_back(p);
  optim::AdamW opt = classifier_optimizer(classifier, o);
  optim::LambdaLR schedule(opt, optim::warmup_cosine(o.warmup, o.steps, 0.1));
  // Five batches of each part for the progress lines (the book's eval_iter = 5), the whole parts at the end.
  const size_t shown = size_t(5 * o.batch);
  const std::span<const size_t> train_shown(split.train.data(), std::min(shown, split.train.size()));
  const std::span<const size_t> val_shown(split.validation.data(), std::min(shown, split.validation.size()));
  finetune::SeededRandom random(o.seed);
  std::vector<size_t> order = split.train;
  size_t next = order.size();  // the order is shuffled at the start of every pass
  const auto start = std::chrono::steady_clock::now();
  classifier.train();
  for (int64_t step = 0; step < o.steps; ++step) {
    std::vector<size_t> rows;
    while (int64_t(rows.size()) < o.batch) {
      if (next == order.size()) random.shuffle(order), next = 0;
      rows.push_back(order[next++]);
    }
    const finetune::ClassifyBatch batch = finetune::collate_classify(examples, rows, batching.padding_id, batching.cut);
    classifier.zero_grad();
    const Tensor logits = classifier(batch.input_tensor().to(batching.device), batch.last_tensor().to(batching.device));
    CallSite label("loss = cross_entropy(logits, labels)");
    const Tensor loss = cross_entropy(logits, batch.label_tensor().to(batching.device));
    loss.backward();
    const double loss_value = loss.item();
    if (!std::isfinite(loss_value))
      throw UsageError(fmt::format("step {}: the loss is {}: the run diverged, so it stops here ({} was not written); "
                                   "try a smaller --lr than {}",
                                   step, loss_value, o.save.empty() ? "nothing" : o.save, o.lr));
    optim::ClipCoefficient clip;
    if (o.clip > 0) clip = optim::clip_coefficient(trained, o.clip);
    opt.step(clip.coefficient);
    schedule.step();
    if (step % o.eval_every != 0 && step != o.steps - 1) continue;
    classifier.eval();
    const Score train_score = score(classifier, examples, train_shown, batching);
    const Score val_score = score(classifier, examples, val_shown, batching);
    classifier.train();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out << progress_line(step, loss_value, train_score, val_shown.empty() ? nullptr : &val_score, seconds) << "\n"
        << std::flush;
  }
  classifier.eval();
}

}  // namespace

int train_classifier(TrainOptions o, std::ostream& out) {
  use_kernels(o.kernels);
  Ranks ranks;
  if (ranks.size() > 1) throw UsageErrorOnEveryRank("--task classify trains on one process: run it without mpirun");
  const Device device = checked_device(o.device);
  check_distinct_files({{"--data", o.data_file}, {"--save", o.save}, {"--init", o.init}});
  if (!o.save.empty()) o.save = checkpoint_target("--save", o.save), nn::check_writable(o.save);
  std::string note;
  o.threads = usable_threads(o.threads, note);
  if (!note.empty()) out << note << "\n";
  set_num_threads(o.threads);
  use_numerics_for("gpt", o.numerics);
  require(o.max_length >= 0, fmt::format("--max-length must be at least 1 (or 0: the model's context), got {}", o.max_length));
  const RunData d = read_run_data(o);
  check_train_options(o);

  Backbone b = o.init.empty() ? new_backbone(o, d.data, d.split) : load_backbone(o);
  set_dropout(*b.model, o.dropout);
  check_vocabulary_fits(b, o);
  const TextTokenizer tok(b.tokenizer, b.vocab);
  const std::vector<ClassifyExample> examples = encode_examples(d.data, d.labels, tok, o.data_file);
  const int64_t context = b.model->context_length();
  const int64_t cut = o.max_length == 0 ? context : std::min(o.max_length, context);
  if (o.max_length > context)
    out << fmt::format("--max-length {} is longer than the model's context: texts are cut at {} tokens\n", o.max_length, context);
  int64_t longest = 1;  // the longest text a batch can hold
  for (const ClassifyExample& e : examples) longest = std::max(longest, std::min(int64_t(e.ids.size()), cut));

  manual_seed(o.seed);  // the head's initial values
  Classifier classifier(b.model, int64_t(d.data.labels.size()));
  choose_what_trains(classifier, o);
  classifier.to(device);
  int64_t trained = 0;
  for (const auto& [name, p] : finetune::trainable_parameters(classifier)) trained += p.numel();
  check_classifier_fits(classifier, trained, longest, o);
  describe_run(d, b, classifier, trained, cut, o, out);
  const Batching batching{.padding_id = padding_id(tok), .cut = cut, .batch = o.batch, .device = device};
  train_steps(classifier, examples, d.split, batching, o, out);

  std::map<std::string, std::string> accuracies;  // for the checkpoint (info shows them)
  for (const auto& [name, part] : {std::pair{"train", &d.split.train}, {"validation", &d.split.validation},
                                   {"test", &d.split.test}}) {
    const Score s = score(classifier, examples, *part, batching);
    out << part_line(name, s) << "\n";
    if (s.count > 0) accuracies[fmt::format("classify.accuracy.{}", name)] = fmt::format("{:.4f}", s.accuracy);
  }
  if (o.save.empty()) return 0;
  if (o.lora_rank > 0) nn::merge_lora(*b.model);  // the checkpoint is a plain model: the adapters added in
  classifier.to(Device::cpu());
  save_classifier(o.save, classifier, b, d.data.labels, o, cut, accuracies);
  out << "saved " << o.save << "\n";
  return 0;
}

}  // namespace cli
