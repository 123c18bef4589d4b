// mini_self_attention — the workshop's tiny character model (mini_self_attention.py), trained with
// Adam for 301 steps from torch.manual_seed(7), then generating greedily from "aditi li".
//
//   mini_self_attention                    the workshop's output
//   mini_self_attention --graph FILE.dot   also writes the graph of the first step's loss (Graphviz DOT;
//                                          render it with: dot -Tsvg FILE.dot -o graph.svg)
//   SCRATCHGRAD_TRACE=first mini_self_attention   prints the first backward pass, node by node, on stderr
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>

#include "autograd/inspect/dot.h"
#include "nn/nn.h"
#include "optim/optim.h"

using namespace autograd;

int main(int argc, char** argv) {
  set_numerics(Numerics::exact);  // PyTorch's bits: this program prints the numbers PyTorch prints
  std::string graph_file;
  for (int a = 1; a < argc; ++a) {
    if (std::strcmp(argv[a], "--graph") == 0 && a + 1 < argc) {
      graph_file = argv[++a];
    } else {
      std::fprintf(stderr, "usage: %s [--graph FILE.dot]\n", argv[0]);
      return 2;
    }
  }
  manual_seed(7);

  const std::string text = "aditi likes warm dosa ";
  std::set<char> charset(text.begin(), text.end());
  std::string chars(charset.begin(), charset.end());  // sorted(set(text))
  std::map<char, int64_t> stoi;
  for (size_t i = 0; i < chars.size(); ++i) stoi[chars[i]] = int64_t(i);
  std::vector<int64_t> ids;
  for (char c : text) ids.push_back(stoi[c]);
  Tensor data = from_vector(ids, {int64_t(ids.size())});
  const int64_t V = int64_t(chars.size()), D = 24, T = 8;  // vocab, embed dim, context length

  nn::MiniSelfAttention model({.vocab = V, .dim = D, .context = T});
  optim::Adam opt(model.parameters(), {.lr = 0.01});

  auto batch = [&] {
    Tensor i = randint(0, data.size(0) - T - 1, {16});
    std::vector<Tensor> xs, ys;
    for (int64_t j : i.to_vector<int64_t>()) {
      xs.push_back(data.slice(0, j, j + T));
      ys.push_back(data.slice(0, j + 1, j + T + 1));
    }
    return std::pair{stack(xs), stack(ys)};
  };

  for (int step = 0; step < 301; ++step) {
    auto [xb, yb] = batch();
    Tensor logits = model(xb);
    CallSite line("loss = F.cross_entropy(logits.view(-1, V), yb.view(-1))");
    Tensor loss = cross_entropy(logits.view({-1, V}), yb.view({-1}));
    if (step == 0 && !graph_file.empty()) {
      write_text_file(graph_file, to_dot(loss, model.named_parameters(), {.title = "mini_self_attention: step 0"}));
      std::fprintf(stderr, "wrote the graph of step 0's loss to %s\n", graph_file.c_str());
    }
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (step % 100 == 0) std::printf("step %3d | loss %.3f\n", step, loss.item());
  }

  // Greedy generation from a seed
  NoGradGuard no_grad;  // (the Python keeps recording here; the numbers are the same)
  std::vector<int64_t> prompt;
  for (char c : std::string("aditi li")) prompt.push_back(stoi[c]);
  Tensor idx = from_vector(prompt, {1, int64_t(prompt.size())});
  for (int n = 0; n < 14; ++n) {
    Tensor logits = model(idx.slice(1, -T, std::nullopt));
    Tensor nxt = logits.select(1, -1).argmax(-1, /*keepdim=*/true);
    idx = cat({idx, nxt}, 1);
  }
  std::string generated;
  for (int64_t i : idx[0].to_vector<int64_t>()) generated += chars[size_t(i)];
  std::printf("generated: %s\n", generated.c_str());
}
