// command_line.cpp — the command line of `scratchgrad` (CLI11): every flag, its default and its help.
#include "command_line.h"

#include <cstdlib>
#include <ostream>

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "autograd/memory/out_of_memory.h"
#include "finetune.h"
#include "guards.h"
#include "instruct.h"
#include "nn/numbers.h"
#include "nn/safetensors.h"
#include "ranks.h"

namespace cli {

std::string one_line(std::string_view message) {
  std::string out;
  for (char c : message) {
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\x{:02x}", int(c));
    else out += c;
  }
  return out;
}

// This process's rank as mpirun's launcher gives it in the environment (MPI is not started yet while the
// command line is parsed); 0 when not started by one (or when the variable is not a rank).
static int rank_from_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* value = std::getenv(name)) return int(nn::parse_whole(value, 0, INT32_MAX).value_or(0));
  return 0;
}

// Why `text` is not a whole number (nn::parse_whole: "2x", "+2", "2.0" and numbers past int64 are refused,
// never read as their first digits or clamped); empty when it is one.
static std::string whole_number_problem(const std::string& text) {
  if (nn::parse_whole(text)) return "";
  const std::string why = integer_problem(text);  // says "out of range" where it is
  return why.empty() ? fmt::format("{} is not a whole number", text) : why;
}

// Why `text` is not a finite number (nn::parse_finite: "nan", "inf" and 1e400 are refused); empty when it is.
static std::string finite_number_problem(const std::string& text) {
  return nn::parse_finite(text) ? "" : fmt::format("{} is not a finite number", text);
}

// The flags of `command` that were given on its command line.
static GivenFlags flags_given(const CLI::App& command) {
  GivenFlags given;
  for (const CLI::Option* option : command.get_options())
    if (option->count() > 0) given.insert(option->get_name());
  return given;
}

