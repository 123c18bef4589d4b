#!/usr/bin/python3
"""PyTorch twin of bench/gpt2_generate.cpp: GPT-2 at the 124M shape with a key/value cache, greedy, in
float32 on the CPU. Random weights (N(0, 0.02)), made here; nothing is downloaded.

  /usr/bin/python3 bench/torch/gpt2_generate.py [--prompt 16] [--tokens 64] [--threads 1] [--layers 12]

The last line matches the C++ one's names:
  RESULT tokens_per_s=<cached steps/s> ms_per_token=<median step> prefill_ms=<ms> threads=<n> rss_mb=<peak RSS>
         cpu_ms_per_token=<median step in the process's CPU time, all threads>
"""
import argparse
import math
import resource
import statistics
import time

import torch
import torch.nn.functional as F

V, T, D, H = 50257, 1024, 768, 12


def make_weights(layers):
    g = torch.Generator().manual_seed(124)
    def randn(*shape):
        return torch.randn(*shape, generator=g) * 0.02
    w = {"wte": randn(V, D), "wpe": randn(T, D), "ln_f": (torch.ones(D), torch.zeros(D)), "h": []}
    for _ in range(layers):
        w["h"].append({
            "ln_1": (torch.ones(D), torch.zeros(D)), "ln_2": (torch.ones(D), torch.zeros(D)),
            "c_attn": (randn(3 * D, D), torch.zeros(3 * D)), "c_proj": (randn(D, D), torch.zeros(D)),
            "c_fc": (randn(4 * D, D), torch.zeros(4 * D)), "mlp_proj": (randn(D, 4 * D), torch.zeros(D)),
        })
    return w


def forward_cached(w, ids, cache, past):
    """ids [1, t] at positions past..past+t-1; cache[i] = (keys, values) [1, H, T, D/H]; returns the last logits."""
    t = ids.shape[1]
    hd = D // H
    x = w["wte"][ids] + w["wpe"][past:past + t]
    for i, blk in enumerate(w["h"]):
        h = F.layer_norm(x, (D,), *blk["ln_1"])
        q, k, v = F.linear(h, *blk["c_attn"]).split(D, dim=-1)
        q, k, v = (z.view(1, t, H, hd).transpose(1, 2) for z in (q, k, v))
        keys, values = cache[i]
        keys[:, :, past:past + t] = k
        values[:, :, past:past + t] = v
        scores = q @ keys[:, :, :past + t].transpose(-2, -1) / math.sqrt(hd)
        if t > 1:
            future = torch.triu(torch.ones(t, past + t, dtype=torch.bool), diagonal=past + 1)
            scores = scores.masked_fill(future, float("-inf"))
        a = (torch.softmax(scores, dim=-1) @ values[:, :, :past + t]).transpose(1, 2).reshape(1, t, D)
        x = x + F.linear(a, *blk["c_proj"])
        h = F.layer_norm(x, (D,), *blk["ln_2"])
        x = x + F.linear(F.gelu(F.linear(h, *blk["c_fc"]), approximate="tanh"), *blk["mlp_proj"])
    x = F.layer_norm(x[:, -1:], (D,), *w["ln_f"])
    return (x @ w["wte"].t())[0, -1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--prompt", type=int, default=16)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--layers", type=int, default=12)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    w = make_weights(a.layers)
    cache = [(torch.zeros(1, H, T, D // H), torch.zeros(1, H, T, D // H)) for _ in range(a.layers)]
    ids = torch.tensor([[(i * 7919) % V for i in range(a.prompt)]])
    step_ms, step_cpu_ms = [], []  # wall time, and the process's CPU time (all threads: the machine may be shared)
    with torch.no_grad():
        start = last = time.perf_counter()
        last_cpu = time.process_time()
        past = 0
        for n in range(a.tokens):
            logits = forward_cached(w, ids, cache, past)
            past += ids.shape[1]
            ids = logits.argmax().view(1, 1)
            now = time.perf_counter()
            step_ms.append((now - last) * 1e3)
            step_cpu_ms.append((time.process_time() - last_cpu) * 1e3)
            last, last_cpu = now, time.process_time()
        total_ms = (time.perf_counter() - start) * 1e3
    prefill = step_ms.pop(0)
    step_cpu_ms.pop(0)
    tokens_per_s = len(step_ms) / ((total_ms - prefill) / 1e3)
    print(f"torch {torch.__version__}: prefill {prefill:.1f} ms, then median {statistics.median(step_ms):.2f} ms a token")
    print(f"RESULT tokens_per_s={tokens_per_s:.2f} ms_per_token={statistics.median(step_ms):.2f} prefill_ms={prefill:.1f} "
          f"threads={a.threads} rss_mb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} "
          f"cpu_ms_per_token={statistics.median(step_cpu_ms):.2f}")


if __name__ == "__main__":
    main()
