#!/usr/bin/python3
"""Write the GPT fixtures under tests/reference/fixtures/gpt/ (issue 14, "a GPT from scratch").

  gpt.txt           the GPT of chapter 4 of "Build a Large Language Model (From Scratch)" on a small
                    config: every parameter after torch.manual_seed(123); GPTModel(cfg), a fixed
                    step-0 batch with its forward intermediates, logits, loss and every gradient, then
                    20 AdamW steps (two param groups, warm-up + cosine LambdaLR, clip_grad_norm_ 1.0)
                    with each step's batch, lr, loss and gradient norm, and the parameters after the
                    last step
  gpt_tied.txt      the same model with out_head.weight tied to tok_emb.weight: step 0 (logits, loss,
                    the gradients of the small parameters and of the tied matrix) and the 20 steps
  gpt_composed.txt  the same model with the book's composed LayerNorm and GELU formulas (mean / var /
                    sqrt / divide, tanh / pow) instead of the fused ops: step 0 (logits, loss, the
                    gradients of the biases and LayerNorm parameters) and the 20 steps
  ops.txt           single ops: F.layer_norm forward and backward, F.gelu ('none' and 'tanh') forward
                    and backward, torch.var / torch.std forward and backward, split / chunk,
                    torch.norm(g, 2.0) and clip_grad_norm_

Run with the Debian PyTorch:  /usr/bin/python3 tests/reference/make_gpt_fixtures.py
Like make_nn_fixtures.py the script re-runs itself under ATEN_CPU_CAPABILITY=default (PyTorch's
portable kernels: 8-lane Vectorized<float> as plain loops, glibc libm, no fused multiply-add); only
that capability is written. One thread (torch.set_num_threads(1)): layer_norm's backward adds the
weight/bias gradients per thread, so more threads would change those bits.
The format is described in fixtures/gpt/README.md.
"""
import math
import os
import subprocess
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "gpt")
CAPABILITY = "default"

# --------------------------------------------------------------------------- configuration
GPT_CONFIG = {
    "vocab_size": None,      # set from TEXT below (its distinct characters)
    "context_length": 16,
    "emb_dim": 20,           # head_dim 5, feed-forward width 80; rows of 20 leave a 4-element tail
    "n_heads": 4,            # after the 8-lane vectors in layer_norm's moments
    "n_layers": 2,
    "drop_rate": 0.0,        # dropout off for parity (the modules are still there)
    "qkv_bias": False,       # as in the book's GPT_CONFIG_124M
}
SEED = 123
TEXT = ("every step the small model reads a few letters of this text and guesses the next one; "
        "its weights move a little, and the loss goes down. quick brown foxes jump over lazy dogs.")
BATCH, T = 4, 12             # training batches: 4 windows of 12 tokens (T < context_length)
STEP0_BATCH = 2              # the fixed step-0 batch: 2 rows of T random tokens
STEPS = 20
BASE_LR, BETAS, EPS, WEIGHT_DECAY = 3e-3, (0.9, 0.95), 1e-8, 0.1
WARMUP, MIN_LR_RATIO = 4, 0.1
MAX_GRAD_NORM = 1.0
BATCH_SEED = 2024            # torch.Generator for the training windows (recorded, no need to replay)


def lr_lambda(step):
    """LambdaLR factor for optimizer step `step` (0-based): linear warm-up over WARMUP steps, then
    cosine decay from 1 to MIN_LR_RATIO over the remaining STEPS - WARMUP steps (Python doubles)."""
    if step < WARMUP:
        return (step + 1) / WARMUP
    progress = (step - WARMUP) / (STEPS - WARMUP)
    return MIN_LR_RATIO + (1.0 - MIN_LR_RATIO) * 0.5 * (1.0 + math.cos(math.pi * progress))