Command parse_command_line(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"scratchgrad: train a character-level attention model or GPT, and sample from it"};
  app.require_subcommand(1);

  Command c;
  TrainOptions& train = c.train;
  CLI::App* train_cmd = app.add_subcommand("train", "train a model (defaults: the workshop's run of its one-layer model)");
  train_cmd->add_option("--model", train.model, "mini (the workshop's one-layer model), gpt or llama (a Llama block: RMSNorm, RoPE, "
                        "SwiGLU, grouped-query attention)")->capture_default_str();
  std::string preset;
  train_cmd->add_option("--preset", preset, "gpt, llama: tiny or small (default small), sizes and recipe for a laptop");
  train_cmd->add_option("--kv-heads", train.kv_heads, "llama: key/value heads (must divide --heads; default: the preset's, else --heads)");
  train_cmd->add_option("--ffn-dim", train.ffn_dim, "llama: the SwiGLU's inner width (default: the preset's, else 8/3 of --dim)");
  train_cmd->add_option("--layers", train.layers, "gpt, llama: transformer blocks");
  train_cmd->add_option("--dropout", train.dropout, "gpt, llama: dropout on the embeddings and residual branches");
  train_cmd->add_option("--warmup", train.warmup, "gpt, llama: linear warm-up steps before the cosine decay")->capture_default_str();
  train_cmd->add_option("--weight-decay", train.weight_decay, "gpt, llama: AdamW weight decay of the Linear weights")->capture_default_str();
  train_cmd->add_option("--clip", train.clip, "gpt, llama: clip the gradients' global norm to this (0: none)")->capture_default_str();
  train_cmd->add_option("--accumulate", train.accumulate, "gpt, llama: micro-batches per step")->capture_default_str();
  train_cmd->add_option("--save-every", train.save_every, "gpt, llama: also write --save every N steps (atomically)");
  train_cmd->add_option("--resume", train.resume, "gpt, llama: continue the run saved in this checkpoint to its --steps (--steps N: to N)");
  train_cmd->add_option("--text", train.text_file, "UTF-8 text file to learn (default: the workshop's phrase)");
  train_cmd->add_option("--steps", train.steps, "training steps")->capture_default_str();
  train_cmd->add_option("--batch", train.batch, "windows per batch (B)")->capture_default_str();
  train_cmd->add_option("--context", train.context, "tokens per window (T; characters for --tokenizer char)")
      ->capture_default_str();
  train_cmd->add_option("--dim", train.dim, "embedding size (D)")->capture_default_str();
  train_cmd->add_option("--heads", train.heads,
                        "attention heads (must divide D); with --init, those of a GPT-2 file that does not give its own")->capture_default_str();
  train_cmd->add_option("--lr", train.lr, "Adam learning rate")->capture_default_str();
  train_cmd->add_option("--seed", train.seed, "manual_seed before building the model")->capture_default_str();
  train_cmd->add_option("--device", train.device, "cpu or cuda")->capture_default_str();
  train_cmd->add_option("--threads", train.threads, "CPU threads")->capture_default_str();
  train_cmd->add_option("--numerics", train.numerics,
                        "exact (PyTorch's bits) or fast (fused multiply-adds); default: SCRATCHGRAD_NUMERICS, "
                        "else exact for mini and fast for gpt");
  train_cmd->add_option("--precision", train.precision,
                        "fp32, or bf16: matrix products with bfloat16 operands and float32 sums, the rest float32 "
                        "(fast numerics; docs/precision.md); default: fp32, or a resumed run's");
  train_cmd->add_option("--kernels", train.kernels,
                        "cpu (fast) or reference (the plain loops of autograd/reference/); default: "
                        "SCRATCHGRAD_KERNELS, else cpu");
  train_cmd->add_option("--eval-every", train.eval_every, "report every N steps")->capture_default_str();
  train_cmd->add_option("--sample", train.sample_tokens,
                        "tokens to generate at the end, greedily (characters for --tokenizer char)")
      ->capture_default_str();
  train_cmd->add_option("--tokenizer", train.tokenizer,
                        "gpt, llama: char (one id per character), bpe (a byte-level BPE learned from the training split) or "
                        "gpt2 (GPT-2's, from --tokenizer-file); the checkpoint carries it")
      ->capture_default_str();
  train_cmd->add_option("--vocab-size", train.vocab_size, "--tokenizer bpe: tokens in the vocabulary (256 bytes + merges)")
      ->capture_default_str();
  train_cmd->add_option("--tokenizer-file", train.tokenizer_file,
                        "--tokenizer gpt2: the folder of encoder.json and vocab.bpe, or a byte-level BPE tokenizer.json (GPT-2's, Llama 3's, Qwen's, SmolLM2's)");
  train_cmd->add_option("--init", train.init,
                        "fine-tune: start from these weights (GPT-2's model.safetensors, llm.c's .bin, a Hugging Face "
                        "folder, or a checkpoint of --model gpt or llama); their shapes set the model, so --dim, --layers, --preset are refused; "
                        "defaults B 4, 200 steps, lr 1e-4 (1e-3 with LoRA), --context min(64, the model's), the file's "
                        "tokenizer (GPT-2: --tokenizer gpt2 with --tokenizer-file)");
  train_cmd->add_option("--lora-rank", train.lora_rank,
                        "--init: train only LoRA adapters of this rank (the weights frozen); --save then writes the "
                        "adapters, the optimizer's state and the base file's path (scratchgrad merge adds them in)");
  train_cmd->add_option("--lora-alpha", train.lora_alpha, "--lora-rank: the adapters' update is scaled by alpha / rank")
      ->capture_default_str();
  train_cmd->add_option("--lora-targets", train.lora_targets,
                        "--lora-rank: the layers adapted: attn (q, k, v and the output projection), mlp, or attn,mlp")
      ->capture_default_str();
  train_cmd->add_option("--save", train.save, "write a safetensors checkpoint here");
  train_cmd->add_option("--graph", train.graph,
                        "write one step's autograd graph (Graphviz DOT) here; `dot -Tsvg step.dot -o step.svg` draws "
                        "it (Graphviz: apt-get install graphviz)");
  train_cmd->add_option("--plot", train.plot, "write the loss curve (SVG) here");
  train_cmd->add_flag("--deterministic-reduce", train.deterministic_reduce,
                      "mpirun: add micro-shards' gradients in one fixed order (bits independent of the rank count)");
  train_cmd->add_option("--reduce-shards", train.reduce_shards,
                        "--deterministic-reduce: micro-shards per batch (default: one per window)");
  train_cmd->add_option("--check-every", train.check_every, "mpirun: compare the ranks' parameters every N steps")
      ->capture_default_str();
  train_cmd->add_flag("!--no-overlap", train.overlap, "mpirun: start the gradient allreduces only after backward");
  train_cmd->add_flag("--allow-other-text", train.allow_other_text,
                      "--resume: continue on a text other than the run's own (same characters)");
  train_cmd->add_option("--task", train.task, "text (learn the next token of --text), classify (a label for each "
                        "text of --data) or instruct (follow the instructions of --data's records): "
                        "docs/finetuning.md")->capture_default_str();
  train_cmd->add_option("--data", train.data_file, "--task classify: labelled texts, CSV or TSV (a header row naming "
                        "label and text) or JSONL ({\"text\": ..., \"label\": ...}); --task instruct: JSON or JSONL of "
                        "{instruction, input, output} or {messages: [...]} records");
  train_cmd->add_option("--train-blocks", train.train_blocks, "--task classify: the last N blocks train, with the final "
                        "norm and the new head (all: every parameter)")->capture_default_str();
  train_cmd->add_option("--split", train.split, "--task classify: the training, validation and test fractions of --data")
      ->capture_default_str();
  train_cmd->add_option("--epochs", train.epochs, "--task classify: passes over the training part (instead of --steps)");
  train_cmd->add_option("--max-length", train.max_length, "--task classify, instruct: cut each text or record to N "
                        "tokens (default and most: the model's context)");
  // --task instruct (instruct.h)
  train_cmd->add_option("--template", train.chat_template,
                        "--task instruct: alpaca, chatml or llama3 (default: the --init model's, else the one its "
                        "tokenizer's special tokens name; a new model: chatml)");
  train_cmd->add_flag("--train-on-prompt", train.train_on_prompt,
                      "--task instruct: count the prompt's tokens in the loss too (default: the replies only)");

  GenerateOptions& gen = c.generate;
  std::string prompt;
  CLI::App* gen_cmd = app.add_subcommand("generate", "continue a prompt with a trained model (any checkpoint train "
                                                     "writes, GPT-2's model.safetensors, llm.c's .bin)");
  gen_cmd->add_option("--checkpoint", gen.checkpoint, "the model: a checkpoint of train, GPT-2's or llm.c's file")
      ->required();
  CLI::Option* prompt_opt =
      gen_cmd->add_option("--prompt", prompt, "text to continue (default: the training sample's; GPT-2's files: with "
                                              "--tokenizer-file)");
  gen_cmd->add_option("--prompt-ids", gen.prompt_ids, "or the prompt as token ids, e.g. \"464 3290\"");
  gen_cmd->add_option("--tokens", gen.tokens, "tokens to generate (characters for a character model)")->capture_default_str();
  gen_cmd->add_option("--temperature", gen.temperature, "0 = greedy, else sample softmax(logits / t)")->capture_default_str();
  gen_cmd->add_option("--top-k", gen.top_k, "sample only among the k likeliest (0 = all)")->capture_default_str();
  gen_cmd->add_option("--top-p", gen.top_p, "sample only among the likeliest tokens whose probabilities sum to p, in (0, 1]")
      ->capture_default_str();
  gen_cmd->add_option("--seed", gen.seed, "seed for sampling")->capture_default_str();
  gen_cmd->add_flag("--ids", gen.print_ids, "print the generated token ids (not the prompt's), space-separated");
  gen_cmd->add_option("--stop-id", gen.stop_id,
                      "stop after this token (-1: never; default: <|endoftext|>, 50256, for GPT-2's and llm.c's files, "
                      "never for train's)");
  gen_cmd->add_option("--numerics", gen.numerics, "exact or fast (default as for train)");
  gen_cmd->add_option("--kernels", gen.kernels, "cpu or reference (default as for train)");
  gen_cmd->add_option("--precision", gen.precision, "fp32 or bf16 (as for train)")->capture_default_str();
  gen_cmd->add_option("--threads", gen.threads, "CPU threads")->capture_default_str();
  gen_cmd->add_flag("!--no-kv-cache", gen.kv_cache,
                    "GPT models: recompute the whole window for every token instead of caching keys and values (the "
                    "reference the cache is tested against; slower)");
  gen_cmd->add_option("--tokenizer-file", gen.tokenizer_file,
                      "GPT-2's tokenizer (the folder of encoder.json and vocab.bpe, or a tokenizer.json): GPT-2's files "
                      "read --prompt as text and print text with it; a run of --tokenizer gpt2 finds it there");
  gen_cmd->add_option("--context-full", gen.context_full,
                      "GPT-2's files: when prompt + tokens exceed the context, refuse (before starting) or slide (the "
                      "cache restarts from the last half of the context); train's checkpoints slide a token at a time")
      ->capture_default_str();
  gen_cmd->add_option("--heads", gen.heads, "GPT-2's model.safetensors: attention heads, if the file does not say "
                                            "(default: width / 64)");

  CLI::App* info_cmd = app.add_subcommand("info", "describe a checkpoint");
  info_cmd->add_option("--checkpoint", c.info_checkpoint,
                       "a checkpoint of train, a LoRA adapters file, GPT-2's model.safetensors or llm.c's .bin")
      ->required();

  TokenizeOptions& tok = c.tokenize;
  CLI::App* tokenize_cmd = app.add_subcommand("tokenize", "show a text as tokens and their ids, or ids as text (--decode)");
  tokenize_cmd->add_option("--tokenizer", tok.tokenizer,
                           "char (the default), bpe (a file from `scratchgrad bpe --save`) or gpt2");
  tokenize_cmd->add_option("--tokenizer-file", tok.tokenizer_file,
                           "bpe: the saved tokenizer; gpt2: the folder of encoder.json and vocab.bpe, or a tokenizer.json; "
                           "alone: a Hugging Face tokenizer.json (Llama 3, Qwen2/3, SmolLM2, GPT-2) or its model's folder");
  tokenize_cmd->add_option("--checkpoint", tok.checkpoint, "use this checkpoint's own tokenizer (instead of --tokenizer)");
  tokenize_cmd->add_option("--text", tok.text_file, "the text file, or the ids for --decode (default: standard input)");
  tokenize_cmd->add_flag("--ids", tok.ids_only, "print only the ids, space-separated");
  tokenize_cmd->add_flag("--decode", tok.decode, "read ids (whitespace-separated) and write the bytes they stand for");

  BpeOptions& bpe = c.bpe;
  CLI::App* bpe_cmd = app.add_subcommand("bpe", "learn a byte-level BPE tokenizer from a text");
  bpe_cmd->add_option("--text", bpe.text_file, "the text file to learn from")->required();
  bpe_cmd->add_option("--vocab-size", bpe.vocab_size, "tokens in all: 256 bytes + merges")->capture_default_str();
  bpe_cmd->add_option("--pattern", bpe.pattern, "split before merging: none, gpt2 or gpt4")->capture_default_str();
  bpe_cmd->add_flag("--explain", bpe.explain, "show the first merges as they happen: the pair, its count, the new token");
  bpe_cmd->add_option("--explain-count", bpe.explain_count, "--explain: how many merges to show")->capture_default_str();
  bpe_cmd->add_option("--save", bpe.save, "write the tokenizer here (a text file: the merges in order)");

  EvalOptions& ev = c.eval;
  CLI::App* eval_cmd = app.add_subcommand("eval", "mean loss, perplexity and bits per byte of a checkpoint on a text");
  eval_cmd->add_option("--checkpoint", ev.checkpoint, "safetensors file (ours, or a GPT-2 model.safetensors)")->required();
  eval_cmd->add_option("--text", ev.text_file, "the text to score (GPT-2: with --tokenizer-file)");
  eval_cmd->add_option("--tokenizer-file", ev.tokenizer_file,
                       "GPT-2's tokenizer (the folder of encoder.json and vocab.bpe, or a tokenizer.json): GPT-2's "
                       "model.safetensors reads --text with it; a run of --tokenizer gpt2 finds it there");
  eval_cmd->add_option("--ids-file", ev.ids_file, "GPT-2's model.safetensors: the text as token ids, whitespace-separated");
  eval_cmd->add_option("--stride", ev.stride, "windows start every S tokens (default: half the context)");
  eval_cmd->add_option("--heads", ev.heads, "GPT-2's model.safetensors: attention heads, if the file does not say "
                                            "(default: width / 64)");
  eval_cmd->add_option("--threads", ev.threads, "CPU threads")->capture_default_str();
  eval_cmd->add_option("--numerics", ev.numerics, "exact or fast (default as for train)");
  // --task instruct (instruct.h)
  eval_cmd->add_option("--template", ev.chat_template, "--task instruct: alpaca, chatml or llama3 (default: the checkpoint's)");
  eval_cmd->add_flag("--train-on-prompt", ev.train_on_prompt, "--task instruct: count the prompt's tokens too");
  eval_cmd->add_option("--max-length", ev.max_length, "--task instruct: cut each example to this many tokens");
  eval_cmd->add_option("--responses", ev.responses,
                       "--task instruct: write each example's greedy reply beside its reference here (JSON Lines)");
  eval_cmd->add_option("--tokens", ev.response_tokens, "--responses: a reply's most tokens")->capture_default_str();

  eval_cmd->add_option("--task", ev.task, "text (loss on --text), classify (accuracy on --data) or instruct (the mean "
                       "loss over --data's replies)")->capture_default_str();
  eval_cmd->add_option("--data", ev.data_file, "--task classify: labelled texts, as train --task classify reads them; "
                       "--task instruct: JSON or JSONL instruction records");

  ClassifyOptions& cls = c.classify;
  std::string classify_prompt;
  CLI::App* classify_cmd = app.add_subcommand("classify", "each label of a classifier (train --task classify) with its "
                                                          "probability, for a text or each line of a file");
  classify_cmd->add_option("--checkpoint", cls.checkpoint, "a checkpoint of train --task classify")->required();
  CLI::Option* classify_prompt_opt = classify_cmd->add_option("--prompt", classify_prompt, "the text to classify");
  classify_cmd->add_option("--text", cls.text_file, "or a file of texts, one a line");
  classify_cmd->add_option("--tokenizer-file", cls.tokenizer_file,
                           "a classifier of GPT-2's tokens moved from where it was trained: GPT-2's tokenizer now");
  classify_cmd->add_option("--threads", cls.threads, "CPU threads")->capture_default_str();
  classify_cmd->add_option("--numerics", cls.numerics, "exact or fast (default: fast)");
  eval_cmd->add_option("--precision", ev.precision, "fp32 or bf16 (as for train)")->capture_default_str();

  MergeOptions& mg = c.merge;
  CLI::App* merge_cmd = app.add_subcommand("merge", "add LoRA adapters into their GPT-2 base and write the merged model");
  merge_cmd->add_option("--lora", mg.lora, "adapters file (nn::save_lora)")->required();
  merge_cmd->add_option("--out", mg.out, "where to write the merged model.safetensors (not --lora, nor the base)")
      ->required();
  merge_cmd->add_option("--base", mg.base,
                        "the base model (default: the one the adapters name); it must be the file they were trained on");
  merge_cmd->add_option("--heads", mg.heads, "attention heads, if the base file does not say (default: width / 64)");

  CLI::App* chat_cmd = add_chat_command(app, c.chat);

  // Every number on the command line is read whole (nn/numbers.h): "2x" is not 2, a whole number past int64
  // is not clamped, 1e400 is not infinity. Each command's ranges are checked where it runs.
  const CLI::Validator whole_number([](std::string& text) { return whole_number_problem(text); }, "", "int64");
  const CLI::Validator finite_number([](std::string& text) { return finite_number_problem(text); }, "", "number");
  const CLI::Validator seed([](std::string& text) { return seed_problem(text); }, "", "uint64");
  struct Numbers {
    CLI::App* command;
    std::vector<const char*> whole, finite, seeds;
  };
  for (const Numbers& numbers : std::vector<Numbers>{
           {train_cmd,
            {"--layers", "--warmup", "--accumulate", "--save-every", "--steps", "--batch", "--context", "--dim", "--heads",
             "--threads", "--eval-every", "--sample", "--reduce-shards", "--check-every", "--lora-rank", "--vocab-size",
             "--kv-heads", "--ffn-dim", "--epochs", "--max-length"},
            {"--lr", "--dropout", "--weight-decay", "--clip", "--lora-alpha"},
            {"--seed"}},
           {gen_cmd, {"--tokens", "--top-k", "--stop-id", "--threads", "--heads"}, {"--temperature", "--top-p"}, {"--seed"}},
           {bpe_cmd, {"--vocab-size", "--explain-count"}, {}, {}},
           {eval_cmd, {"--stride", "--heads", "--threads", "--max-length", "--tokens"}, {}, {}},
           {merge_cmd, {"--heads"}, {}, {}},
           {classify_cmd, {"--threads"}, {}, {}},
           {chat_cmd, {"--tokens", "--top-k", "--threads", "--heads"}, {"--temperature", "--top-p"}, {"--seed"}},
       }) {
    for (const char* flag : numbers.whole) numbers.command->get_option(flag)->check(whole_number);
    for (const char* flag : numbers.finite) numbers.command->get_option(flag)->check(finite_number);
    for (const char* flag : numbers.seeds) numbers.command->get_option(flag)->check(seed);
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    c.status = app.exit(e, out, err);
    return c;
  } catch (const CLI::CallForAllHelp& e) {
    c.status = app.exit(e, out, err);
    return c;
  } catch (const CLI::ParseError& e) {
    // Under mpirun every rank parses the same command line and fails the same way: rank 0 says it.
    if (rank_from_launcher() == 0) err << "scratchgrad: error: " << one_line(e.what()) << " (see scratchgrad --help)\n";
    c.status = 2;
    return c;
  }

  if (*train_cmd) {
    c.kind = Command::Kind::train;
    train.given = flags_given(*train_cmd);
    auto given = [&](const char* flag) { return train.given.count(flag) > 0; };
    train.steps_set = given("--steps"), train.check_every_set = given("--check-every");
    apply_instruct_options(train, given);  // --task instruct's flags and a new model's defaults (instruct.h)
    if (!train.resume.empty()) {
      check_resume_flags(given);
      for (const char* flag : {"--init", "--lora-rank", "--lora-alpha", "--lora-targets"})
        if (given(flag))
          throw UsageError(fmt::format("{} cannot change a resumed run: its base weights and adapters come from the "
                                       "checkpoint",
                                       flag));
    } else if (train.allow_other_text) {
      throw UsageError("--allow-other-text is for --resume");
    }
    if (train.resume.empty()) apply_finetune_options(train, given);
    apply_task_options(train, given);  // after the fine-tune's defaults: a classifier's replace them
    // (--preset on the workshop's model is refused with the other flags it cannot take: train_flag_scopes)
    if (train.resume.empty() && train.init.empty() && train.model == "gpt")
      apply_gpt_preset(train, preset.empty() ? "small" : preset, given);
    if (train.resume.empty() && train.init.empty() && train.model == "llama") {
      apply_llama_preset(train, preset.empty() ? "small" : preset, given);
      if (given("--heads") && !given("--kv-heads") && !given("--preset")) train.kv_heads = train.heads;
      if (given("--dim") && !given("--ffn-dim") && !given("--preset")) train.ffn_dim = default_ffn_dim(train.dim);
    }
  } else if (*gen_cmd) {
    c.kind = Command::Kind::generate;
    gen.given = flags_given(*gen_cmd);
    if (*prompt_opt) gen.prompt = prompt;
  } else if (*tokenize_cmd) {
    c.kind = Command::Kind::tokenize;
  } else if (*bpe_cmd) {
    c.kind = Command::Kind::bpe;
  } else if (*eval_cmd) {
    c.kind = Command::Kind::eval;
    ev.given = flags_given(*eval_cmd);
  } else if (*merge_cmd) {
    c.kind = Command::Kind::merge;
  } else if (*classify_cmd) {
    c.kind = Command::Kind::classify;
    cls.given = flags_given(*classify_cmd);
    if (*classify_prompt_opt) cls.prompt = classify_prompt;
  } else if (*chat_cmd) {
    c.kind = Command::Kind::chat;
    c.chat.given = flags_given(*chat_cmd);
  } else {
    c.kind = Command::Kind::info;
  }
  return c;
}

