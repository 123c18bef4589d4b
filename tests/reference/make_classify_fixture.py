#!/usr/bin/python3
"""Writes tests/reference/fixtures/classify/classifier.txt: the classifier of chapter 6 of "Build a Large
Language Model (From Scratch)" on a tiny GPT, computed by PyTorch in float64, for tests/test_classify.cpp.

    /usr/bin/python3 tests/reference/make_classify_fixture.py

The book's recipe: the GPT's out_head replaced by nn.Linear(emb_dim, classes); every parameter frozen but
the last transformer block, the final norm and the new head; the logits of each example read at its last
real token (a padded batch: the book reads the batch's last column, which for a padded row is padding; the
engine reads row b at position last[b]); cross-entropy over the batch; one AdamW step (the Linear weights
decayed, the norms and biases not, as the engine's classifier_optimizer groups them).

The model is drawn in float32 (torch.manual_seed(7)) and written as float32 (hex floats, exact); then it runs
in float64, so the expected logits, loss, gradients and parameters after the step are float64 (the engine's
float32 results are compared with a tolerance). PyTorch is a reference only: the build never needs it.

Lines: `tensor NAME NDIM D0 .. V0 ..` (values as float.hex) or `itensor NAME NDIM D0 .. V0 ..`; names:
  model.<name>        the GPT's parameters (book names; no out_head: it is replaced)
  head.weight/bias    the new head's initial values
  ids, last, labels   the batch: three examples padded with 0, each one's last real position, its class
  logits, loss        the classifier's output
  grad.<name>         the gradient of each parameter that trains (model.trf_blocks.1.*, model.final_norm.*,
                      head.*); the others have none (checked here)
  after.<name>        each trained parameter after one AdamW step
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_gpt_fixtures import GPTModel  # noqa: E402  the book's GPT, re-implemented there

OUT = os.path.join(HERE, "fixtures", "classify", "classifier.txt")
CONFIG = {"vocab_size": 11, "context_length": 8, "emb_dim": 8, "n_heads": 2, "n_layers": 2, "drop_rate": 0.0,
          "qkv_bias": False}
CLASSES = 3
IDS = [[1, 2, 3, 4, 0, 0], [5, 6, 7, 8, 9, 10], [3, 3, 0, 0, 0, 0]]
LAST = [3, 5, 1]
LABELS = [2, 0, 1]
LR, BETAS, EPS, WEIGHT_DECAY = 1e-3, (0.9, 0.95), 1e-8, 0.1


def line(name, t):
    t = t.detach()
    if t.dtype.is_floating_point:
        values = " ".join(float.hex(float(v)) for v in t.reshape(-1).tolist())
        kind = "tensor"
    else:
        values = " ".join(str(int(v)) for v in t.reshape(-1).tolist())
        kind = "itensor"
    return " ".join([kind, name, str(t.dim())] + [str(d) for d in t.shape] + [values])


def main():
    torch.manual_seed(7)
    model = GPTModel(CONFIG)
    model.out_head = nn.Linear(CONFIG["emb_dim"], CLASSES)  # drawn after the model, as the engine draws it
    out = ["# scratchgrad fixture: the book's classifier (chapter 6) on a tiny GPT, torch " + torch.__version__ +
           ", float64 from float32 weights. Written by make_classify_fixture.py; do not edit."]
    for name, p in model.named_parameters():
        out.append(line(name.replace("out_head.", "head.") if name.startswith("out_head.") else "model." + name, p))
    model = model.double()
    for p in model.parameters():
        p.requires_grad = False
    for module in (model.trf_blocks[-1], model.final_norm, model.out_head):
        for p in module.parameters():
            p.requires_grad = True

    ids, last, labels = torch.tensor(IDS), torch.tensor(LAST), torch.tensor(LABELS)
    logits = model(ids)[torch.arange(len(IDS)), last]  # each example's last real token
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    out += [line("ids", ids), line("last", last), line("labels", labels), line("logits", logits),
            line("loss", loss)]

    def shown(name):
        return name.replace("out_head.", "head.") if name.startswith("out_head.") else "model." + name

    linear_weights = {id(m.weight) for m in model.modules() if isinstance(m, nn.Linear)}
    decay, plain = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            out.append(line("grad." + shown(name), p.grad))
            (decay if id(p) in linear_weights else plain).append(p)
        else:
            assert p.grad is None, name
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": plain, "weight_decay": 0.0}],
                            lr=LR, betas=BETAS, eps=EPS)
    opt.step()
    for name, p in model.named_parameters():
        if p.requires_grad:
            out.append(line("after." + shown(name), p))
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