# --------------------------------------------------------------------------- the model
# Chapter 4 of Sebastian Raschka's book (re-implemented here). Two switches, both off in gpt.txt:
#   COMPOSED: LayerNorm and GELU use the book's own formulas instead of the fused ops;
#   the attention module keeps its last softmax output in `last_attn_weights` for the fixture.
COMPOSED = False


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
        self.last_attn_weights = None

    def forward(self, x):
        b, num_tokens, _ = x.shape
        shape = (b, num_tokens, self.num_heads, self.head_dim)
        keys = self.W_key(x).view(shape).transpose(1, 2)        # (b, heads, T, head_dim)
        queries = self.W_query(x).view(shape).transpose(1, 2)
        values = self.W_value(x).view(shape).transpose(1, 2)
        attn_scores = queries @ keys.transpose(2, 3)
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        self.last_attn_weights = attn_weights
        context = (attn_weights @ values).transpose(1, 2)       # (b, T, heads, head_dim)
        context = context.contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context)


class LayerNorm(nn.Module):
    """The book's LayerNorm (parameters `scale` = 1, `shift` = 0, eps 1e-5, biased variance).
    scratchgrad implements it as one fused op, so the twin calls F.layer_norm: mathematically the
    book's (x - mean) / sqrt(var + eps) * scale + shift, rounded in PyTorch's fused-kernel order."""

    def __init__(self, emb_dim):
        super().__init__()
        self.eps = 1e-5
        self.scale = nn.Parameter(torch.ones(emb_dim))
        self.shift = nn.Parameter(torch.zeros(emb_dim))

    def forward(self, x):
        if COMPOSED:   # the book's formula, op by op
            mean = x.mean(dim=-1, keepdim=True)
            var = x.var(dim=-1, keepdim=True, unbiased=False)
            norm_x = (x - mean) / torch.sqrt(var + self.eps)
            return self.scale * norm_x + self.shift
        return F.layer_norm(x, (x.shape[-1],), self.scale, self.shift, self.eps)


class GELU(nn.Module):
    """The book's tanh-approximated GELU, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
    scratchgrad implements it as one fused op, so the twin calls F.gelu(approximate='tanh')."""

    def forward(self, x):
        if COMPOSED:
            return 0.5 * x * (1 + torch.tanh(
                torch.sqrt(torch.tensor(2.0 / torch.pi)) * (x + 0.044715 * torch.pow(x, 3))))
        return F.gelu(x, approximate="tanh")


