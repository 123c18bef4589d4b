// instruct.cpp — `train --task instruct` and `eval --task instruct` (instruct.h).
#include "instruct.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <numeric>
#include <optional>
#include <ostream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "autograd/autograd.h"
#include "autograd/backend.h"
#include "autograd/cpu/runtime/buffer_cache.h"
#include "finetune.h"
#include "folders.h"
#include "guards.h"
#include "model_files.h"
#include "nn/atomic_file.h"
#include "nn/finetune/collate.h"
#include "nn/finetune/data.h"
#include "nn/finetune/error.h"
#include "nn/finetune/seeded.h"
#include "nn/finetune/synthetic.h"
#include "nn/finetune/template.h"
#include "nn/gpt2.h"
#include "nn/hf_folder.h"
#include "optim/optim.h"
#include "ranks.h"
#include "sampling.h"
#include "token_text.h"

namespace cli {

using namespace autograd;

namespace {

// ---------------------------------------------------------------- the flags

// Flags a run of --task instruct cannot take, and why (said when one is refused).
struct NotForInstruct {
  const char* flag;
  const char* why;
};
const std::vector<NotForInstruct>& flags_not_for_instruct() {
  static const std::vector<NotForInstruct> flags{
      {"--text", "the examples come from --data FILE"},
      {"--resume", "an instruct run is not resumed (train it again, or --init from its checkpoint)"},
      {"--save-every", "an instruct run saves at its end (--save)"},
      {"--lora-rank", "an instruct run trains every weight"},
      {"--lora-alpha", "an instruct run trains every weight"},
      {"--lora-targets", "an instruct run trains every weight"},
      {"--graph", "the graph of a plain run's step is the same model's"},
      {"--plot", "an instruct run prints its loss as it goes"},
      {"--accumulate", "--batch examples make one step"},
      {"--deterministic-reduce", "an instruct run is one process"},
      {"--reduce-shards", "an instruct run is one process"},
      {"--check-every", "an instruct run is one process"},
      {"--no-overlap", "an instruct run is one process"},
      {"--allow-other-text", "the examples come from --data FILE"},
      {"--sample", "eval --task instruct --responses FILE shows the replies"},
  };
  return flags;
}

// Runs f: a FinetuneError (the user's data or template at fault) becomes a UsageError, after `what`.
template <typename F>
auto as_usage_error(const std::string& what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const finetune::FinetuneError& e) {
    throw UsageError(what.empty() ? std::string(e.what()) : fmt::format("{}: {}", what, e.what()));
  }
}

// ---------------------------------------------------------------- the model and its tokenizer

// A model with the tokenizer that reads its ids, and the template its checkpoint names (if any).
struct InstructModel {
  std::unique_ptr<nn::LanguageModel> model;
  RunTokenizer tokenizer;          // bpe or gpt2 (a folder's tokenizer.json is read as gpt2's are)
  std::string recorded_template;   // a checkpoint's "template", else ""
  std::string source;              // what it was read from ("" for a new model)
};

RunTokenizer tokenizer_from_file(const std::string& command, const std::string& file) {
  RunTokenizer t;
  t.kind = "gpt2";
  t.gpt2_path = absolute_path(file);
  t.bpe = std::make_shared<tokenizer::Tokenizer>(load_gpt2_tokenizer_for(command, file));
  t.gpt2_hash = t.bpe->fingerprint();
  return t;
}

// GPT-2's file, a Hugging Face folder, or a checkpoint of ours, with its tokenizer.
InstructModel open_model(const std::string& path, const std::string& tokenizer_file, int64_t heads, bool heads_given,
                         const std::string& command) {
  InstructModel m;
  m.source = path;
  if (nn::is_hf_folder(path)) {
    FolderModel folder = open_folder(path, command, heads_given);
    const std::string file = !tokenizer_file.empty() ? tokenizer_file : folder_tokenizer_file(path);
    require(!file.empty(), fmt::format("{}: {} has no tokenizer.json: give --tokenizer-file (the model's tokenizer.json)",
                                       command, path));
    m.model = std::move(folder.model);
    m.tokenizer = tokenizer_from_file(command, file);
    return m;
  }
  if (nn::is_llmc_checkpoint(path) || nn::is_gpt2_file(path)) {
    require(!tokenizer_file.empty(), fmt::format("{}: {} holds GPT-2's weights, which read GPT-2's tokens: give "
                                                 "--tokenizer-file (the folder of encoder.json and vocab.bpe)",
                                                 command, path));
    m.model = load_gpt2_weights(path, heads);
    m.tokenizer = tokenizer_from_file(command, tokenizer_file);
    return m;
  }
  LoadedModel ours = load_model(path, tokenizer_file);
  require(ours.decoder() != nullptr,
          fmt::format("{}: {} is a checkpoint of the workshop's one-layer model; --task instruct trains a GPT or a "
                      "Llama",
                      command, path));
  require(!ours.tokenizer.is_char(),
          fmt::format("{}: {} reads characters, and a character tokenizer has no special tokens to end a reply or "
                      "mark a turn: train the base with --tokenizer bpe or gpt2",
                      command, path));
  if (ours.gpt) check_heads_agree(heads, *ours.gpt, path);
  if (ours.gpt) m.model = std::move(ours.gpt);
  else m.model = std::move(ours.llama);
  if (!nn::lora_parameters(*m.model).empty()) nn::merge_lora(*m.model);
  m.tokenizer = ours.tokenizer;
  if (auto it = ours.checkpoint.metadata.find(kTemplateKey); it != ours.checkpoint.metadata.end())
    m.recorded_template = it->second;
  return m;
}

// The template called `name` ("": the checkpoint's, else the one the tokenizer's special tokens name).
std::unique_ptr<finetune::ChatTemplate> choose_template(const std::string& name, const InstructModel& m,
                                                        const finetune::TemplateTokenizer& tok) {
  std::string chosen = name;
  if (chosen.empty()) chosen = m.recorded_template;
  if (chosen.empty()) chosen = finetune::template_name_for(tok);
  const std::string what = name.empty() ? fmt::format("template {}", chosen) : fmt::format("--template {}", chosen);
  return as_usage_error(what, [&] { return finetune::make_template(chosen, tok); });
}

// Bytes with `specials` after them (ids 256, 257, ...), no merges: the tokenizer a new model starts from.
tokenizer::Tokenizer bytes_and_specials(const std::vector<std::string>& specials) {
  std::vector<int32_t> byte_ids(256);
  std::iota(byte_ids.begin(), byte_ids.end(), 0);
  std::map<std::string, int32_t> ids;
  for (size_t i = 0; i < specials.size(); ++i) ids.emplace(specials[i], int32_t(256 + i));
  return tokenizer::Tokenizer(byte_ids, {}, ids, tokenizer::SplitPattern::gpt4);
}

// The examples as the text a BPE learns from: each conversation's pieces, special tokens by their spelling.
std::string rendered_text(const std::vector<finetune::InstructionExample>& examples, const finetune::ChatTemplate& chat) {
  std::string text;
  for (const auto& example : examples)
    for (const finetune::Piece& piece : chat.conversation_pieces(finetune::to_conversation(example, chat)))
      text += piece.text;
  return text;
}

// A new model's tokenizer: bytes and the template's special tokens, and (--vocab-size above that) merges
// learned from the training examples as the template writes them.
RunTokenizer new_tokenizer(const TrainOptions& o, const std::string& template_name,
                           const std::vector<finetune::InstructionExample>& examples) {
  const std::vector<std::string> specials = template_special_tokens(template_name);
  RunTokenizer t;
  t.kind = "bpe";
  auto bytes = std::make_shared<tokenizer::Tokenizer>(bytes_and_specials(specials));
  const int64_t least = 256 + int64_t(specials.size());
  if (o.vocab_size == 0 || o.vocab_size == least) {
    t.bpe = bytes;
    return t;
  }
  require(o.vocab_size > least && o.vocab_size <= 65536,
          fmt::format("--vocab-size must be from {} (256 bytes and the {} template's {} special tokens) to 65536, got {}",
                      least, template_name, specials.size(), o.vocab_size));
  finetune::BpeTemplateTokenizer adapter(*bytes);
  const auto chat = as_usage_error("", [&] { return finetune::make_template(template_name, adapter); });
  const std::string text = as_usage_error(o.data_file, [&] { return rendered_text(examples, *chat); });
  tokenizer::TrainOptions options;
  options.vocab_size = int(o.vocab_size);
  options.specials = specials;
  try {
    t.bpe = std::make_shared<tokenizer::Tokenizer>(tokenizer::train(text, options));
  } catch (const tokenizer::TokenizerError& e) {
    throw UsageError(fmt::format("train: --vocab-size {}: {}", o.vocab_size, e.what()));
  }
  return t;
}

// A new GPT or Llama of the run's shape (a preset's or the flags'), its weights drawn after manual_seed.
std::unique_ptr<nn::LanguageModel> new_model(const TrainOptions& o, int64_t vocab) {
  manual_seed(o.seed);
  if (o.model == "llama") {
    nn::LlamaConfig c;
    c.vocab_size = vocab, c.hidden_size = o.dim, c.intermediate_size = o.ffn_dim, c.num_hidden_layers = o.layers;
    c.num_attention_heads = o.heads, c.num_key_value_heads = o.kv_heads, c.max_position_embeddings = o.context;
    c.rope_theta = 10000.0, c.tie_word_embeddings = true;
    return std::make_unique<nn::LlamaModel>(c);
  }
  return std::make_unique<nn::GPTModel>(nn::GPTConfig{.vocab_size = vocab, .context_length = o.context, .emb_dim = o.dim,
                                                      .n_heads = o.heads, .n_layers = o.layers, .drop_rate = o.dropout,
                                                      .qkv_bias = false});
}

// ---------------------------------------------------------------- the examples in token form

struct PreparedData {
  std::vector<finetune::Rendered> examples;  // the ones kept
  std::vector<size_t> source_index;          // examples[i] is record source_index[i] of the file
  size_t skipped = 0;                        // records with no counted target within max_length
};

// Whether a rendered example has a target that counts within `max_length` tokens.
bool has_counted_target(const finetune::Rendered& r, int64_t max_length, bool train_on_prompt) {
  const int64_t targets = std::min<int64_t>(int64_t(r.ids.size()) - 1, max_length);
  for (int64_t t = 0; t < targets; ++t)
    if (train_on_prompt || r.counted[size_t(t + 1)]) return true;
  return false;
}

// Every record rendered in `chat`; a record whose counted targets all lie past max_length is left out (and
// counted, said by the caller), and one with a token the model has no row for is refused.
PreparedData prepare(const std::vector<finetune::InstructionExample>& records, const finetune::ChatTemplate& chat,
                     const std::string& path, int64_t max_length, bool train_on_prompt, int64_t model_vocab) {
  PreparedData out;
  for (size_t i = 0; i < records.size(); ++i) {
    finetune::Rendered r = as_usage_error(fmt::format("{} record {}", path, i + 1), [&] {
      return chat.render(finetune::to_conversation(records[i], chat));
    });
    for (int64_t id : r.ids)
      require(id < model_vocab, fmt::format("{} record {}: token {} is outside the model's vocabulary of {} (the "
                                            "tokenizer is not the model's)",
                                            path, i + 1, id, model_vocab));
    if (!has_counted_target(r, max_length, train_on_prompt)) {
      ++out.skipped;
      continue;
    }
    out.examples.push_back(std::move(r));
    out.source_index.push_back(i);
  }
  require(!out.examples.empty(), fmt::format("{}: no record has a reply within --max-length {} tokens", path, max_length));
  return out;
}

void say_skipped(std::ostream& out, const PreparedData& data, int64_t max_length) {
  if (data.skipped)
    out << fmt::format("left out {} record(s) whose reply starts past --max-length {} (nothing in them to count)\n",
                       data.skipped, max_length);
}

std::vector<finetune::InstructionExample> read_records(const std::string& path) {
  return as_usage_error("", [&] { return finetune::read_instruction_data(path); });
}

// The mean cross-entropy over a batch's counted targets (cross_entropy skips −100 and divides by the rest).
Tensor counted_loss(const nn::LanguageModel& model, const finetune::InstructBatch& batch, Device device) {
  const Tensor logits = model(batch.input_tensor().to(device));
  return cross_entropy(logits.view({-1, model.vocab_size()}), batch.target_tensor().to(device).view({-1}));
}

// ---------------------------------------------------------------- the checkpoint

std::map<std::string, std::string> instruct_metadata(const nn::LanguageModel& model, const RunTokenizer& tok,
                                                     const finetune::ChatTemplate& chat, const TrainOptions& o,
                                                     const std::vector<int64_t>& sample_ids, const std::string& base) {
  const Vocabulary none{std::u32string()};
  std::map<std::string, std::string> m;
  if (const auto* llama = dynamic_cast<const nn::LlamaModel*>(&model)) m = llama_metadata(llama->cfg, none, U"", o.steps);
  else {
    const auto& gpt = dynamic_cast<const nn::GPTModel&>(model);
    m = gpt_metadata(gpt.cfg, none, U"", o.steps, head_is_tied(gpt));
  }
  m.merge(tok.metadata());
  m["sample_ids"] = fmt::format("{}", fmt::join(sample_ids, " "));
  m[kTemplateKey] = chat.name();
  m["task"] = "instruct";
  m["run.data"] = absolute_path(o.data_file);
  m["run.train_on_prompt"] = o.train_on_prompt ? "1" : "0";
  m["run.max_length"] = std::to_string(o.max_length);
  if (!base.empty()) m["run.init"] = base;
  return m;
}

// The prompt of the first example's last reply: what `generate` continues when given no prompt.
std::vector<int64_t> first_prompt(const std::vector<finetune::InstructionExample>& records,
                                  const finetune::ChatTemplate& chat, int64_t context) {
  finetune::Conversation c = finetune::to_conversation(records.front(), chat);
  while (!c.empty() && c.back().role == "assistant") c.pop_back();
  std::vector<int64_t> ids = chat.generation_prompt(c);
  if (int64_t(ids.size()) > context) ids.resize(size_t(context));
  return ids;
}

// ---------------------------------------------------------------- training

optim::AdamW instruct_optimizer(const nn::Module& model, const TrainOptions& o) {
  auto [decay, no_decay] = nn::weight_decay_groups(model);
  optim::AdamW opt(nn::tensors_of(decay), {.lr = o.lr, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = o.weight_decay});
  if (!no_decay.empty()) opt.add_param_group(nn::tensors_of(no_decay), {{"weight_decay", 0.0}});
  return opt;
}

// Batches of --batch examples in a seeded order, each example once an epoch (the book's shuffled DataLoader).
class ExampleOrder {
 public:
  ExampleOrder(size_t count, int64_t batch, uint64_t seed) : count_(count), batch_(size_t(batch)), random_(seed) {}
  std::vector<size_t> next() {
    std::vector<size_t> picked;
    while (picked.size() < batch_) {
      if (at_ == order_.size()) reshuffle();
      picked.push_back(order_[at_++]);
    }
    return picked;
  }

