#!/usr/bin/python3
"""PyTorch twin of bench/gpt.cpp: milliseconds per training step of the book's GPT.

The same GPT (the chapter-4 classes of tests/reference/make_gpt_fixtures.py, as bench/torch/gpt_train.py
uses them), the same text (the workshop's, its 13 characters), torch.manual_seed(7) before the model (so
the initial weights are scratchgrad's), the same batches (randint windows, as nn::random_windows draws
them), AdamW lr 3e-3 (betas 0.9/0.95, eps 1e-8) with weight decay 0.1 on the Linear weights only,
clip_grad_norm_ 1.0, dropout 0, the same flags and the same last line:

    /usr/bin/python3 bench/torch/gpt.py [--layers 3] [--dim 96] [--heads 4] [--context 64] [--batch 16]
        [--threads 1] [--steps 50] [--warmup 5] [--device cpu|cuda]
    ...
    ms_per_step=<median> ms_mean=<mean> rss_mb=<peak RSS of the process> rss_base_mb=<RSS before the model>

zero_grad(set_to_none=True) does what scratchgrad's zero_grad does (PyTorch 2's default; 1.13 zeroes in place).
"""
import argparse
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "reference"))
import make_gpt_fixtures as ref  # noqa: E402  (the book's classes; importing runs nothing)


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux reports kilobytes


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag, default in [("--layers", 3), ("--dim", 96), ("--heads", 4), ("--context", 64), ("--batch", 16),
                          ("--threads", 1), ("--steps", 50), ("--warmup", 5)]:
        p.add_argument(flag, type=int, default=default)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    o = p.parse_args()
    for name in ("layers", "dim", "heads", "context", "batch", "threads", "steps"):
        if getattr(o, name) < 1:
            p.error(f"--{name} needs an integer >= 1")
    if o.warmup < 0 or o.dim % o.heads != 0:
        p.error("--warmup must be >= 0 and --heads must divide --dim")
    if o.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: this PyTorch has no usable CUDA")

    torch.set_flush_denormal(True)
    torch.set_num_threads(o.threads)
    device = torch.device(o.device)
    rss_base = peak_rss_mb()

    # the workshop's text, repeated until it holds at least two training windows (bench/common.h)
    T, B = o.context, o.batch
    text = phrase = "aditi likes warm dosa "
    while len(text) < 2 * (T + 1):
        text += phrase
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text])
    V = len(chars)

    torch.manual_seed(7)
    cfg = {"vocab_size": V, "context_length": T, "emb_dim": o.dim, "n_heads": o.heads, "n_layers": o.layers,
           "drop_rate": 0.0, "qkv_bias": False}
    model = ref.GPTModel(cfg).to(device)
    decay, no_decay = ref.param_groups(model)
    opt = torch.optim.AdamW([{"params": [q for _, q in decay], "weight_decay": 0.1},
                             {"params": [q for _, q in no_decay], "weight_decay": 0.0}],
                            lr=3e-3, betas=(0.9, 0.95), eps=1e-8)

    def batch():  # nn::random_windows: B random windows of T tokens, the targets one later
        i = torch.randint(0, len(data) - T - 1, (B,))
        xb = torch.stack([data[j:j + T] for j in i])
        yb = torch.stack([data[j + 1:j + T + 1] for j in i])
        return xb.to(device), yb.to(device)

    n_params = sum(q.numel() for q in model.parameters())
    print(f"pytorch {torch.__version__} gpt: V {V} layers {o.layers} D {o.dim} T {T} B {B} heads {o.heads}, "
          f"{n_params} parameters, {torch.get_num_threads()} thread(s), device {device}")

    ms = []
    first_loss = last_loss = 0.0
    total = o.warmup + o.steps
    for step in range(total):
        start = time.perf_counter()
        xb, yb = batch()
        logits = model(xb)
        loss = F.cross_entropy(logits.view(-1, V), yb.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        stop = time.perf_counter()
        if step >= o.warmup:
            ms.append((stop - start) * 1e3)
        if step == 0:
            first_loss = loss.item()
        if step == total - 1:
            last_loss = loss.item()

    median, mean = statistics.median(ms), statistics.fmean(ms)
    print(f"loss: step 0 {first_loss:.4f}, step {total - 1} {last_loss:.4f}")
    print(f"{len(ms)} timed steps after {o.warmup} warm-up: median {median:.4f} ms, mean {mean:.4f} ms, "
          f"min {min(ms):.4f} ms, max {max(ms):.4f} ms")
    print(f"ms_per_step={median:.4f} ms_mean={mean:.4f} rss_mb={peak_rss_mb():.1f} rss_base_mb={rss_base:.1f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
