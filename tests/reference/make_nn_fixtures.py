#!/usr/bin/python3
"""Write the nn fixtures under tests/reference/fixtures/nn/.

  random.txt                  raw generator draws after torch.manual_seed(s)
  init.txt                    parameters of freshly built nn modules after manual_seed(s)
  state_dict_keys.txt         state_dict key order (with param/buffer kind and shape)
  multihead_attention.txt     nn.MultiheadAttention(8, 2, batch_first=True): weights and
                              outputs, fresh after manual_seed(1) and as in multi_head.py
  mini_self_attention.txt     mini_self_attention.py: initial parameters, the first batch,
                              step-0 logits/grads, every step's batch and loss (0..300)

Run with the Debian PyTorch:  /usr/bin/python3 tests/reference/make_nn_fixtures.py
The script re-runs itself once per torch CPU kernel family (as make_random_fixtures.py does):
  ATEN_CPU_CAPABILITY=default -> fixtures/nn/default/  (portable scalar kernels, no fused multiply-add)
  ATEN_CPU_CAPABILITY=avx2    -> fixtures/nn/avx2/     (what a plain `python3` run uses on AVX2 machines)
state_dict_keys.txt does not depend on the kernels and is written once, to fixtures/nn/.
The format is described in fixtures/nn/README.md.
"""
import os
import subprocess
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_ROOT = os.path.join(HERE, "fixtures", "nn")
OUT = OUT_ROOT          # set per capability by generate()
CAPABILITIES = ("default", "avx2")
SEEDS = (0, 7, 123)


# --------------------------------------------------------------------------- format
def tensor_line(name, t):
    """`tensor NAME NDIM D0 D1 ... V0 V1 ...` (float values as float.hex of the float32) or
    `itensor NAME NDIM D0 ... V0 ...` (integer tensors, decimal values)."""
    t = t.detach()
    if t.dtype.is_floating_point:
        kind = "tensor"
        vals = [float.hex(float(v)) for v in t.reshape(-1).tolist()]
    else:
        kind = "itensor"
        vals = [str(int(v)) for v in t.reshape(-1).tolist()]
    return " ".join([kind, name, str(t.dim())] + [str(d) for d in t.shape] + vals)


def write(fname, lines):
    with open(os.path.join(OUT, fname), "w") as f:
        f.write("\n".join(lines) + "\n")


def header(fname, what):
    cap = os.environ.get("ATEN_CPU_CAPABILITY", "any")
    return [f"# scratchgrad nn fixture {fname}: torch {torch.__version__}, float32, "
            f"ATEN_CPU_CAPABILITY={cap}. Written by make_nn_fixtures.py; do not edit.",
            f"# {what}"]


# --------------------------------------------------------------------------- models
# MiniSelfAttention from the workshop (mini_self_attention.py), with its globals.
text = "aditi likes warm dosa "
chars = sorted(set(text))
stoi = {c: i for i, c in enumerate(chars)}
itos = {i: c for c, i in stoi.items()}
data = torch.tensor([stoi[c] for c in text])
V, D, T = len(chars), 24, 8   # vocab, embed dim, context length


class MiniSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, D)
        self.pos = nn.Embedding(T, D)
        self.q = nn.Linear(D, D); self.k = nn.Linear(D, D); self.v = nn.Linear(D, D)
        self.head = nn.Linear(D, V)
        self.register_buffer("mask", torch.tril(torch.ones(T, T)))

    def forward(self, idx):
        B, t = idx.shape
        x = self.tok(idx) + self.pos(torch.arange(t))
        att = (self.q(x) @ self.k(x).transpose(-2, -1)) / (D ** 0.5)
        att = att.masked_fill(self.mask[:t, :t] == 0, float("-inf"))
        x = F.softmax(att, dim=-1) @ self.v(x)
        return self.head(x)


# The workshop's MultiHeadAttention (multi_head.py).
class WorkshopMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        assert d_model % num_heads == 0
        self.h = num_heads
        self.d_k = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x, mask=None):
        B, T, D = x.shape
        q = self.W_q(x).view(B, T, self.h, self.d_k).transpose(1, 2)
        k = self.W_k(x).view(B, T, self.h, self.d_k).transpose(1, 2)
        v = self.W_v(x).view(B, T, self.h, self.d_k).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) / (self.d_k ** 0.5)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float("-inf"))
        attn = F.softmax(scores, dim=-1)
        ctx = (attn @ v).transpose(1, 2).contiguous().view(B, T, D)
        return self.W_o(ctx)


# Chapter 3 of "Build a Large Language Model (From Scratch)" (as in
# seed_programs/attention_from_scratch.py).
class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer(
            "mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        return attn_weights @ values


class MultiHeadAttentionWrapper(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
             for _ in range(num_heads)])

    def forward(self, x):
        return torch.cat([head(x) for head in self.heads], dim=-1)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer(
            "mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x).view(b, num_tokens, self.num_heads, self.head_dim)
        values = self.W_value(x).view(b, num_tokens, self.num_heads, self.head_dim)
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim)
        keys, queries, values = keys.transpose(1, 2), queries.transpose(1, 2), values.transpose(1, 2)
        attn_scores = queries @ keys.transpose(2, 3)
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context_vec = (attn_weights @ values).transpose(1, 2)
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)