int run_command(const Command& c, std::ostream& out) {
  if (c.kind != Command::Kind::done) check_environment();  // every command, before it does anything
  switch (c.kind) {
    case Command::Kind::train: return run_train(c.train, out);
    case Command::Kind::generate: return run_generate(c.generate, out);
    case Command::Kind::info: return run_info(c.info_checkpoint, out);
    case Command::Kind::tokenize: return run_tokenize(c.tokenize, out);
    case Command::Kind::bpe: return run_bpe(c.bpe, out);
    case Command::Kind::eval: return run_eval(c.eval, out);
    case Command::Kind::merge: return run_merge(c.merge, out);
    case Command::Kind::classify: return run_classify(c.classify, out);
    case Command::Kind::chat: return run_chat(c.chat, out);
    case Command::Kind::done: break;
  }
  return c.status;
}

// This process's rank, for deciding who prints: MPI's once it is started, the launcher's before (when every
// rank refuses the same command line or environment alike).
static int rank_for_messages() {
  const int rank = process_rank();
  return rank != 0 ? rank : rank_from_launcher();
}

// Prints one error line (in one write: under mpirun the ranks share stderr) and ends the run. Errors in the
// options or in a checkpoint are the same on every rank, so only rank 0 says them.
static int fail(std::ostream& err, const char* kind, const std::string& what, int status, bool every_rank) {
  if (every_rank || rank_for_messages() == 0)
    err << (std::string("scratchgrad: ") + kind + rank_label() + ": " + one_line(what) + "\n") << std::flush;
  return end_run(status);
}

// Under mpirun a failure must end every rank (end_run); the error lines name their rank.
int run_command_line(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  try {
    return end_run(run_command(parse_command_line(argc, argv, out, err), out));
  } catch (const UsageErrorOnEveryRank& e) {  // every rank ends alike: no abort of the job
    if (rank_for_messages() == 0) err << ("scratchgrad: error" + rank_label() + ": " + one_line(e.what()) + "\n") << std::flush;
    return 2;
  } catch (const UsageError& e) {
    return fail(err, "error", e.what(), 2, false);
  } catch (const nn::CheckpointError& e) {
    return fail(err, "error", e.what(), 2, false);
  } catch (const autograd::OutOfMemory& e) {  // sizes from the command line too big for this machine
    return fail(err, "error", std::string(e.what()) + " (choose smaller --dim, --layers, --batch or --context)", 2, false);
  } catch (const std::bad_alloc&) {
    return fail(err, "error", "out of memory (choose smaller --dim, --layers, --batch or --context)", 2, false);
  } catch (const std::exception& e) {
    if (const std::string stopped = stopped_rank_error(e); !stopped.empty()) return fail(err, "error", stopped, 1, true);
    return fail(err, "internal error", e.what(), 1, true);
  }
}

}  // namespace cli