class FeedForward(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["emb_dim"]
        self.layers = nn.Sequential(nn.Linear(d, 4 * d), GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        return self.layers(x)


class TransformerBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.att = MultiHeadAttention(
            d_in=cfg["emb_dim"], d_out=cfg["emb_dim"], context_length=cfg["context_length"],
            dropout=cfg["drop_rate"], num_heads=cfg["n_heads"], qkv_bias=cfg["qkv_bias"])
        self.ff = FeedForward(cfg)
        self.norm1 = LayerNorm(cfg["emb_dim"])
        self.norm2 = LayerNorm(cfg["emb_dim"])
        self.drop_shortcut = nn.Dropout(cfg["drop_rate"])

    def forward(self, x):
        shortcut = x                      # pre-LN: normalise, attend, add the input back
        x = self.drop_shortcut(self.att(self.norm1(x)))
        x = x + shortcut
        shortcut = x                      # the same around the feed-forward network
        x = self.drop_shortcut(self.ff(self.norm2(x)))
        return x + shortcut


class GPTModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"])
        self.pos_emb = nn.Embedding(cfg["context_length"], cfg["emb_dim"])
        self.drop_emb = nn.Dropout(cfg["drop_rate"])
        self.trf_blocks = nn.Sequential(*[TransformerBlock(cfg) for _ in range(cfg["n_layers"])])
        self.final_norm = LayerNorm(cfg["emb_dim"])
        self.out_head = nn.Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False)

    def forward(self, in_idx):
        _, seq_len = in_idx.shape
        x = self.tok_emb(in_idx) + self.pos_emb(torch.arange(seq_len, device=in_idx.device))
        x = self.drop_emb(x)
        x = self.trf_blocks(x)
        return self.out_head(self.final_norm(x))


# --------------------------------------------------------------------------- format
def hex32(v):
    """float.hex without the trailing zeros a float32 leaves in a double's mantissa: 0x1.8p+1."""
    h = float.hex(v)
    if "p" not in h:  # inf, -inf, nan
        return h
    mant, exp = h.split("p")
    mant = mant.rstrip("0").rstrip(".")
    return f"{mant}p{exp}"


def tensor_line(name, t):
    """`tensor NAME NDIM D0 D1 ... V0 V1 ...` (float32 values, hex32) or
    `itensor NAME NDIM D0 ... V0 ...` (integer/bool tensors, decimal values)."""
    t = t.detach()
    if t.dtype.is_floating_point:
        assert t.dtype == torch.float32, name
        kind, vals = "tensor", [hex32(float(v)) for v in t.reshape(-1).tolist()]
    else:
        kind, vals = "itensor", [str(int(v)) for v in t.reshape(-1).tolist()]
    return " ".join([kind, name, str(t.dim())] + [str(d) for d in t.shape] + vals)


def header(fname, what):
    return [f"# scratchgrad gpt fixture {fname}: torch {torch.__version__}, float32, "
            f"ATEN_CPU_CAPABILITY={os.environ.get('ATEN_CPU_CAPABILITY')}, "
            f"{torch.get_num_threads()} thread. Written by make_gpt_fixtures.py; do not edit.",
            f"# {what}"]


def write(fname, lines):
    lines.append("end")
    with open(os.path.join(OUT, fname), "w") as f:
        f.write("\n".join(lines) + "\n")


# --------------------------------------------------------------------------- the GPT files
CHARS = sorted(set(TEXT))
STREAM = torch.tensor([CHARS.index(c) for c in TEXT])
GPT_CONFIG["vocab_size"] = len(CHARS)


def build_model(tied=False):
    torch.manual_seed(SEED)
    model = GPTModel(GPT_CONFIG)
    if tied:
        model.out_head.weight = model.tok_emb.weight
    return model


def param_groups(model):
    """AdamW groups: weight decay on the weights of nn.Linear layers only; biases, LayerNorm
    scale/shift and the embeddings get none (a tied tok_emb/out_head matrix is out_head's Linear
    weight, so it is decayed). Both groups keep named_parameters() order."""
    linear_weights = {id(m.weight) for m in model.modules() if isinstance(m, nn.Linear)}
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if id(p) in linear_weights else no_decay).append((name, p))
    return decay, no_decay


def config_lines(model):
    decay, no_decay = param_groups(model)
    lines = ["config " + " ".join(f"{k} {int(v)}" if not isinstance(v, float) else f"{k} {v!r}"
                                  for k, v in GPT_CONFIG.items()),
             f"text {TEXT!r}",
             "vocab " + " ".join(str(ord(c)) for c in CHARS),
             tensor_line("stream", STREAM),
             f"train batch {BATCH} T {T} steps {STEPS} base_lr {BASE_LR!r} betas {BETAS[0]!r} "
             f"{BETAS[1]!r} eps {EPS!r} weight_decay {WEIGHT_DECAY!r} warmup {WARMUP} "
             f"min_lr_ratio {MIN_LR_RATIO!r} max_grad_norm {MAX_GRAD_NORM!r}",
             "group 0 weight_decay " + repr(WEIGHT_DECAY) + " " + " ".join(n for n, _ in decay),
             "group 1 weight_decay 0.0 " + " ".join(n for n, _ in no_decay),
             "state_dict " + " ".join(model.state_dict().keys()),
             "named_parameters " + " ".join(n for n, _ in model.named_parameters())]
    return lines


TRACED = ["drop_emb", "trf_blocks.0.norm1", "trf_blocks.0.att", "trf_blocks.0.norm2",
          "trf_blocks.0.ff.layers.1", "trf_blocks.0.ff", "trf_blocks.0", "trf_blocks.1",
          "final_norm"]
TRACED_GRADS = ["drop_emb", "trf_blocks.0", "trf_blocks.1", "final_norm"]


