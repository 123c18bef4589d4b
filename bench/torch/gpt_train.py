#!/usr/bin/python3
"""bench/torch/gpt_train.py — the PyTorch twin of `scratchgrad train --model gpt` for bench/gpt_quality.sh.

The same GPT (the book's chapter-4 classes from tests/reference/make_gpt_fixtures.py), the same recipe:
AdamW (betas 0.9/0.95, eps 1e-8) with weight decay on the Linear weights only, linear warm-up then cosine
decay to 10% (LambdaLR), clipping of the global gradient norm, random windows of the training text, and
the held-out loss measured as the trainer measures it: the mean over up to 64 evenly spaced windows of
the last 10% of the text. Prints `final_loss=<x> held_out=<y> seconds=<s> steps_per_s=<r>`.
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "reference"))
import make_gpt_fixtures as ref  # noqa: E402  (the book's classes; importing runs nothing)

p = argparse.ArgumentParser()
p.add_argument("--text", required=True)
for flag, default in [("--layers", 3), ("--dim", 96), ("--heads", 4), ("--context", 64), ("--batch", 16),
                      ("--steps", 3000), ("--warmup", 100), ("--seed", 7), ("--threads", 1)]:
    p.add_argument(flag, type=int, default=default)
for flag, default in [("--lr", 3e-3), ("--weight-decay", 0.1), ("--clip", 1.0), ("--dropout", 0.0)]:
    p.add_argument(flag, type=float, default=default)
o = p.parse_args()
torch.set_num_threads(o.threads)
torch.set_flush_denormal(True)

text = open(o.text, encoding="utf-8").read()
chars = sorted(set(text))
index = {c: i for i, c in enumerate(chars)}
ids = torch.tensor([index[c] for c in text], dtype=torch.int64)
held = len(ids) // 10
train, val = ids[:len(ids) - held], ids[len(ids) - held:]
T = o.context

torch.manual_seed(o.seed)
cfg = {"vocab_size": len(chars), "context_length": T, "emb_dim": o.dim, "n_heads": o.heads, "n_layers": o.layers,
       "drop_rate": o.dropout, "qkv_bias": False}
model = ref.GPTModel(cfg)
decay, no_decay = ref.param_groups(model)
opt = torch.optim.AdamW([{"params": [q for _, q in decay], "weight_decay": o.weight_decay},
                         {"params": [q for _, q in no_decay], "weight_decay": 0.0}],
                        lr=o.lr, betas=(0.9, 0.95), eps=1e-8)
span = o.steps - o.warmup
sched = torch.optim.lr_scheduler.LambdaLR(
    opt, lambda k: (k + 1) / o.warmup if k < o.warmup else 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (k - o.warmup) / span)))


def held_out_loss():
    model.eval()
    with torch.no_grad():
        windows = min(64, len(val) - T)
        starts = [w * (len(val) - T - 1) // max(windows - 1, 1) for w in range(windows)]
        xs = torch.stack([val[j:j + T] for j in starts])
        ys = torch.stack([val[j + 1:j + T + 1] for j in starts])
        loss = F.cross_entropy(model(xs).flatten(0, 1), ys.flatten()).item()
    model.train()
    return loss


start = time.perf_counter()
last = 0.0
for step in range(o.steps):
    i = torch.randint(0, len(train) - T, (o.batch,))
    xb = torch.stack([train[j:j + T] for j in i])
    yb = torch.stack([train[j + 1:j + T + 1] for j in i])
    loss = F.cross_entropy(model(xb).flatten(0, 1), yb.flatten())
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if o.clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), o.clip)
    opt.step()
    sched.step()
    last = loss.item()
seconds = time.perf_counter() - start
print(f"final_loss={last:.4f} held_out={held_out_loss():.4f} seconds={seconds:.1f} steps_per_s={o.steps / seconds:.2f}")
