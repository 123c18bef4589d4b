// options.h — the options of every `scratchgrad` command (train, generate, eval, info, merge), and the checks and
// settings they share. commands.h declares the commands themselves.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "autograd/device.h"
#include "autograd/numerics.h"
#include "nn/safetensors.h"
#include "text.h"

namespace cli {

// The workshop's program, exactly: its text, D 24, T 8, B 16, lr 0.01, 301 steps, seed 7.
inline const char* kWorkshopText = "aditi likes warm dosa ";

// A UsageError that every rank of an mpirun job raises alike, before any collective operation (the options
// checked against the rank count): rank 0 says it, and each rank ends on its own, with no job abort.
class UsageErrorOnEveryRank : public UsageError {
 public:
  using UsageError::UsageError;
};

// The flags a command line gave ("--top-p", ...), as the parser saw them: a flag left out keeps its
// default, and only a flag given can be refused as one that does not apply.
using GivenFlags = std::set<std::string>;

struct TrainOptions {
  // "mini": the workshop's one-layer model; "gpt": the book's GPT; "llama": a Llama-shaped decoder (nn/llama.h)
  std::string model = "mini";
  std::string text_file;  // empty: the workshop's text
  int64_t steps = 301, batch = 16, context = 8, dim = 24, heads = 1;
  double lr = 0.01;
  uint64_t seed = 7;
  std::string device = "cpu";
  int threads = 1;
  int64_t eval_every = 100;
  int64_t sample_tokens = 14;  // length of the greedy sample printed at the end
  std::string save;            // checkpoint path (safetensors); empty: don't save
  std::string graph;           // write the step's autograd graph as Graphviz DOT here
  std::string plot;            // write the loss curve as SVG here
  // "exact" or "fast" (autograd/numerics.h); empty: SCRATCHGRAD_NUMERICS if set, else the model's own —
  // exact for mini (the workshop's run prints PyTorch's numbers), fast for gpt
  std::string numerics;
  // "cpu" or "reference" (autograd/numerics.h); empty: SCRATCHGRAD_KERNELS if set, else cpu
  std::string kernels;
  // "fp32" or "bf16": products in bfloat16 (use_precision); empty: fp32, or a resumed run's own
  std::string precision;
  // --model gpt and llama (apply_gpt_preset / apply_llama_preset fill what the command line left unset):
  int64_t layers = 3;
  int64_t kv_heads = 0;  // --model llama: key/value heads (0: --heads, plain multi-head attention)
  int64_t ffn_dim = 0;   // --model llama: the SwiGLU's inner width (0: 8/3 · --dim rounded up to a multiple of 8)
  double dropout = 0.0;
  int64_t warmup = 100;        // linear warm-up steps, then cosine decay to 10% of --lr at --steps
  double weight_decay = 0.1;   // AdamW's, on the Linear weights only (not biases, LayerNorm, embeddings)
  double clip = 1.0;           // global gradient-norm clip; 0: none
  int64_t accumulate = 1;      // micro-batches of --batch windows per optimizer step
  int64_t save_every = 0;      // also write --save every N steps (atomically); 0: only at the end
  std::string resume;          // continue the run saved in this checkpoint, to its --steps (or a later one)
  bool steps_set = false;         // --steps was given: a resumed run is extended (or cut) to it
  bool check_every_set = false;   // --check-every was given: a resumed run uses it
  bool allow_other_text = false;  // --allow-other-text: a resumed run may go on with a text other than its own
  // data parallelism, under `mpirun -np N` (docs/distributed.md):
  bool deterministic_reduce = false;  // add micro-shards' gradients in one fixed order: bits independent of N
  int64_t reduce_shards = 0;          // --deterministic-reduce: micro-shards per batch (0: one per window)
  int64_t check_every = 100;          // compare the ranks' parameter checksums every N steps, and at the end
  bool overlap = true;                // start each gradient bucket's allreduce during backward
  // --model gpt: what the text is read with (train_tokenizer.h); the checkpoint carries it
  std::string tokenizer = "char";  // char, bpe or gpt2
  int64_t vocab_size = 512;        // bpe: 256 bytes + merges
  std::string tokenizer_file;      // gpt2: GPT-2's files (a resumed gpt2 run: where they are now)
  // fine-tuning (finetune.h): the run starts from the weights in `init` (GPT-2's model.safetensors, llm.c's
  // .bin, or a checkpoint of `train --model gpt`), whose shapes decide the model
  std::string init;
  bool context_set = false;  // --context was given (else a fine-tune takes min(64, the model's context))
  int64_t init_heads = 0;    // --heads with --init: the head count of a file that does not give it (0: width / 64)
  int64_t lora_rank = 0;     // 0: a full fine-tune; else LoRA adapters of this rank, the rest frozen
  double lora_alpha = 16;    // the adapters' update is scaled by alpha / rank
  std::string lora_targets = "attn";  // attn, mlp or attn,mlp
  // --task instruct (instruct.h): instruction fine-tuning on --data's records, in a chat template
  std::string chat_template;     // --template: alpaca, chatml or llama3 ("": the model's or tokenizer's)
  bool train_on_prompt = false;  // --train-on-prompt: count the prompt's tokens too
  GivenFlags given;                   // what the command line gave (train_flag_scopes() checks them)
  // --task: what the run learns. "text": the next token of --text; "instruct": to follow the instructions of
  // --data's records (instruct.h); "classify": a label for each text of
  // --data (classify.h)
  std::string task = "text";
  std::string data_file;           // classify: the labelled texts (CSV, TSV or JSONL); instruct: the records
  std::string train_blocks = "1";  // classify: the last N blocks train (with the final norm and the head), or all
  std::string split = "0.7,0.1,0.2";  // classify: the training, validation and test fractions of --data
  int64_t epochs = 0;              // classify: passes over the training part (instead of --steps)
  int64_t max_length = 0;          // classify, instruct: the most tokens of a text read (0: the model's context)
};

// A GPT preset sized for a laptop: "tiny" (2 blocks, D 48, H 4, T 32, B 16, 1000 steps) or "small" (3 blocks,
// D 96, H 4, T 64, B 16, 3000 steps), with nanoGPT's recipe (AdamW lr 3e-3, 100 warm-up steps then cosine
// decay, weight decay 0.1, clip 1.0). `is_set(name)` says whether the command line gave that flag itself;
// those keep their value. Throws UsageError for another name.
void apply_gpt_preset(TrainOptions& options, const std::string& preset, const std::function<bool(const char*)>& is_set);
// The Llama presets, the GPT's recipe with a Llama block: "tiny" (2 blocks, D 48, 4 heads, 2 kv heads, ffn 128,
// T 32, B 16, 1000 steps) or "small" (3 blocks, D 96, 4 heads, 2 kv heads, ffn 256, T 64, B 16, 3000 steps).
void apply_llama_preset(TrainOptions& options, const std::string& preset, const std::function<bool(const char*)>& is_set);
// --model llama's SwiGLU width when --ffn-dim is not given: 8/3 of --dim (the MLP then has the parameters of
// GPT's 4·D one), rounded up to a multiple of 8.
int64_t default_ffn_dim(int64_t dim);

// `generate`, on every kind of checkpoint alike (generate.cpp); generate_flag_scopes() says which flags a
// kind of checkpoint cannot take.
struct GenerateOptions {
  std::string checkpoint;
  std::optional<std::string> prompt;  // text; default: the training sample's prompt (our checkpoints)
  std::string prompt_ids;             // or the prompt as token ids, "464 3290 ..."
  int64_t tokens = 100;
  double temperature = 0.0;  // 0: greedy
  int64_t top_k = 0;         // 0: no limit
  double top_p = 1.0;        // sample among the likeliest tokens whose probabilities sum to this
  uint64_t seed = 0;
  std::string numerics;  // as TrainOptions::numerics, for the checkpoint's model
  std::string kernels;   // as TrainOptions::kernels
  std::string precision = "fp32";  // as TrainOptions::precision
  bool kv_cache = true;  // GPT models: a key/value cache (nn/generation.h); false: recompute the window a token
  bool print_ids = false;  // print the generated ids (not the prompt's), space-separated
  int64_t stop_id = -2;    // stop after this token; -1: never; -2: GPT-2's files: <|endoftext|> (50256), ours: never
  // GPT-2's tokenizer (encoder.json + vocab.bpe's folder): for GPT-2's files, --prompt as text and text out;
  // for a GPT trained with --tokenizer gpt2, where GPT-2's files are now
  std::string tokenizer_file;
  // GPT-2's and llm.c's files:
  std::string context_full = "refuse";  // at the context's end: refuse or slide
  int64_t heads = 0;            // the head count, when the file does not say it (default: emb_dim / 64)
  int threads = 1;
  GivenFlags given;  // what the command line gave (generate_flag_scopes() checks them)
};

struct EvalOptions {
  std::string checkpoint;
  std::string text_file;  // the text to score (a GPT-2 checkpoint also needs tokenizer_file)
  std::string ids_file;   // GPT-2 checkpoints: the text as token ids, whitespace-separated
  std::string tokenizer_file;  // GPT-2 checkpoints: GPT-2's tokenizer, to read text_file
  int64_t stride = 0;     // windows start every `stride` tokens; 0: half the context
  int64_t heads = 0;      // GPT-2: the head count, when the file does not say it
  int threads = 1;
  std::string numerics;
  // --task instruct (instruct.h): the loss over an instruction data set's counted targets
  std::string chat_template;  // --template ("": the checkpoint's)
  bool train_on_prompt = false;
  int64_t max_length = 0;
  std::string responses;       // --responses FILE: each example's generated reply beside the reference (JSONL)
  int64_t response_tokens = 256;  // --tokens: a generated reply's most tokens
  std::string precision = "fp32";  // as TrainOptions::precision
  GivenFlags given;  // what the command line gave (eval_flag_scopes() checks them)
  // text: loss and perplexity on --text; classify: accuracy on --data (classify.h); instruct: the loss on
  // --data's replies (instruct.h)
  std::string task = "text";
  std::string data_file;      // classify: labelled texts; instruct: instruction records
};

struct MergeOptions {
  std::string base;     // GPT-2 model.safetensors; default: the base file the adapters name
  std::string lora;     // adapters written by nn::save_lora
  std::string out;      // the merged model, in GPT-2's layout
  int64_t heads = 0;
};
// ---- which flags apply to which kind of model

// The kinds of model a command trains or reads, one bit each; a flag's scope is the kinds it applies to.
enum ModelKind : unsigned {
  kCharModel = 1u << 0,       // the workshop's one-layer character model (--model mini)
  kGptChars = 1u << 1,        // a GPT of ours that reads characters (--tokenizer char)
  kGptBpe = 1u << 2,          // ... a byte-level BPE learned from its text (--tokenizer bpe)
  kGptGpt2Tokens = 1u << 3,   // ... GPT-2's tokens (--tokenizer gpt2)
  kGpt2File = 1u << 4,        // GPT-2's own model.safetensors (Hugging Face's layout)
  kLlmcFile = 1u << 5,        // llm.c's .bin
  kLlamaFolder = 1u << 6,     // a Hugging Face folder of the Llama family (Llama, Qwen2, Qwen3, Mistral)
  kOurGpts = kGptChars | kGptBpe | kGptGpt2Tokens,
  kAnyGpt = kOurGpts | kGpt2File | kLlmcFile,
  kAnyDecoder = kAnyGpt | kLlamaFolder,  // every model with a key/value cache
};
// "a GPT with --tokenizer bpe", "GPT-2's model.safetensors", ...
std::string model_kind_name(ModelKind kind);
// The kind of a model of train's: the workshop's (gpt false), or a GPT reading `tokenizer` (char, bpe or
// gpt2); nullopt for another tokenizer (a fine-tune's, left to its --init file, is "").
std::optional<ModelKind> kind_of_run(bool gpt, const std::string& tokenizer);

// A flag that applies to some kinds of model only, and what it is for (said when it is refused).
struct FlagScope {
  const char* flag;
  unsigned kinds;
  const char* is_for;
};
// The flags of train, generate and eval that do not apply to every kind of model.
const std::vector<FlagScope>& train_flag_scopes();
const std::vector<FlagScope>& generate_flag_scopes();
const std::vector<FlagScope>& eval_flag_scopes();
// Throws UsageError for the first flag of `scopes` that was given and does not apply to `kind`, naming the
// flag, what it is for and `subject` ("this run", the checkpoint's path): a flag that cannot apply is
// refused, never accepted and ignored.
void refuse_flags_that_cannot_apply(const std::vector<FlagScope>& scopes, const GivenFlags& given, ModelKind kind,
                                    const std::string& subject);

// ---- the environment

// Checks every SCRATCHGRAD_ variable the program reads (numerics, kernels, threads, the collective timeout,
// ...): a value that is not one it accepts is a UsageError naming the variable, before a command does
// anything. Every command calls it first (run_command).
void check_environment();

// Sets the numerics a run of `model` ("mini" or "gpt") uses: `requested` if given (exact or fast, else
// UsageError), else SCRATCHGRAD_NUMERICS, else exact for mini and fast for gpt. Returns the choice.
autograd::Numerics use_numerics_for(const std::string& model, const std::string& requested);
// --precision: "fp32" (the default) or "bf16", the matrix products in bfloat16 with float32 sums
// (autograd/autocast.h, set process-wide) in fast numerics; called after use_numerics_for. bf16 with
// exact numerics asked for (`numerics_flag` "exact", or SCRATCHGRAD_NUMERICS=exact without a flag) is a
// UsageError: exact promises PyTorch's float32 bits, which bfloat16 products cannot give.
void use_precision(const std::string& precision, const std::string& numerics_flag);
// Whether --precision asks for bf16, with use_precision's checks (UsageError) and without setting anything:
// for the checks made before any file is read.
bool bf16_precision(const std::string& precision, const std::string& numerics_flag);
// Sets the kernels CPU tensors use: `requested` if given (cpu or reference, else UsageError), else
// SCRATCHGRAD_KERNELS (a bad value: UsageError), else the build's default.
void use_kernels(const std::string& requested);

// The checks run_train makes on its options before anything else (numbers in range, names known): throws
// UsageError naming the flag and the value.
void check_train_options(const TrainOptions& options);

// Throws UsageError(message) unless ok: a command's check on its options.
void require(bool ok, const std::string& message);

// --device's value as a Device this build and machine can use, else UsageError naming the flag.
autograd::Device checked_device(const std::string& name);

// "464 3290, 318" → {464, 3290, 318}: ids separated by spaces, commas or line breaks; UsageError naming
// `flag` for anything else.
std::vector<int64_t> parse_token_ids(const std::string& text, const std::string& flag);

}  // namespace cli
