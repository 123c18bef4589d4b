// run_state.cpp — a training run's state written into its checkpoint, and read back by --resume.
#include "run_state.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "autograd/autocast.h"
#include "autograd/random/generator.h"
#include "guards.h"
#include "model_files.h"

namespace cli {

using namespace autograd;

std::map<std::string, std::string> decoder_metadata(const nn::LanguageModel& model, const Corpus& corpus, int64_t T,
                                                    int64_t steps) {
  const bool chars = corpus.tokenizer.is_char();
  const Vocabulary vocab = chars ? corpus.vocab() : Vocabulary(std::u32string());
  const std::u32string prompt = chars ? corpus.head(T) : std::u32string();
  auto m = [&] {
    if (const auto* llama = dynamic_cast<const nn::LlamaModel*>(&model)) return llama_metadata(llama->cfg, vocab, prompt, steps);
    const auto& gpt = dynamic_cast<const nn::GPTModel&>(model);
    return gpt_metadata(gpt.cfg, vocab, prompt, steps, head_is_tied(gpt));
  }();
  if (chars) return m;
  m.merge(corpus.tokenizer.metadata());
  const std::vector<int64_t> head = corpus.head_ids(T);
  m["sample_ids"] = fmt::format("{}", fmt::join(head, " "));
  return m;
}

std::string hex_of(const std::vector<uint8_t>& bytes) {
  std::string out;
  for (uint8_t b : bytes) out += fmt::format("{:02x}", b);
  return out;
}
std::vector<uint8_t> bytes_of(const std::string& hex, const std::string& path) {
  if (hex.size() % 2) throw nn::CheckpointError(fmt::format("{}: generator state is malformed", path));
  std::vector<uint8_t> out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    try {
      out.push_back(uint8_t(std::stoul(hex.substr(i, 2), nullptr, 16)));
    } catch (const std::exception&) {
      throw nn::CheckpointError(fmt::format("{}: generator state is malformed", path));
    }
  }
  return out;
}

std::map<std::string, std::string> run_metadata(const TrainOptions& o, const Corpus& corpus, int64_t steps_done,
                                                int64_t schedule_epoch) {
  return {{"run.text", corpus.source},          {"run.text_pipe", corpus.source_is_pipe ? "1" : "0"},
          {"run.steps", std::to_string(o.steps)},
          {"run.context", std::to_string(o.context)},
          {"run.text_hash", corpus.text.hash},  {"run.text_bytes", std::to_string(corpus.text.bytes)},
          {"run.batch", std::to_string(o.batch)}, {"run.lr", fmt::format("{:.17g}", o.lr)},
          {"run.seed", std::to_string(o.seed)}, {"run.eval_every", std::to_string(o.eval_every)},
          {"run.dropout", fmt::format("{:.17g}", o.dropout)}, {"run.warmup", std::to_string(o.warmup)},
          {"run.weight_decay", fmt::format("{:.17g}", o.weight_decay)}, {"run.clip", fmt::format("{:.17g}", o.clip)},
          {"run.accumulate", std::to_string(o.accumulate)}, {"run.sample", std::to_string(o.sample_tokens)},
          {"run.steps_done", std::to_string(steps_done)}, {"run.schedule_epoch", std::to_string(schedule_epoch)},
          {"run.generator", hex_of(default_generator().get_state())},
          {"run.deterministic_reduce", o.deterministic_reduce ? "1" : "0"},
          {"run.reduce_shards", std::to_string(o.reduce_shards)}, {"run.check_every", std::to_string(o.check_every)},
          {"run.numerics", numerics_name(numerics())},
          {"run.precision", autocast_dtype() == DType::BFloat16 ? "bf16" : "fp32"}};
}

namespace {

// The text a resume reads when --text is not given: the file the run recorded (empty: the built-in text).
// A text that came through a pipe is gone: the user passes it again, and its size and hash are checked.
std::string recorded_text(const std::map<std::string, std::string>& m, const std::string& path) {
  const std::string text = m.count("run.text") ? m.at("run.text") : "";
  if (m.count("run.text_pipe") && m.at("run.text_pipe") == "1")
    throw UsageError(fmt::format("{}: the run read its text from a pipe ({}), which cannot be read again: pass the "
                                 "same text with --text ({} bytes, hash {})",
                                 path, text, m.count("run.text_bytes") ? m.at("run.text_bytes") : "?",
                                 m.count("run.text_hash") ? m.at("run.text_hash") : "?"));
  return text;
}

}  // namespace

