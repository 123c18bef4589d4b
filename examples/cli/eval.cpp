// eval.cpp — `scratchgrad eval`: a checkpoint's mean loss, perplexity and bits per byte on a whole text.
#include "commands.h"

#include <functional>
#include <ostream>

#include <fmt/format.h>

#include "autograd/autograd.h"
#include "nn/gpt2.h"
#include "classify.h"
#include "folders.h"
#include "guards.h"
#include "instruct.h"
#include "nn/perplexity.h"
#include "model_files.h"
#include "token_text.h"

namespace cli {

using namespace autograd;

int run_eval(const EvalOptions& o, std::ostream& out) {
  if (is_instruct_eval(o)) return run_eval_instruct(o, out);  // eval --task instruct (instruct.h)
  require(o.task == "text" || o.task == "classify",
          fmt::format("--task must be text (loss on --text), classify (accuracy on --data) or instruct (the loss on "
                      "--data's replies), got '{}'",
                      o.task));
  if (o.task == "classify") return eval_classifier(o, out);  // classify.cpp
  require(o.data_file.empty(), "--data is for eval --task classify (labelled texts) or --task instruct (instruction "
                               "records); --task text reads --text FILE");
  require(o.stride >= 0, fmt::format("--stride must be positive (or 0: half the context), got {}", o.stride));
  require(o.heads >= 0, fmt::format("--heads must be positive, got {}", o.heads));
  require(o.text_file.empty() != o.ids_file.empty(),
          "eval: give the text to score, --text FILE (character models) or --ids-file FILE (token ids)");
  std::string note;
  set_num_threads(usable_threads(o.threads, note));
  if (!note.empty()) out << note << "\n";
  (void)bf16_precision(o.precision, o.numerics);  // its checks, before any file is read
  const bool is_folder = nn::is_hf_folder(o.checkpoint);
  const bool is_gpt2 = !is_folder && nn::is_gpt2_file(o.checkpoint);
  std::vector<int64_t> ids;
  int64_t context = 0, bytes = 0;
  std::function<Tensor(const Tensor&)> logits_of;
  std::unique_ptr<nn::GPTModel> gpt2;
  LoadedModel m;
  FolderModel folder;
  if (is_folder) {  // its tokenizer.json reads --text (GPT-2's: or --tokenizer-file)
    folder = open_folder(o.checkpoint, "eval", o.given.count("--heads") > 0);
    refuse_flags_that_cannot_apply(eval_flag_scopes(), o.given, folder.kind(), o.checkpoint);
    use_numerics_for("gpt", o.numerics);
    use_precision(o.precision, o.numerics);
    const int64_t vocab = folder.model->vocab_size();
    if (!o.text_file.empty()) {
      std::shared_ptr<const tokenizer::Tokenizer> tok = folder.tokenizer;
      if (!o.tokenizer_file.empty())
        tok = std::make_shared<tokenizer::Tokenizer>(load_gpt2_tokenizer_for("eval", o.tokenizer_file));
      require(tok != nullptr, fmt::format("eval: {} has no tokenizer.json to read --text: give the text as token ids "
                                          "with --ids-file",
                                          o.checkpoint));
      const std::string text = read_text_file(o.text_file);
      bytes = int64_t(text.size());
      ids = encode_for_model(*tok, text, vocab, "eval: --text " + o.text_file);
    } else {
      ids = parse_token_ids(read_text_file(o.ids_file), "--ids-file");
    }
    for (size_t i = 0; i < ids.size(); ++i)
      require(ids[i] < vocab, fmt::format("--ids-file: token {} at position {} is outside the vocabulary of {}", ids[i],
                                          i, vocab));
    context = folder.model->context_length();
    logits_of = [&](const Tensor& x) { return (*folder.model)(x); };
  } else if (is_gpt2) {
    refuse_flags_that_cannot_apply(eval_flag_scopes(), o.given, kGpt2File, o.checkpoint);
    require(o.text_file.empty() || !o.tokenizer_file.empty(),
            "eval: a GPT-2 checkpoint reads --text with GPT-2's tokenizer: give --tokenizer-file (the folder of "
            "encoder.json and vocab.bpe), or the text as token ids with --ids-file");
    require(o.ids_file.empty() || o.tokenizer_file.empty(), "eval: --tokenizer-file reads --text; --ids-file is ids already");
    use_numerics_for("gpt", o.numerics);
    use_precision(o.precision, o.numerics);
    gpt2 = nn::load_gpt2(o.checkpoint, o.heads);
    if (!o.text_file.empty()) {
      const std::string text = read_text_file(o.text_file);
      bytes = int64_t(text.size());
      ids = encode_for_model(load_gpt2_tokenizer_for("eval", o.tokenizer_file), text, gpt2->cfg.vocab_size,
                             "eval: --text " + o.text_file);
    } else {
      ids = parse_token_ids(read_text_file(o.ids_file), "--ids-file");
    }
    for (size_t i = 0; i < ids.size(); ++i)
      require(ids[i] < gpt2->cfg.vocab_size, fmt::format("--ids-file: token {} at position {} is outside the vocabulary of {}",
                                                         ids[i], i, gpt2->cfg.vocab_size));
    context = gpt2->cfg.context_length;
    logits_of = [&](const Tensor& x) { return (*gpt2)(x); };
  } else {
    m = load_model(o.checkpoint, o.tokenizer_file);
    refuse_flags_that_cannot_apply(eval_flag_scopes(), o.given, *kind_of_run(m.decoder() != nullptr, m.tokenizer.kind),
                                   o.checkpoint);
    use_numerics_for(m.decoder() ? "gpt" : "mini", o.numerics);
    use_precision(o.precision, o.numerics);
    const std::string text = read_text_file(o.text_file);
    bytes = int64_t(text.size());
    ids = m.tokenizer.is_char() ? m.vocab.encode(decode_utf8(text))
                                : encode_for_model(*m.tokenizer.bpe, text, m.vocab_size(), "eval: --text " + o.text_file);
    context = m.decoder() ? m.decoder()->context_length() : m.model->config.context;
    logits_of = [&](const Tensor& x) { return m.decoder() ? (*m.decoder())(x) : (*m.model)(x); };
  }
  require(ids.size() >= 2, fmt::format("eval: the text has {} token(s); scoring needs at least 2", ids.size()));
  const int64_t stride = o.stride ? o.stride : std::max<int64_t>(context / 2, 1);
  require(stride <= context, fmt::format("--stride {} is longer than the context of {}", stride, context));
  const nn::TextLoss loss = nn::sliding_window_loss(logits_of, ids, context, stride);
  out << fmt::format("eval: {} tokens{}, context {}, stride {}\n", ids.size(),
                     bytes ? fmt::format(" ({} bytes)", bytes) : "", context, stride);
  out << fmt::format("mean loss {:.4f} nats, perplexity {:.3f}", loss.mean(), loss.perplexity());
  if (bytes) out << fmt::format(", bits per byte {:.4f}", loss.bits_per_byte(bytes));
  out << "\n";
  return 0;
}

}  // namespace cli