 private:
  void reshuffle() {
    order_.resize(count_);
    std::iota(order_.begin(), order_.end(), size_t(0));
    random_.shuffle(order_);
    at_ = 0;
  }
  size_t count_, batch_, at_ = 0;
  std::vector<size_t> order_;
  finetune::SeededRandom random_;
};

// The options with the model's shape and the longest example (what finetune_bytes reads its sizes from).
TrainOptions sized_as(const nn::LanguageModel& model, TrainOptions o) {
  o.context = o.max_length;
  if (const auto* llama = dynamic_cast<const nn::LlamaModel*>(&model)) {
    o.layers = llama->cfg.num_hidden_layers, o.dim = llama->cfg.hidden_size, o.heads = llama->cfg.num_attention_heads;
  } else {
    const nn::GPTConfig& c = dynamic_cast<const nn::GPTModel&>(model).cfg;
    o.layers = c.n_layers, o.dim = c.emb_dim, o.heads = c.n_heads;
  }
  return o;
}

// A new model's or --init's: its shape on the first line, as a plain run says it.
std::string describe(const nn::LanguageModel& model, int64_t context) {
  if (const auto* llama = dynamic_cast<const nn::LlamaModel*>(&model))
    return fmt::format("a Llama of {} blocks D {} heads {} kv-heads {} ffn {}, context {}", llama->cfg.num_hidden_layers,
                       llama->cfg.hidden_size, llama->cfg.num_attention_heads, llama->cfg.num_key_value_heads,
                       llama->cfg.intermediate_size, context);
  const nn::GPTConfig& c = dynamic_cast<const nn::GPTModel&>(model).cfg;
  return fmt::format("a GPT of {} blocks D {} heads {}, context {}", c.n_layers, c.emb_dim, c.n_heads, context);
}

int train_instruct(const TrainOptions& given, std::ostream& out) {
  use_kernels(given.kernels);
  TrainOptions o = given;
  check_train_options(o);
  Ranks ranks;  // under mpirun each rank would train the whole run and write the same --save
  if (ranks.size() > 1)
    throw UsageErrorOnEveryRank(fmt::format("--task instruct runs as one process; mpirun started {} (run it without "
                                            "mpirun)",
                                            ranks.size()));
  const Device device = checked_device(o.device);
  check_distinct_files({{"--data", o.data_file}, {"--save", o.save}, {"--init", o.init}});
  if (!o.save.empty()) {
    o.save = checkpoint_target("--save", o.save);
    nn::check_writable(o.save);  // fail now, not after the whole run
  }
  std::string note;
  o.threads = usable_threads(o.threads, note);
  if (!note.empty()) out << note << "\n";
  set_num_threads(o.threads);
  use_numerics_for("gpt", o.numerics);

  const std::vector<finetune::InstructionExample> records = read_records(o.data_file);
  InstructModel m;
  std::unique_ptr<finetune::BpeTemplateTokenizer> adapter;
  std::unique_ptr<finetune::ChatTemplate> chat;
  if (!o.init.empty()) {
    m = open_model(o.init, o.tokenizer_file, o.init_heads, o.init_heads > 0, "train --init");
    adapter = std::make_unique<finetune::BpeTemplateTokenizer>(*m.tokenizer.bpe);
    chat = choose_template(o.chat_template, m, *adapter);
    set_dropout(*m.model, o.dropout);
    for (Tensor& p : m.model->parameters()) p.requires_grad_(true);
    autograd::cpu::release_cached_buffers();
  } else {
    const std::string name = o.chat_template.empty() ? "chatml" : o.chat_template;
    as_usage_error("--template " + name, [&] { return template_special_tokens(name); });
    m.tokenizer = new_tokenizer(o, name, records);
    adapter = std::make_unique<finetune::BpeTemplateTokenizer>(*m.tokenizer.bpe);
    chat = as_usage_error("--template " + name, [&] { return finetune::make_template(name, *adapter); });
    m.model = new_model(o, m.tokenizer.bpe->vocab_size());
  }
  nn::LanguageModel& model = *m.model;
  const int64_t context = model.context_length();
  require(o.max_length <= context, fmt::format("--max-length {} is longer than the model's context of {} positions",
                                               o.max_length, context));
  o.max_length = o.max_length ? o.max_length : context;
  const PreparedData data = prepare(records, *chat, o.data_file, o.max_length, o.train_on_prompt, model.vocab_size());
  check_fits_in_memory(finetune_bytes(model, model.num_parameters(), sized_as(model, o)),
                       fmt::format("instruction fine-tuning at --max-length {} --batch {}", o.max_length, o.batch));

  model.to(device);
  model.train();
  optim::AdamW opt = instruct_optimizer(model, o);
  optim::LambdaLR schedule(opt, optim::warmup_cosine(o.warmup, o.steps, 0.1));
  const finetune::CollateOptions collate{.padding_id = chat->padding_id(), .max_length = o.max_length,
                                         .train_on_prompt = o.train_on_prompt};
  out << fmt::format("instruction fine-tuning {} ({} parameters) on {} examples of {}, template {}, {}; vocabulary {}, "
                     "B {}, {} steps, lr {} on {}\n",
                     o.init.empty() ? "a new model: " + describe(model, context) : o.init + ": " + describe(model, context),
                     model.num_parameters(), data.examples.size(), o.data_file, chat->name(),
                     o.train_on_prompt ? "prompt and replies counted" : "replies counted", model.vocab_size(), o.batch,
                     o.steps, o.lr, device.str());
  say_skipped(out, data, o.max_length);

  ExampleOrder order(data.examples.size(), o.batch, o.seed);
  const auto start = std::chrono::steady_clock::now();
  double window_loss = 0;
  int64_t window_steps = 0, counted = 0;
  for (int64_t step = 0; step < o.steps; ++step) {
    const std::vector<size_t> picked = order.next();
    const finetune::InstructBatch batch = finetune::collate_instruct(data.examples, picked, collate);
    model.zero_grad();
    Tensor loss = counted_loss(model, batch, device);
    loss.backward();
    const double value = loss.item();
    if (!std::isfinite(value))
      throw UsageError(fmt::format("step {}: the loss is {}: the run diverged, so it stops here (nothing was saved); "
                                   "try a smaller --lr than {}",
                                   step, value, o.lr));
    optim::ClipCoefficient clip;
    if (o.clip > 0) clip = optim::clip_coefficient(model.parameters(), o.clip);
    opt.step(clip.coefficient);
    schedule.step();
    window_loss += value, ++window_steps, counted += batch.counted_targets();
    if ((step + 1) % o.eval_every == 0 || step + 1 == o.steps) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      out << fmt::format("step {:>4} | counted loss {:.4f} | {:.0f} counted tokens/s | {} elapsed | {} left\n", step + 1,
                         window_loss / double(window_steps), double(counted) / std::max(elapsed, 1e-9),
                         format_duration(elapsed), format_duration(elapsed / double(step + 1) * double(o.steps - step - 1)))
          << std::flush;
      window_loss = 0, window_steps = 0;
    }
  }
  model.eval();
  if (!o.save.empty()) {
    const std::vector<int64_t> sample = first_prompt(records, *chat, context);
    nn::save_safetensors(o.save, decoder_state(model),
                         instruct_metadata(model, m.tokenizer, *chat, o, sample, o.init.empty() ? "" : absolute_path(o.init)));
    out << "saved " << o.save << " (template " << chat->name() << ")\n";
  }
  return 0;
}