# --------------------------------------------------------------------------- files
def make_random():
    lines = header("random.txt", "each case: torch.manual_seed(s), then the one call named")
    calls = [
        ("rand(8)", lambda: torch.rand(8)),
        ("rand(3,2)", lambda: torch.rand(3, 2)),
        ("randn(4)", lambda: torch.randn(4)),
        ("randn(15)", lambda: torch.randn(15)),
        ("randn(16)", lambda: torch.randn(16)),
        ("randn(17)", lambda: torch.randn(17)),
        ("randn(4,4)", lambda: torch.randn(4, 4)),
        ("randn(40)", lambda: torch.randn(40)),
        ("randint(0,13,(16,))", lambda: torch.randint(0, 13, (16,))),
        ("randint(0,13,(16,))x2", lambda: torch.cat([torch.randint(0, 13, (16,)),
                                                      torch.randint(0, 13, (16,))])),
        ("dropout(0.5,ones(6,6))", lambda: nn.Dropout(0.5)(torch.ones(6, 6))),
        ("bernoulli(full(10,0.3))", lambda: torch.bernoulli(torch.full((10,), 0.3))),
    ]
    for s in SEEDS + (1, 3):
        for name, fn in calls:
            torch.manual_seed(s)
            lines.append(f"case {s} {name}")
            lines.append(tensor_line("out", fn()))
    lines.append("end")
    write("random.txt", lines)


def init_cases():
    return [
        ("Linear(3,2)", lambda: nn.Linear(3, 2)),
        ("Linear(3,2,bias=False)", lambda: nn.Linear(3, 2, bias=False)),
        ("Linear(24,24)", lambda: nn.Linear(24, 24)),
        ("Linear(24,13)", lambda: nn.Linear(24, 13)),
        ("Linear(24,13,bias=False)", lambda: nn.Linear(24, 13, bias=False)),
        ("Linear(8,8)", lambda: nn.Linear(8, 8)),
        ("Embedding(13,24)", lambda: nn.Embedding(13, 24)),
        ("Embedding(8,24)", lambda: nn.Embedding(8, 24)),
        ("MiniSelfAttention()", lambda: MiniSelfAttention()),
        ("MultiHeadAttentionWrapper(3,2,6,0.0,2)", lambda: MultiHeadAttentionWrapper(3, 2, 6, 0.0, 2)),
        ("MultiHeadAttention(3,2,6,0.0,2)", lambda: MultiHeadAttention(3, 2, 6, 0.0, 2)),
        ("WorkshopMultiHeadAttention(8,2)", lambda: WorkshopMultiHeadAttention(8, 2)),
        ("nn.MultiheadAttention(8,2,batch_first=True)",
         lambda: nn.MultiheadAttention(8, 2, batch_first=True)),
    ]


def make_init():
    lines = header("init.txt", "each case: torch.manual_seed(s), build the module, "
                   "named_parameters() in order")
    for s in SEEDS + (1,):
        for name, fn in init_cases():
            if s == 1 and "attention" not in name.lower():
                continue
            torch.manual_seed(s)
            m = fn()
            lines.append(f"case {s} {name}")
            for pname, p in m.named_parameters():
                lines.append(tensor_line(pname, p))
    lines.append("end")
    write("init.txt", lines)


def make_keys():
    lines = header("state_dict_keys.txt", "per model: state_dict() keys in order: "
                   "key NAME param|buffer NDIM DIMS...")
    buffers_of = lambda m: {n for n, _ in m.named_buffers()}
    for name, fn in init_cases():
        if not any(w in name for w in ("Attention", "Linear(24,13)", "Embedding(13")):
            continue
        m = fn()
        bufs = buffers_of(m)
        sd = m.state_dict()
        lines.append(f"model {name} {len(sd)}")
        for k, t in sd.items():
            kind = "buffer" if k in bufs else "param"
            lines.append(" ".join(["key", k, kind, str(t.dim())] + [str(d) for d in t.shape]))
        lines.append(f"named_parameters {' '.join(n for n, _ in m.named_parameters())}")
    lines.append("end")
    write("state_dict_keys.txt", lines)


