#!/usr/bin/python3
"""PyTorch twin of bench/gpt2_train.cpp: one GPT-2 124M training step at B 4, T 64 with the real 50,257-token
head (tied to wte), full or LoRA, float32 on the CPU (--precision bf16: the forward pass and the loss inside
torch.autocast("cpu", dtype=torch.bfloat16), as bench_gpt2_train --precision bf16 runs under AutocastGuard). Random weights (N(0, 0.02)), made here; nothing is
downloaded. The model is written from the architecture (as bench/torch/gpt2_generate.py's).

  /usr/bin/python3 bench/torch/gpt2_train.py [--mode full|lora] [--threads 1] [--steps 5] [--warmup 2]
                                             [--peak-gflops G] [--precision fp32|bf16]

The step: forward, cross_entropy, zero_grad, backward, clip_grad_norm_(1.0), AdamW (lr 3e-4, betas 0.9/0.95,
weight decay 0.1 on the 2-D weights; lora: rank 8, alpha 16 on c_attn, c_proj, c_fc, mlp.c_proj, AdamW on the
adapters alone). MFU uses nn/flops.h's count (6 FLOPs a token per trained parameter, 4 per frozen one, the
head's V*D included, the embedding lookups not; plus 12*L*D*T) over --peak-gflops (one core's peak as
bench_gpt2_train prints it) times the threads. The last line matches the C++ one's names:
  RESULT mode=<m> threads=<n> ms_per_step=<median> mfu=<fraction> cpu_ms_per_step=<median CPU time>
         cpu_mfu=<MFU over the CPU time> gflop_per_step=<model FLOPs> rss_mb=<peak RSS> loss=<first step's>
"""
import argparse
import math
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

V, CTX, D, H = 50257, 1024, 768, 12


class LoRALinear(nn.Module):
    """y = x W^T + b + (alpha / r) x A^T B^T, W and b frozen (the LoRA paper's B·A, A random, B zero)."""

    def __init__(self, base, rank, alpha):
        super().__init__()
        self.base = base
        for p in base.parameters():
            p.requires_grad_(False)
        self.A = nn.Parameter(torch.empty(rank, base.in_features))
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))
        self.B = nn.Parameter(torch.zeros(base.out_features, rank))
        self.scale = alpha / rank

    def forward(self, x):
        return self.base(x) + F.linear(F.linear(x, self.A), self.B) * self.scale


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.c_attn, self.c_proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.c_fc, self.mlp_proj = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(D, dim=-1)
        q, k, v = (z.view(b, t, H, D // H).transpose(1, 2) for z in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(D // H)
        scores = scores.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
        a = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, t, D)
        x = x + self.c_proj(a)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, D), nn.Embedding(CTX, D)
        self.h = nn.ModuleList(Block() for _ in range(layers))
        self.ln_f = nn.LayerNorm(D)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for block in self.h:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()  # the head tied to wte


def flops_per_token(model, T, layers):
    total = 0
    for name, p in model.named_parameters():
        if name.startswith("wpe."):
            continue  # a lookup (wte's matrix is the head's product)
        total += (6 if p.requires_grad else 4) * p.numel()
    return total + 12 * layers * D * T


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["full", "lora"], default="full")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--peak-gflops", type=float, default=0.0)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(124)
    model = GPT2(a.layers)
    with torch.no_grad():
        for prm in model.parameters():
            if prm.dim() == 2:
                prm.normal_(0.0, 0.02)
    if a.mode == "full":
        decay = [q for q in model.parameters() if q.dim() == 2]
        no_decay = [q for q in model.parameters() if q.dim() != 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    else:
        for prm in model.parameters():
            prm.requires_grad_(False)
        for block in model.h:
            for name in ("c_attn", "c_proj", "c_fc", "mlp_proj"):
                setattr(block, name, LoRALinear(getattr(block, name), 8, 16))
        opt = torch.optim.AdamW([q for q in model.parameters() if q.requires_grad], lr=3e-4, betas=(0.9, 0.95),
                                eps=1e-8, weight_decay=0.0)
    trained = [q for q in model.parameters() if q.requires_grad]
    B, T = a.batch, a.context
    ids = torch.randint(0, V, (B, T + 1), generator=torch.Generator().manual_seed(1))
    x, y = ids[:, :T].contiguous(), ids[:, 1:].contiguous()
    flops = flops_per_token(model, T, a.layers) * B * T
    ms, cpu, first_loss = [], [], None
    for step in range(a.warmup + a.steps):
        start, cpu_start = time.perf_counter(), time.process_time()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = F.cross_entropy(model(x).view(-1, V), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trained, 1.0)
        opt.step()
        if first_loss is None:
            first_loss = loss.item()
        if step >= a.warmup:
            ms.append((time.perf_counter() - start) * 1e3)
            cpu.append((time.process_time() - cpu_start) * 1e3)
    med, cmed = statistics.median(ms), statistics.median(cpu)
    peak = a.peak_gflops * 1e9
    mfu = flops / (med / 1e3) / (peak * a.threads) if peak else 0.0
    cpu_mfu = flops / (cmed / 1e3) / peak if peak else 0.0
    print(f"torch {torch.__version__}: {a.mode}, {a.precision}, {a.threads} thread(s): median {med:.1f} ms a step "
          f"(CPU time {cmed:.1f} ms); MFU {100 * mfu:.1f}%")
    print(f"RESULT mode={a.mode} precision={a.precision} threads={a.threads} ms_per_step={med:.1f} mfu={mfu:.3f} cpu_ms_per_step={cmed:.1f} "
          f"cpu_mfu={cpu_mfu:.3f} gflop_per_step={flops / 1e9:.2f} "
          f"rss_mb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} loss={first_loss:.4f}")


if __name__ == "__main__":
    main()