// ---------------------------------------------------------------- eval

// eval's flags that only --task instruct takes (--data is classify's too).
constexpr const char* kInstructEvalFlags[] = {"--template", "--train-on-prompt", "--max-length", "--responses", "--tokens"};

// The refusals of eval's flags: those of a text without --task instruct, and --task instruct's without it.
void check_eval_flags(const EvalOptions& o) {
  const bool instruct = o.task == "instruct";
  for (const char* flag : kInstructEvalFlags)
    require(instruct || !o.given.count(flag), fmt::format("{} is for eval --task instruct (with --data FILE)", flag));
  if (!instruct) return;
  for (const char* flag : {"--text", "--ids-file", "--stride"})
    require(!o.given.count(flag), fmt::format("{} is for scoring a text; eval --task instruct scores --data FILE's "
                                              "replies: leave it out",
                                              flag));
  require(!o.data_file.empty(), "eval --task instruct needs --data FILE (JSON or JSONL instruction records)");
  require(o.max_length >= 0, fmt::format("--max-length must be positive (or 0: the model's context), got {}", o.max_length));
  require(o.response_tokens >= 1, fmt::format("--tokens must be at least 1, got {}", o.response_tokens));
  require(o.heads >= 0, fmt::format("--heads must be positive, got {}", o.heads));
  require(!o.responses.empty() || !o.given.count("--tokens"), "--tokens is for --responses FILE (a reply's most tokens)");
}

