#!/usr/bin/python3
"""PyTorch twin of bench/char_model.cpp: milliseconds per training step of the workshop's character model.

Same model as nn/char_model.cpp (the workshop's MiniSelfAttention, generalised to several heads the same
way), same seed, same batches, Adam lr 0.01, the same flags and the same last line:

    /usr/bin/python3 bench/torch/char_model.py [--dim 24] [--context 8] [--batch 16] [--heads 1]
        [--threads 1] [--steps 300] [--warmup 20] [--device cpu|cuda]
    ...
    ms_per_step=<median> ms_mean=<mean> rss_mb=<peak RSS of the process> rss_base_mb=<RSS before the model>

zero_grad(set_to_none=True) does what scratchgrad's zero_grad does (PyTorch 2's default; 1.13 zeroes in place).
"""
import argparse
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class MiniSelfAttention(nn.Module):
    def __init__(self, V, D, T, H):
        super().__init__()
        self.D, self.H = D, H
        self.tok = nn.Embedding(V, D)
        self.pos = nn.Embedding(T, D)
        self.q = nn.Linear(D, D); self.k = nn.Linear(D, D); self.v = nn.Linear(D, D)
        self.head = nn.Linear(D, V)
        self.register_buffer("mask", torch.tril(torch.ones(T, T)))

    def forward(self, idx):
        B, t = idx.shape
        D, H = self.D, self.H
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        blocked = self.mask[:t, :t] == 0
        if H == 1:  # the workshop's forward, verbatim
            att = (self.q(x) @ self.k(x).transpose(-2, -1)) / (D ** 0.5)
            att = att.masked_fill(blocked, float("-inf"))
            x = F.softmax(att, dim=-1) @ self.v(x)
            return self.head(x)
        hd = D // H  # several heads: [B, t, D] -> [B, H, t, D/H], attend per head, stitch back

        def split(y):
            return y.view(B, t, H, hd).transpose(1, 2)

        att = (split(self.q(x)) @ split(self.k(x)).transpose(-2, -1)) / (hd ** 0.5)
        att = att.masked_fill(blocked, float("-inf"))
        ctx = (F.softmax(att, dim=-1) @ split(self.v(x))).transpose(1, 2).contiguous().view(B, t, D)
        return self.head(ctx)


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux reports kilobytes


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dim", type=int, default=24)
    p.add_argument("--context", type=int, default=8)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--heads", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    o = p.parse_args()
    for name in ("dim", "context", "batch", "heads", "threads", "steps"):
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

    # the workshop's text, repeated until it holds at least two training windows (the seed size keeps it as is)
    T, B = o.context, o.batch
    text = phrase = "aditi likes warm dosa "
    while len(text) < 2 * (T + 1):
        text += phrase
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text])
    V = len(chars)

    torch.manual_seed(7)
    model = MiniSelfAttention(V, o.dim, T, o.heads).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def batch():
        i = torch.randint(0, len(data) - T - 1, (B,))
        xb = torch.stack([data[j:j + T] for j in i])
        yb = torch.stack([data[j + 1:j + T + 1] for j in i])
        return xb.to(device), yb.to(device)

    n_params = sum(q.numel() for q in model.parameters())
    print(f"pytorch {torch.__version__} char model: V {V} D {o.dim} T {T} B {B} heads {o.heads}, {n_params} parameters, "
          f"{torch.get_num_threads()} thread(s), device {device}")

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