def step0_lines(model, full, grads_of=None):
    """The fixed step-0 batch (drawn from the global generator right after the model), its forward
    intermediates (full=True), logits, loss and the gradients of every parameter (or of those for
    which grads_of(name, param) is true)."""
    xb = torch.randint(0, GPT_CONFIG["vocab_size"], (STEP0_BATCH, T))
    yb = torch.randint(0, GPT_CONFIG["vocab_size"], (STEP0_BATCH, T))
    kept, hooks = {}, []
    if full:
        modules = dict(model.named_modules())
        for name in TRACED:
            def hook(_m, _inp, out, name=name):
                if name in TRACED_GRADS:
                    out.retain_grad()
                kept[name] = out
            hooks.append(modules[name].register_forward_hook(hook))
    logits = model(xb)
    if full:
        logits.retain_grad()
    loss = F.cross_entropy(logits.flatten(0, 1), yb.flatten())
    loss.backward()
    for h in hooks:
        h.remove()
    lines = ["step0", tensor_line("xb", xb), tensor_line("yb", yb)]
    if full:
        for name in TRACED:
            lines.append(tensor_line("fwd." + name, kept[name]))
        lines.append(tensor_line("fwd.trf_blocks.0.att.attn_weights",
                                 model.trf_blocks[0].att.last_attn_weights))
    lines.append(tensor_line("logits", logits))
    lines.append(f"loss {hex32(loss.item())}")
    if full:
        lines.append(tensor_line("grad.logits", logits.grad))
        for name in TRACED_GRADS:
            lines.append(tensor_line("grad.fwd." + name, kept[name].grad))
    for name, p in model.named_parameters():
        if grads_of is None or grads_of(name, p):
            lines.append(tensor_line("grad." + name, p.grad))
    model.zero_grad(set_to_none=True)   # training starts like a fresh model
    return lines


def train_lines(model, keep_final):
    decay, no_decay = param_groups(model)
    opt = torch.optim.AdamW([{"params": [p for _, p in decay], "weight_decay": WEIGHT_DECAY},
                             {"params": [p for _, p in no_decay], "weight_decay": 0.0}],
                            lr=BASE_LR, betas=BETAS, eps=EPS)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    gen = torch.Generator().manual_seed(BATCH_SEED)
    lines = ["steps"]
    for step in range(STEPS):
        starts = torch.randint(0, len(STREAM) - T, (BATCH,), generator=gen)
        xb = torch.stack([STREAM[s:s + T] for s in starts])
        yb = torch.stack([STREAM[s + 1:s + T + 1] for s in starts])
        logits = model(xb)
        loss = F.cross_entropy(logits.flatten(0, 1), yb.flatten())
        opt.zero_grad()
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
        lr = opt.param_groups[0]["lr"]
        assert lr == BASE_LR * lr_lambda(step) and opt.param_groups[1]["lr"] == lr
        opt.step()
        sched.step()
        lines.append(f"step {step} lr {float.hex(lr)} loss {hex32(loss.item())} "
                     f"grad_norm {hex32(gnorm.item())} starts " + " ".join(str(int(s)) for s in starts))
        print(f"  step {step:2d} lr {lr:.6f} loss {loss.item():.4f} grad_norm {gnorm.item():.4f}")
    if keep_final:
        lines.append("final")
        lines += [tensor_line(n, p) for n, p in model.named_parameters()]
    return lines


def small_or_tied(name, p):
    """Gradients kept in the variant files: biases and LayerNorm parameters, and the tied matrix."""
    return p.numel() <= 80 or name == "tok_emb.weight"


def make_gpt():
    global COMPOSED
    print("gpt.txt")
    model = build_model()
    lines = header("gpt.txt", "GPTModel(cfg) after torch.manual_seed(123): init, step 0, 20 AdamW steps")
    lines += config_lines(model)
    lines.append("init")
    lines += [tensor_line(n, p) for n, p in model.named_parameters()]
    lines += step0_lines(model, full=True)
    lines += train_lines(model, keep_final=True)
    write("gpt.txt", lines)

    print("gpt_tied.txt")
    model = build_model(tied=True)
    lines = header("gpt_tied.txt", "as gpt.txt with model.out_head.weight = model.tok_emb.weight "
                   "after construction (the init is gpt.txt's minus out_head.weight)")
    lines += config_lines(model)
    lines += step0_lines(model, full=False, grads_of=small_or_tied)
    lines += train_lines(model, keep_final=False)
    write("gpt_tied.txt", lines)

    print("gpt_composed.txt")
    COMPOSED = True
    try:
        model = build_model()
        lines = header("gpt_composed.txt", "as gpt.txt with the book's composed LayerNorm and GELU "
                       "formulas (same init as gpt.txt)")
        lines += config_lines(model)
        lines += step0_lines(model, full=False, grads_of=lambda n, p: p.numel() <= 80)
        lines += train_lines(model, keep_final=False)
        write("gpt_composed.txt", lines)
    finally:
        COMPOSED = False