// The text of the last user message before the last reply (what the record asked).
std::string last_user_text(const finetune::Conversation& c) {
  for (auto it = c.rbegin(); it != c.rend(); ++it)
    if (it->role == "user") return it->content;
  return "";
}

// Greedy replies to each kept example (its conversation up to its last reply), as JSON Lines, and how many
// equal their reference exactly (finetune::is_exact_answer's rule: the whitespace around it aside).
void write_responses(const EvalOptions& o, const std::vector<finetune::InstructionExample>& records,
                     const PreparedData& data, const finetune::ChatTemplate& chat, const InstructModel& m,
                     std::ostream& out) {
  const nn::LanguageModel& model = *m.model;
  std::string lines;
  int64_t exact = 0;
  for (size_t k = 0; k < data.examples.size(); ++k) {
    finetune::Conversation c = finetune::to_conversation(records[data.source_index[k]], chat);
    while (!c.empty() && c.back().role != "assistant") c.pop_back();
    const std::string reference = c.back().content;
    c.pop_back();
    const std::vector<int64_t> prompt = chat.generation_prompt(c);
    const int64_t room = model.context_length() - int64_t(prompt.size());
    std::vector<int64_t> reply;
    if (room > 0) {
      Continuation how = greedy(std::min(o.response_tokens, room));
      how.stop_tokens = {chat.end_of_turn_id()};
      Generator unused;
      const std::vector<int64_t> ids = continue_text_cached(model, prompt, how, unused);
      reply.assign(ids.begin() + int64_t(prompt.size()), ids.end());
      if (!reply.empty() && reply.back() == chat.end_of_turn_id()) reply.pop_back();
    }
    const std::string text = m.tokenizer.decode(reply);
    const bool same = finetune::is_exact_answer({"", "", reference}, text);
    exact += same;
    nlohmann::ordered_json line{{"index", data.source_index[k] + 1},
                        {"prompt", last_user_text(c)},
                        {"reference", reference},
                        {"response", text},
                        {"exact", same}};
    if (room <= 0) line["note"] = "the prompt fills the model's context: no room for a reply";
    lines += line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  }
  nn::write_file_atomically(o.responses, lines);
  const int64_t n = int64_t(data.examples.size());
  out << fmt::format("exact answers {}/{} ({:.3f})\n", exact, n, double(exact) / double(n));
  out << fmt::format("wrote {} responses to {}\n", n, o.responses);
}