TrainOptions resumed_options(TrainOptions o) {
  nn::Checkpoint ck = nn::load_safetensors(o.resume);
  const bool lora = ck.metadata["format"] == "scratchgrad-lora";  // a LoRA fine-tune's adapters
  // a Llama's run (a LoRA run's adapters of a Llama record its config as a Llama checkpoint does)
  const bool llama = ck.metadata["format"] == "scratchgrad-llama" || (lora && ck.metadata.count("num_hidden_layers"));
  if ((ck.metadata["format"] != "scratchgrad-gpt" && !lora && !llama) || !ck.metadata.count("run.steps_done"))
    throw nn::CheckpointError(fmt::format("{}: not a checkpoint of a GPT or Llama training run (train --model gpt or "
                                          "llama --save)",
                                          o.resume));
  const auto& m = ck.metadata;
  const std::string& path = o.resume;
  constexpr int64_t kMax = INT64_MAX;
  auto whole = [&](const char* key, int64_t lo) { return run_state_int(m, path, key, lo, kMax); };
  auto number = [&](const char* key) { return run_state_number(m, path, key); };
  o.model = llama ? "llama" : "gpt";
  if (o.text_file.empty()) o.text_file = recorded_text(m, path);
  if (llama) {
    o.layers = whole("num_hidden_layers", 1), o.dim = whole("hidden_size", 1), o.heads = whole("num_attention_heads", 1);
    o.kv_heads = whole("num_key_value_heads", 1), o.ffn_dim = whole("intermediate_size", 1);
  } else {
    o.layers = whole("layers", 1), o.dim = whole("dim", 1), o.heads = whole("heads", 1);
  }
  // the training window; a fine-tune's model has a context of its own ("context"), runs before fine-tuning
  // recorded only that one, the same
  o.context = m.count("run.context") ? whole("run.context", 1) : whole("context", 1);
  if (lora) {  // the base the adapters were trained on, loaded again
    o.init = m.count("base") ? m.at("base") : "";
    o.lora_rank = whole("rank", 1), o.lora_alpha = number("alpha");
    o.lora_targets = m.count("targets") ? m.at("targets") : "";
    if (o.init.empty()) throw nn::CheckpointError(fmt::format("{}: the LoRA run's base file is not named", path));
  } else if (m.count("run.init")) {
    o.init = m.at("run.init");
  }
  const int64_t saved_steps = whole("run.steps", 1), steps_done = whole("run.steps_done", 0);
  if (steps_done > saved_steps)
    throw nn::CheckpointError(fmt::format("{}: run state 'run.steps_done' {} is past the run's {} steps", path,
                                          steps_done, saved_steps));
  if (!o.steps_set) o.steps = saved_steps;
  else if (o.steps < steps_done)
    throw UsageError(fmt::format("--steps {} is below the {} steps {} has already done (--steps extends a resumed run)",
                                 o.steps, steps_done, path));
  o.batch = whole("run.batch", 1), o.eval_every = whole("run.eval_every", 1);
  o.lr = number("run.lr"), o.seed = uint64_t(whole("run.seed", 0)), o.dropout = number("run.dropout");
  o.warmup = whole("run.warmup", 0), o.weight_decay = number("run.weight_decay"), o.clip = number("run.clip");
  o.accumulate = whole("run.accumulate", 1), o.sample_tokens = whole("run.sample", 0);
  if (m.count("run.deterministic_reduce")) {  // checkpoints older than data parallelism lack these
    o.deterministic_reduce = m.at("run.deterministic_reduce") == "1";
    o.reduce_shards = whole("run.reduce_shards", 0);
    if (!o.check_every_set) o.check_every = whole("run.check_every", 1);
  }
  o.tokenizer = m.count("tokenizer") ? m.at("tokenizer") : "char";
  // the run goes on in the numerics it started in, unless asked otherwise (older checkpoints: the default)
  if (o.numerics.empty() && m.count("run.numerics")) o.numerics = m.at("run.numerics");
  if (o.precision.empty() && m.count("run.precision")) o.precision = m.at("run.precision");  // likewise
  return o;
}

void check_resumed_text(const TrainOptions& o, Corpus& corpus) {
  nn::Checkpoint ck = nn::load_safetensors(o.resume);
  const auto& m = ck.metadata;
  // (a checkpoint from before texts were recorded has no hash: only its vocabulary can be compared)
  const bool same = !m.count("run.text_hash") ||
                    (m.at("run.text_hash") == corpus.text.hash && m.count("run.text_bytes") &&
                     m.at("run.text_bytes") == std::to_string(corpus.text.bytes));
  const std::string where = o.text_file.empty() ? "the built-in text" : o.text_file;
  if (!same && !o.allow_other_text)
    throw UsageError(fmt::format("{} ({} bytes, {}) is not the text {} was trained on ({} bytes, {}{}); pass "
                                 "--allow-other-text to continue on it anyway",
                                 where, corpus.text.bytes, corpus.text.hash, o.resume,
                                 m.count("run.text_bytes") ? m.at("run.text_bytes") : "?", m.at("run.text_hash"),
                                 m.count("run.text") && !m.at("run.text").empty() ? ", " + m.at("run.text")
                                                                                   : ", the built-in text"));
  if (!corpus.tokenizer.is_char()) return;  // read with the checkpoint's own tokenizer: the same ids
  std::u32string saved;
  try {
    saved = decode_utf8(m.count("vocab") ? m.at("vocab") : "");
  } catch (const UsageError&) {
    throw nn::CheckpointError(fmt::format("{}: vocabulary is not valid UTF-8", o.resume));
  }
  use_vocabulary(corpus, saved);
}

void use_vocabulary(Corpus& corpus, const std::u32string& saved) {
  if (saved == corpus.text.vocab.chars()) return;
  const Vocabulary vocab(saved);
  std::vector<uint16_t> renumber(corpus.text.vocab.chars().size());
  for (size_t i = 0; i < renumber.size(); ++i) {
    const char32_t c = corpus.text.vocab.chars()[i];
    const std::vector<int64_t> id = vocab.encode(std::u32string(1, c));  // UsageError for a new character
    renumber[i] = uint16_t(id[0]);
  }
  for (uint16_t& id : corpus.text.ids) id = renumber[id];
  corpus.text.vocab = vocab;
}

}  // namespace cli