# --------------------------------------------------------------------------- single ops
def make_ops():
    lines = header("ops.txt", "single ops: each `case` line, then its input and output tensors")
    g = torch.Generator().manual_seed(14)

    def randn(*shape, scale=1.0, shift=0.0):
        return torch.randn(tuple(shape), generator=g) * scale + shift

    # layer_norm over the last dim, forward and backward (upstream gradient `up`).
    ln_cases = [((4, 7), "affine", 1e-5), ((4, 7), "none", 1e-5), ((4, 7), "affine", 1e-3),
                ((2, 3, 33), "affine", 1e-5), ((2, 3, 33), "none", 1e-3),
                ((2, 3, 33), "weight", 1e-5), ((3, 20), "affine", 1e-5), ((3, 8), "none", 1e-5),
                ((1, 300), "affine", 1e-5), ((2, 40), "affine", 1e-5)]
    for k, (shape, kind, eps) in enumerate(ln_cases):
        n = shape[-1]
        x = randn(*shape, scale=2.0, shift=0.5 if k % 2 else -1.0)
        w = randn(n, scale=0.5, shift=1.0) if kind in ("affine", "weight") else None
        b = randn(n, scale=0.2) if kind == "affine" else None
        up = randn(*shape)
        xr = x.clone().requires_grad_(True)
        wr = None if w is None else w.clone().requires_grad_(True)
        br = None if b is None else b.clone().requires_grad_(True)
        y = F.layer_norm(xr, (n,), wr, br, eps)
        y.backward(up)
        _, mean, rstd = torch.native_layer_norm(x, [n], w, b, eps)
        label = f"layer_norm_{'x'.join(map(str, shape))}_{kind}_eps{eps:g}"
        lines.append(f"case {label} normalized_shape {n} eps {eps!r} weight "
                     f"{'yes' if w is not None else 'no'} bias {'yes' if b is not None else 'no'}")
        lines.append(tensor_line("x", x))
        if w is not None:
            lines.append(tensor_line("weight", w))
        if b is not None:
            lines.append(tensor_line("bias", b))
        lines += [tensor_line("y", y), tensor_line("mean", mean), tensor_line("rstd", rstd),
                  tensor_line("up", up), tensor_line("grad_x", xr.grad)]
        if w is not None:
            lines.append(tensor_line("grad_weight", wr.grad))
        if b is not None:
            lines.append(tensor_line("grad_bias", br.grad))

    # gelu, both approximations. The exact ('none') GELU of a contiguous float tensor goes to
    # oneDNN in this build (its own erf, chosen by the machine's ISA, not ATEN_CPU_CAPABILITY);
    # with mkldnn disabled it runs ATen's GeluKernel, which is what these values are.
    special = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 5.0, -5.0, 8.0, -8.0, 10.0,
               -10.0, 12.0, -12.0, 20.0, -20.0, 50.0, -50.0, 1e-3, -1e-3, 1e-7, -1e-7, 1e-30,
               3.0e38, -3.0e38, 0.1, -0.1, 0.7071, -0.7071, 1.5, -1.5, 4.0, -4.0, 6.0, -6.0,
               9.0, -9.0, float("inf"), float("-inf")]
    x = torch.cat([torch.tensor(special), randn(120, scale=2.0), torch.linspace(-7, 7, 43)])
    dy = randn(x.numel())
    lines.append(f"case gelu n {x.numel()}")
    lines += [tensor_line("x", x), tensor_line("dy", dy)]
    for approx in ("none", "tanh"):
        with torch.backends.mkldnn.flags(enabled=False):
            xr = x.clone().requires_grad_(True)
            y = F.gelu(xr, approximate=approx)
            y.backward(dy)
        lines += [tensor_line(f"y_{approx}", y), tensor_line(f"grad_x_{approx}", xr.grad)]

    # var / std: dims -1, 0 and all, unbiased True / False, forward and backward.
    for shape in [(5, 7), (3, 17), (2, 3, 9)]:
        x = randn(*shape, scale=1.5, shift=0.25)
        lines.append(f"case var_std_{'x'.join(map(str, shape))}")
        lines.append(tensor_line("x", x))
        for fn in ("var", "std"):
            for unbiased in (True, False):
                for dim in (-1, 0, None):
                    xr = x.clone().requires_grad_(True)
                    kw = {} if dim is None else {"dim": dim}
                    out = getattr(torch, fn)(xr, unbiased=unbiased, **kw)
                    up = randn(*out.shape)
                    out.backward(up)
                    tag = f"{fn}.dim{'all' if dim is None else dim}.{'unbiased' if unbiased else 'biased'}"
                    lines += [tensor_line(tag, out), tensor_line(tag + ".up", up),
                              tensor_line(tag + ".grad_x", xr.grad)]

    # split / chunk (shape ops)
    x = torch.arange(2 * 7, dtype=torch.float32).reshape(2, 7)
    lines.append("case split_chunk")
    lines.append(tensor_line("x", x))
    for i, part in enumerate(torch.split(x, 3, dim=1)):
        lines.append(tensor_line(f"split3_dim1.{i}", part))
    for i, part in enumerate(torch.split(x, [1, 4, 2], dim=1)):
        lines.append(tensor_line(f"split_1_4_2_dim1.{i}", part))
    for i, part in enumerate(torch.chunk(x, 3, dim=1)):
        lines.append(tensor_line(f"chunk3_dim1.{i}", part))
    for i, part in enumerate(torch.chunk(x, 2, dim=0)):
        lines.append(tensor_line(f"chunk2_dim0.{i}", part))

    # 2-norms of contiguous tensors
    for n in (1, 5, 8, 13, 37, 129, 300):
        x = randn(n, scale=3.0)
        lines.append(f"case norm2_{n}")
        lines += [tensor_line("x", x), tensor_line("norm", torch.norm(x, 2.0))]

    # clip_grad_norm_ over three gradients of 5, 37 and 300 (10x30) elements
    for label, max_norm, scale in [("clipped", 1.0, 1.0), ("max_norm_0.3", 0.3, 1.0),
                                   ("unclipped", 1.0, 0.01)]:
        grads = [randn(5, scale=scale), randn(37, scale=scale), randn(10, 30, scale=scale)]
        params = [nn.Parameter(torch.zeros_like(t)) for t in grads]
        for p, t in zip(params, grads):
            p.grad = t.clone()
        total = torch.nn.utils.clip_grad_norm_(params, max_norm)
        lines.append(f"case clip_grad_norm_{label} max_norm {max_norm!r}")
        for i, t in enumerate(grads):
            lines += [tensor_line(f"grad{i}", t), tensor_line(f"norm{i}", torch.norm(t, 2.0))]
        lines.append(tensor_line("total_norm", total))
        for i, p in enumerate(params):
            lines.append(tensor_line(f"clipped{i}", p.grad))
    write("ops.txt", lines)


def generate():
    assert os.environ.get("ATEN_CPU_CAPABILITY") == CAPABILITY
    torch.set_num_threads(1)
    os.makedirs(OUT, exist_ok=True)
    make_gpt()
    make_ops()


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--capability":
        generate()
        return
    env = dict(os.environ, ATEN_CPU_CAPABILITY=CAPABILITY)
    subprocess.run([sys.executable, os.path.abspath(__file__), "--capability", CAPABILITY],
                   env=env, check=True)


if __name__ == "__main__":
    main()