def make_mha():
    lines = header("multihead_attention.txt",
                   "nn.MultiheadAttention(8, 2, batch_first=True), fresh and as in multi_head.py")
    # (a) fresh: manual_seed(1) then nn.MultiheadAttention alone.
    torch.manual_seed(1)
    ref = nn.MultiheadAttention(8, 2, batch_first=True)
    lines.append("case fresh manual_seed(1); ref = nn.MultiheadAttention(8, 2, batch_first=True)")
    for k, t in ref.state_dict().items():
        lines.append(tensor_line(k, t))

    # (b) exactly multi_head.py's order: mine, ref, x.
    torch.manual_seed(1)
    mine = WorkshopMultiHeadAttention(8, 2)
    ref = nn.MultiheadAttention(8, 2, batch_first=True)
    lines.append("case multi_head.py manual_seed(1); mine = MultiHeadAttention(8, 2); "
                 "ref = nn.MultiheadAttention(8, 2, batch_first=True); x = randn(1, 5, 8)")
    for k, t in mine.state_dict().items():
        lines.append(tensor_line("mine_init." + k, t))
    for k, t in ref.state_dict().items():
        lines.append(tensor_line("ref." + k, t))
    wq, wk, wv = ref.in_proj_weight.chunk(3, dim=0)
    bq, bk, bv = ref.in_proj_bias.chunk(3, dim=0)
    with torch.no_grad():
        mine.W_q.weight.copy_(wq); mine.W_q.bias.copy_(bq)
        mine.W_k.weight.copy_(wk); mine.W_k.bias.copy_(bk)
        mine.W_v.weight.copy_(wv); mine.W_v.bias.copy_(bv)
        mine.W_o.weight.copy_(ref.out_proj.weight); mine.W_o.bias.copy_(ref.out_proj.bias)
    x = torch.randn(1, 5, 8)
    out_mine = mine(x)
    out_ref, attn_avg = ref(x, x, x)
    _, attn_heads = ref(x, x, x, average_attn_weights=False)
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
    out_causal, attn_causal = ref(x, x, x, attn_mask=causal)
    lines.append(tensor_line("x", x))
    lines.append(tensor_line("out_ref", out_ref))
    lines.append(tensor_line("attn_weights_avg", attn_avg))
    lines.append(tensor_line("attn_weights_per_head", attn_heads))
    lines.append(tensor_line("out_mine", out_mine))
    lines.append(tensor_line("causal_attn_mask", causal.to(torch.int64)))
    lines.append(tensor_line("out_ref_causal", out_causal))
    lines.append(tensor_line("attn_weights_avg_causal", attn_causal))
    lines.append(f"max_abs_diff_mine_ref {float.hex((out_mine - out_ref).abs().max().item())}")
    lines.append("end")
    write("multihead_attention.txt", lines)


def make_mini():
    lines = header("mini_self_attention.txt",
                   "mini_self_attention.py replayed: manual_seed(7), Adam(lr=0.01), 301 steps")
    torch.manual_seed(7)
    model = MiniSelfAttention()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    lines.append(f"text {text!r}")
    lines.append("vocab " + " ".join(str(ord(c)) for c in chars))
    lines.append(tensor_line("data", data))
    lines.append("init")
    for k, t in model.named_parameters():
        lines.append(tensor_line(k, t))

    def batch():
        i = torch.randint(0, len(data) - T - 1, (16,))
        xb = torch.stack([data[j:j+T] for j in i])
        yb = torch.stack([data[j+1:j+T+1] for j in i])
        return i, xb, yb

    losses = []
    for step in range(301):
        i, xb, yb = batch()
        logits = model(xb)
        loss = F.cross_entropy(logits.view(-1, V), yb.view(-1))
        opt.zero_grad(); loss.backward()
        if step == 0:
            lines.append("step0")
            lines.append(tensor_line("xb", xb))
            lines.append(tensor_line("yb", yb))
            lines.append(tensor_line("logits", logits))
            lines.append(f"loss {float.hex(loss.item())}")
            for k, p in model.named_parameters():
                lines.append(tensor_line("grad." + k, p.grad))
        opt.step()
        if step == 0:
            for k, p in model.named_parameters():
                lines.append(tensor_line("after_step0." + k, p))
            lines.append("steps")
        lines.append(f"step {step} loss {float.hex(loss.item())} starts "
                     + " ".join(str(int(v)) for v in i.tolist()))
        losses.append(loss.item())

    idx = torch.tensor([[stoi[c] for c in "aditi li"]])
    for _ in range(14):
        logits = model(idx[:, -T:])
        nxt = logits[:, -1, :].argmax(-1, keepdim=True)
        idx = torch.cat([idx, nxt], dim=1)
    lines.append("final")
    for k, p in model.named_parameters():
        lines.append(tensor_line(k, p))
    lines.append(tensor_line("generated_ids", idx[0]))
    lines.append(f"generated {''.join(itos[i] for i in idx[0].tolist())!r}")
    lines.append("end")
    write("mini_self_attention.txt", lines)
    print(os.environ.get("ATEN_CPU_CAPABILITY"), "mini losses at 0/100/200/300:", " ".join(f"{losses[s]:.3f}" for s in (0, 100, 200, 300)))


def generate(capability):
    global OUT
    assert os.environ.get("ATEN_CPU_CAPABILITY") == capability
    OUT = os.path.join(OUT_ROOT, capability)
    os.makedirs(OUT, exist_ok=True)
    make_random()
    make_init()
    make_mha()
    make_mini()


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--capability":
        generate(sys.argv[2])
        return
    for capability in CAPABILITIES:
        env = dict(os.environ, ATEN_CPU_CAPABILITY=capability)
        subprocess.run([sys.executable, os.path.abspath(__file__), "--capability", capability],
                       env=env, check=True)
    make_keys()


if __name__ == "__main__":
    main()
