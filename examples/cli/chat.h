// chat.h — `scratchgrad chat`: a conversation with a model in its chat template (nn/finetune/chat_session.h),
// each reply streamed as it is made, the key/value cache kept across turns.
//
// At a terminal it is a conversation: a prompt, the reply, the next prompt; /reset forgets the turns,
// /system TEXT sets the system prompt. When standard input is not a terminal each line is one message and
// standard output holds the replies alone, one line each, so that a chat can be scripted and compared.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>

#include "options.h"

namespace CLI {
class App;
}

namespace cli {

struct ChatOptions {
  std::string checkpoint;
  std::string template_name;  // alpaca, chatml or llama3; empty: the checkpoint's
  int64_t tokens = 200;       // a reply's most tokens
  double temperature = 0.0;   // 0: greedy
  int64_t top_k = 0;
  double top_p = 1.0;
  uint64_t seed = 0;
  std::string tokenizer_file;  // GPT-2's files and runs of --tokenizer gpt2: GPT-2's tokenizer
  int64_t heads = 0;           // GPT-2's model.safetensors that does not say its head count
  int threads = 1;
  GivenFlags given;
};

// The `chat` subcommand and its flags, added to `app`, filling `options` when parsed.
CLI::App* add_chat_command(CLI::App& app, ChatOptions& options);

// The conversation: messages read from `in`, replies written to `out`, notices (a full context, a message
// that cannot be read) to `err`. `interactive`: prompts and a greeting for a person at a terminal; else one
// reply line per message line (a newline in a reply written \n, a backslash \\). Bad input (the model, the
// template, a flag) throws UsageError or nn::CheckpointError before the first message is read.
int run_chat(const ChatOptions& options, std::istream& in, std::ostream& out, std::ostream& err, bool interactive);

// run_chat on standard input, interactive when it is a terminal.
int run_chat(const ChatOptions& options, std::ostream& out);

// Which of chat's flags apply to which kind of model (refused where they cannot apply).
const std::vector<FlagScope>& chat_flag_scopes();

}  // namespace cli