int eval_instruct(const EvalOptions& o, std::ostream& out) {
  check_eval_flags(o);
  if (!o.responses.empty()) {
    check_distinct_files({{"--data", o.data_file}, {"--responses", o.responses}, {"--checkpoint", o.checkpoint}});
    nn::check_writable(o.responses);
  }
  std::string note;
  set_num_threads(usable_threads(o.threads, note));
  if (!note.empty()) out << note << "\n";
  use_numerics_for("gpt", o.numerics);
  const std::vector<finetune::InstructionExample> records = read_records(o.data_file);
  const InstructModel m = open_model(o.checkpoint, o.tokenizer_file, o.heads, o.given.count("--heads") > 0, "eval");
  const finetune::BpeTemplateTokenizer adapter(*m.tokenizer.bpe);
  const auto chat = choose_template(o.chat_template, m, adapter);
  const nn::LanguageModel& model = *m.model;
  const int64_t context = model.context_length();
  require(o.max_length <= context, fmt::format("--max-length {} is longer than the model's context of {} positions",
                                               o.max_length, context));
  const int64_t max_length = o.max_length ? o.max_length : context;
  const PreparedData data = prepare(records, *chat, o.data_file, max_length, o.train_on_prompt, model.vocab_size());
  say_skipped(out, data, max_length);

  // token-weighted: each batch's mean times its counted targets, summed, over all the counted targets
  NoGradGuard no_grad;
  const finetune::CollateOptions collate{.padding_id = chat->padding_id(), .max_length = max_length,
                                         .train_on_prompt = o.train_on_prompt};
  double total = 0;
  int64_t counted = 0;
  constexpr size_t kExamplesPerBatch = 8;
  for (size_t first = 0; first < data.examples.size(); first += kExamplesPerBatch) {
    std::vector<size_t> picked(std::min(kExamplesPerBatch, data.examples.size() - first));
    std::iota(picked.begin(), picked.end(), first);
    const finetune::InstructBatch batch = finetune::collate_instruct(data.examples, picked, collate);
    const int64_t n = batch.counted_targets();
    if (n == 0) continue;
    total += counted_loss(model, batch, Device()).item() * double(n);
    counted += n;
  }
  const double mean = total / double(counted);
  out << fmt::format("eval: {} examples of {}, template {}, {} counted tokens ({}), max length {}\n",
                     data.examples.size(), o.data_file, chat->name(), counted,
                     o.train_on_prompt ? "prompt and replies" : "replies", max_length);
  out << fmt::format("mean loss {:.4f} nats, perplexity {:.3f}\n", mean, std::exp(mean));
  if (!o.responses.empty()) write_responses(o, records, data, *chat, m, out);
  return 0;
}

}  // namespace

