#!/usr/bin/python3
"""PyTorch twin of bench/llama.cpp: a Llama-family model at SmolLM2-135M's shape (30 blocks of width 576,
9 query heads and 3 key/value heads of 64, SwiGLU feed-forward of 1536, 49,152 tokens, head tied to the
embedding, RoPE with theta 100,000), in float32 on the CPU. Random weights (N(0, 0.02), norms 1), made
here; nothing is downloaded. The blocks are written from their description (no transformers package):
RMSNorm, rotary embeddings in Hugging Face's rotate_half convention, grouped-query attention, SwiGLU.

  /usr/bin/python3 bench/torch/llama.py generate [--prompt 16] [--tokens 64] [--threads 1] [--layers 30]
  /usr/bin/python3 bench/torch/llama.py train [--batch 4] [--seq 64] [--steps 5] [--warmup 2] [--threads 1]
                                              [--layers 30] [--peak-gflops G]

generate: greedy, a prefill of --prompt ids then --tokens cached steps; the cache holds the 3 kv heads.
train: forward, cross_entropy, zero_grad, backward, clip_grad_norm_(1.0), AdamW (lr 3e-4, betas 0.9/0.95,
weight decay 0.1 on the 2-D weights). MFU: 6 FLOPs a token per parameter (the tied head counted once, as
the product it is) plus the attention's 12·L·T·(heads·head_dim) a token over --peak-gflops times the threads.
The last line matches the C++ one's names:
  RESULT mode=generate tokens_per_s=<steps/s> ms_per_token=<median step> prefill_ms=<ms> threads=<n> rss_mb=<peak>
  RESULT mode=train threads=<n> ms_per_step=<median> mfu=<fraction> gflop_per_step=<FLOPs> rss_mb=<peak> loss=<first>
"""
import argparse
import math
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

V, D, HEADS, KV_HEADS, HEAD_DIM, FFN = 49152, 576, 9, 3, 64, 1536
THETA, EPS, CONTEXT = 100000.0, 1e-5, 8192


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS))