// ---------------------------------------------------------------- public

std::vector<std::string> template_special_tokens(const std::string& name) {
  if (name == "alpaca") return {"<|endoftext|>"};
  if (name == "chatml") return {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  if (name == "llama3")
    return {"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};
  throw finetune::FinetuneError("unknown template \"" + name + "\": expected alpaca, chatml or llama3");
}

void apply_instruct_options(TrainOptions& o, const std::function<bool(const char*)>& given) {
  if (o.task != "instruct") {  // (--data and --max-length are classify's too: apply_task_options checks them)
    for (const char* flag : {"--template", "--train-on-prompt"})
      if (given(flag)) throw UsageError(fmt::format("{} is for train --task instruct (with --data FILE)", flag));
    return;
  }
  for (const NotForInstruct& f : flags_not_for_instruct())
    if (given(f.flag)) throw UsageError(fmt::format("{} does not apply to --task instruct: {}", f.flag, f.why));
  for (const char* flag : {"--train-blocks", "--split", "--epochs"})
    if (given(flag)) throw UsageError(fmt::format("{} is for --task classify; this run is --task instruct", flag));
  if (o.data_file.empty()) throw UsageError("--task instruct needs --data FILE (JSON or JSONL instruction records)");
  if (o.max_length < 0)
    throw UsageError(fmt::format("--max-length must be positive (or 0: the model's context), got {}", o.max_length));
  if (given("--template"))
    as_usage_error("--template", [&] { return template_special_tokens(o.chat_template); });
  if (!o.init.empty()) {
    if (given("--context"))
      throw UsageError("--context does not apply to --task instruct with --init: the model's context is its file's; "
                       "--max-length cuts the examples");
    for (const char* flag : {"--vocab-size", "--tokenizer"})
      if (given(flag))
        throw UsageError(fmt::format("{} does not apply to --task instruct with --init: the model reads its file's "
                                     "tokenizer (GPT-2's files: --tokenizer-file DIR)",
                                     flag));
    return;
  }
  if (given("--tokenizer-file") && !given("--tokenizer"))
    throw UsageError("--tokenizer-file is for --init (a GPT-2 file's tokenizer) or --tokenizer gpt2");
  if (!given("--model")) o.model = "gpt";
  if (o.model == "mini")
    throw UsageError("--model mini cannot follow instructions: --task instruct trains --model gpt or llama");
  if (!given("--tokenizer")) o.tokenizer = "bpe";
  if (o.tokenizer == "char")
    throw UsageError("--tokenizer char has no special tokens to end a reply or mark a turn: --task instruct reads "
                     "bytes with the template's special tokens (--tokenizer bpe, the default)");
  if (o.tokenizer == "gpt2")
    throw UsageError("--tokenizer gpt2 with a new model: give --init (GPT-2's weights read GPT-2's tokens); a new "
                     "model reads bytes and the template's special tokens (--tokenizer bpe, the default)");
  if (!given("--vocab-size")) o.vocab_size = 0;  // bytes and the template's special tokens
}

int run_train_instruct(const TrainOptions& o, std::ostream& out) { return train_instruct(o, out); }
int run_eval_instruct(const EvalOptions& o, std::ostream& out) { return eval_instruct(o, out); }

bool is_instruct_eval(const EvalOptions& o) {
  if (o.task == "instruct") return true;
  for (const char* flag : kInstructEvalFlags)
    if (o.given.count(flag)) return true;
  return false;
}

}  // namespace cli