def rope_tables(start, count):
    inv_freq = 1.0 / (THETA ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.int64).float() / HEAD_DIM))
    freqs = torch.outer(torch.arange(start, start + count).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    x1, x2 = x[..., : HEAD_DIM // 2], x[..., HEAD_DIM // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rope(x, cos, sin):
    return x * cos + rotate_half(x) * sin


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(D), RMSNorm(D)
        self.q_proj = nn.Linear(D, HEADS * HEAD_DIM, bias=False)
        self.k_proj = nn.Linear(D, KV_HEADS * HEAD_DIM, bias=False)
        self.v_proj = nn.Linear(D, KV_HEADS * HEAD_DIM, bias=False)
        self.o_proj = nn.Linear(HEADS * HEAD_DIM, D, bias=False)
        self.gate_proj = nn.Linear(D, FFN, bias=False)
        self.up_proj = nn.Linear(D, FFN, bias=False)
        self.down_proj = nn.Linear(FFN, D, bias=False)

    def attention(self, h, cos, sin, cache=None, past=0):
        b, t, _ = h.shape
        q = self.q_proj(h).view(b, t, HEADS, HEAD_DIM).transpose(1, 2)
        k = self.k_proj(h).view(b, t, KV_HEADS, HEAD_DIM).transpose(1, 2)
        v = self.v_proj(h).view(b, t, KV_HEADS, HEAD_DIM).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        if cache is not None:
            keys, values = cache
            keys[:, :, past:past + t] = k
            values[:, :, past:past + t] = v
            k, v = keys[:, :, :past + t], values[:, :, :past + t]
        group = HEADS // KV_HEADS  # query head i reads kv head i // group
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(HEAD_DIM)
        if t > 1:
            future = torch.triu(torch.ones(t, past + t, dtype=torch.bool), diagonal=past + 1)
            scores = scores.masked_fill(future, float("-inf"))
        a = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, t, HEADS * HEAD_DIM)
        return self.o_proj(a)

    def forward(self, x, cos, sin, cache=None, past=0):
        x = x + self.attention(self.input_layernorm(x), cos, sin, cache, past)
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.embed_tokens = nn.Embedding(V, D)
        self.layers = nn.ModuleList(Block() for _ in range(layers))
        self.norm = RMSNorm(D)
        g = torch.Generator().manual_seed(135)
        with torch.no_grad():
            for p in self.parameters():
                if p.dim() == 2:
                    p.copy_(torch.randn(p.shape, generator=g) * 0.02)

    def forward(self, ids, cache=None, past=0):
        cos, sin = rope_tables(past, ids.shape[1])
        x = self.embed_tokens(ids)
        for i, block in enumerate(self.layers):
            x = block(x, cos, sin, None if cache is None else cache[i], past)
        if cache is not None:
            x = x[:, -1:]
        return self.norm(x) @ self.embed_tokens.weight.t()  # the tied head


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def generate(a, model):
    cache = [(torch.zeros(1, KV_HEADS, a.prompt + a.tokens, HEAD_DIM),
              torch.zeros(1, KV_HEADS, a.prompt + a.tokens, HEAD_DIM)) for _ in model.layers]
    ids = torch.tensor([[(i * 7919) % V for i in range(a.prompt)]])
    step_ms = []
    with torch.no_grad():
        start = time.perf_counter()
        past = 0
        for n in range(a.tokens):
            t0 = time.perf_counter()
            logits = model(ids, cache, past)[0, -1]
            past += ids.shape[1]
            ids = logits.argmax().view(1, 1)
            ms = (time.perf_counter() - t0) * 1e3
            if n == 0:
                prefill_ms = ms
            else:
                step_ms.append(ms)
        total = time.perf_counter() - start
    print(f"generated {a.tokens} tokens in {total * 1e3:.1f} ms (prefill {prefill_ms:.1f} ms)")
    median = statistics.median(step_ms)
    print(f"RESULT mode=generate tokens_per_s={1e3 / median:.2f} ms_per_token={median:.2f} "
          f"prefill_ms={prefill_ms:.1f} threads={a.threads} rss_mb={peak_rss_mb():.0f}")


def train(a, model):
    decay = [p for p in model.parameters() if p.dim() == 2]
    other = [p for p in model.parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(7)
    x = torch.randint(0, V, (a.batch, a.seq), generator=g)
    y = torch.randint(0, V, (a.batch, a.seq), generator=g)
    params = sum(p.numel() for p in model.parameters())
    flops = 6 * params * a.batch * a.seq + 12 * len(model.layers) * a.batch * a.seq * a.seq * HEADS * HEAD_DIM
    times, first_loss = [], None
    for step in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(x).view(-1, V), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        ms = (time.perf_counter() - t0) * 1e3
        if first_loss is None:
            first_loss = loss.item()
        if step >= a.warmup:
            times.append(ms)
    median = statistics.median(times)
    mfu = flops / (median / 1e3) / (a.peak_gflops * 1e9 * a.threads) if a.peak_gflops > 0 else 0.0
    print(f"{params / 1e6:.1f}M parameters, {flops / 1e9:.1f} GFLOP a step, median {median:.1f} ms")
    print(f"RESULT mode=train threads={a.threads} ms_per_step={median:.1f} mfu={mfu:.3f} "
          f"gflop_per_step={flops / 1e9:.2f} rss_mb={peak_rss_mb():.0f} loss={first_loss:.4f}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["generate", "train"])
    p.add_argument("--prompt", type=int, default=16)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--layers", type=int, default=30)
    p.add_argument("--peak-gflops", type=float, default=0.0)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    model = Llama(a.layers)
    if a.mode == "generate":
        model.eval()
        generate(a, model)
    else:
        train(a, model)


if __name__ == "__main__":
    main()
