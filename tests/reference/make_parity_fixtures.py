#!/usr/bin/python3
"""Write tests/reference/fixtures/parity/mini_self_attention.txt: the workshop's character model
(seed_programs/mini_self_attention.py) trained by PyTorch 1.13's *portable* CPU kernels, with every
intermediate tensor of step 0 so tests/test_parity.cpp can find the first op whose float32 bits differ.

Run with the Debian PyTorch:  /usr/bin/python3 tests/reference/make_parity_fixtures.py

* ATEN_CPU_CAPABILITY=default is set before torch is imported: the portable kernels (8-lane
  Vectorized<float> emulated with plain loops, glibc expf/logf, no fused multiply-add). The AVX2
  kernels use vectorised exp/log approximations and FMAs and train to different losses.
* torch.set_num_threads(1): reductions and BLIS run on one thread.

File format (one tensor per line, '#' lines are comments):
    tensor  NAME NDIM D0 D1 ... V0 V1 ...   float32 values, each as float.hex of the float (trailing zeros dropped)
    itensor NAME NDIM D0 D1 ... V0 V1 ...   int64 values in decimal
Names:
    init.<param>            parameters after torch.manual_seed(7) and construction
    step0.xb, step0.yb      the first batch
    fwd.<name>              step-0 forward intermediates (see forward() below for each name)
    grad.<name>             d loss / d (that intermediate) at step 0
    grad.param.<param>      parameter gradients at step 0
    after_step<N>.<param>   parameters after the optimizer step of step N-1 (N = 1, 2, 3)
    losses                  the loss of every step 0..300, in order
    final.<param>           parameters after the last step
    generated               the greedy generation, as character indices

and tests/reference/fixtures/parity/kernels.txt: single ops on shapes the model does not use (long
rows, K above BLIS's 256-deep blocks, sums that reach the higher cascade levels, non-last softmax
dims, ignored targets), each as `<probe>.<input>` tensors and the `<probe>.out` result (or
`<probe>.grad` for a gradient), so the kernels are checked beyond the model's shapes.
"""
import os
import sys

os.environ["ATEN_CPU_CAPABILITY"] = "default"  # must be set before torch initialises its dispatch

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "parity", "mini_self_attention.txt")
KERNELS_OUT = os.path.join(HERE, "fixtures", "parity", "kernels.txt")
STEPS = 301

# ---- the workshop program, verbatim apart from the instrumentation ----
torch.set_num_threads(1)
torch.manual_seed(7)

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


def instrumented_loss(model, idx, targets, keep):
    """The same ops as model(idx) followed by F.cross_entropy (which is log_softmax + nll_loss in
    torch 1.13), naming every intermediate and keeping its gradient."""
    def k(name, t):
        t.retain_grad()
        keep[name] = t
        return t
    B, t = idx.shape
    tok = k("tok", model.tok(idx))
    pos = k("pos", model.pos(torch.arange(t)))
    x = k("x", tok + pos)
    q = k("q", model.q(x))
    kk = k("k", model.k(x))
    scores = k("scores", q @ kk.transpose(-2, -1))
    scaled = k("scaled", scores / (D ** 0.5))
    masked = k("masked", scaled.masked_fill(model.mask[:t, :t] == 0, float("-inf")))
    probs = k("probs", F.softmax(masked, dim=-1))
    v = k("v", model.v(x))
    ctx = k("ctx", probs @ v)
    logits = k("logits", model.head(ctx))
    logp = k("log_probs", F.log_softmax(logits.view(-1, V), dim=1))
    loss = k("loss", F.nll_loss(logp, targets.view(-1)))
    return loss


def batch():
    i = torch.randint(0, len(data) - T - 1, (16,))
    xb = torch.stack([data[j:j+T] for j in i])
    yb = torch.stack([data[j+1:j+T+1] for j in i])
    return xb, yb


# ---- output ----
def hex32(v):
    """float.hex without the trailing zeros a float32 leaves in a double's mantissa: 0x1.8p+1."""
    h = float.hex(v)
    if "p" not in h:  # inf, -inf, nan
        return h
    mant, exp = h.split("p")
    mant = mant.rstrip("0").rstrip(".")
    return f"{mant}p{exp}"


def tensor_line(name, t):
    t = t.detach()
    if t.dtype.is_floating_point:
        assert t.dtype == torch.float32, name
        kind, vals = "tensor", [hex32(float(v)) for v in t.reshape(-1).tolist()]
    else:
        kind, vals = "itensor", [str(int(v)) for v in t.reshape(-1).tolist()]
    return " ".join([kind, name, str(t.dim())] + [str(d) for d in t.shape] + vals)


def params_lines(prefix, model):
    return [tensor_line(f"{prefix}.{n}", p) for n, p in model.named_parameters()]


def same_bits(a, b):
    return a.shape == b.shape and torch.equal(a.view(torch.int32), b.view(torch.int32))


def main():
    model = MiniSelfAttention()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    lines = [f"# scratchgrad parity fixture: mini_self_attention.py under torch {torch.__version__}, "
             f"ATEN_CPU_CAPABILITY={os.environ['ATEN_CPU_CAPABILITY']}, 1 thread, float32. "
             f"Written by make_parity_fixtures.py; do not edit."]
    lines += params_lines("init", model)
    losses = []
    for step in range(STEPS):
        xb, yb = batch()
        if step == 0:
            lines += [tensor_line("step0.xb", xb), tensor_line("step0.yb", yb)]
            # the program's own forward/backward, for comparison with the instrumented one
            plain = F.cross_entropy(model(xb).view(-1, V), yb.view(-1))
            opt.zero_grad()
            plain.backward()
            plain_grads = {n: p.grad.clone() for n, p in model.named_parameters()}
            keep = {}
            loss = instrumented_loss(model, xb, yb, keep)
            opt.zero_grad(set_to_none=True)  # as fresh as the program's first backward
            loss.backward()
            assert same_bits(plain.detach(), loss.detach()), "instrumented forward differs"
            for n, p in model.named_parameters():
                assert same_bits(plain_grads[n], p.grad), f"instrumented backward differs for {n}"
            lines += [tensor_line(f"fwd.{n}", t) for n, t in keep.items()]
            lines += [tensor_line(f"grad.{n}", t.grad) for n, t in keep.items() if t.grad is not None]
            lines += [tensor_line(f"grad.param.{n}", p.grad) for n, p in model.named_parameters()]
        else:
            logits = model(xb)
            loss = F.cross_entropy(logits.view(-1, V), yb.view(-1))
            opt.zero_grad()
            loss.backward()
        opt.step()
        losses.append(loss.detach().clone())
        if step + 1 in (1, 2, 3):
            lines += params_lines(f"after_step{step + 1}", model)
        if step % 100 == 0:
            print(f"step {step:>3} | loss {loss.item():.3f}")
    lines.append(tensor_line("losses", torch.stack(losses)))
    lines += params_lines("final", model)

    idx = torch.tensor([[stoi[c] for c in "aditi li"]])
    with torch.no_grad():
        for _ in range(14):
            logits = model(idx[:, -T:])
            nxt = logits[:, -1, :].argmax(-1, keepdim=True)
            idx = torch.cat([idx, nxt], dim=1)
    print("generated:", "".join(itos[i] for i in idx[0].tolist()))
    lines.append(tensor_line("generated", idx[0]))

    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", os.path.relpath(OUT), f"({len(lines)} lines)", file=sys.stderr)


def kernel_probes():
    """Single ops on odd shapes; each probe's inputs are drawn from its own generator."""
    lines = [f"# scratchgrad parity fixture: single ops under torch {torch.__version__}, "
             f"ATEN_CPU_CAPABILITY={os.environ['ATEN_CPU_CAPABILITY']}, 1 thread, float32. "
             f"Written by make_parity_fixtures.py; do not edit."]
    gen = torch.Generator().manual_seed(1234)

    def randn(*shape):
        return torch.randn(*shape, generator=gen)

    def probe(name, out, **inputs):
        lines.extend(tensor_line(f"{name}.{k}", v) for k, v in inputs.items())
        lines.append(tensor_line(f"{name}.out", out))

    def grad_probe(name, fn, x, g):
        x = x.clone().requires_grad_()
        fn(x).backward(g)
        lines.extend([tensor_line(f"{name}.x", x), tensor_line(f"{name}.g", g), tensor_line(f"{name}.grad", x.grad)])

    # matmul: K = 300 crosses BLIS's 256-deep block; a transposed operand; batched, and below bmm's
    # 400-multiply-add threshold (a plain loop there)
    a, b = randn(5, 300), randn(300, 7)
    probe("mm_k300", a @ b, a=a, b=b)
    at, b = randn(300, 3), randn(300, 2)
    probe("mm_k300_at", at.t() @ b, at=at, b=b)
    a, b = randn(3, 9, 40), randn(3, 40, 6)
    probe("bmm", a @ b, a=a, b=b)
    a, b = randn(2, 3, 4), randn(2, 4, 5)
    probe("bmm_small", a @ b, a=a, b=b)
    x, w, bias = randn(10, 24), randn(7, 24), randn(7)
    probe("linear", F.linear(x, w, bias), x=x, w=w, bias=bias)
    # one output row or column: BLIS's dot kernel where the matrix runs along K
    x, y = randn(37), randn(37)
    probe("dot", x @ y, x=x, y=y)
    a, v = randn(6, 300), randn(300)
    probe("mv", a @ v, a=a, v=v)
    v, bt = randn(40), randn(9, 40)
    probe("vm_bt", v @ bt.t(), v=v, bt=bt)
    a, bt = randn(2, 1, 40), randn(2, 12, 40)
    probe("bmm_row_bt", a @ bt.transpose(1, 2), a=a, bt=bt)
    a, bt = randn(2, 1, 20), randn(2, 12, 20)
    probe("bmm_row_bt_small", a @ bt.transpose(1, 2), a=a, bt=bt)
    # sums: every cascade_sum loop and the higher levels
    x = randn(1100)
    probe("sum_all", x.sum(), x=x)
    x = randn(260, 33)
    probe("sum_dim0", x.sum(0), x=x)
    x = randn(9, 300)
    probe("sum_dim1", x.sum(1), x=x)
    x = randn(5, 37, 19)
    probe("sum_middle", x.sum(1), x=x)
    x = randn(16, 8, 24)
    probe("sum_01", x.sum((0, 1)), x=x)
    x = randn(19, 37)
    probe("sum_transposed", x.t().sum(0), x=x)
    x = randn(7, 3)
    probe("sum_short_rows", x.sum(1), x=x)
    x = randn(100, 5)
    probe("mean_dim0", x.mean(0), x=x)
    # softmax family: long rows (8 lanes and a tail), short rows, non-last dims; and their gradients
    x = randn(7, 37) * 3
    probe("softmax_last", F.softmax(x, -1), x=x)
    probe("log_softmax_last", F.log_softmax(x, -1), x=x)
    grad_probe("softmax_last_backward", lambda t: F.softmax(t, -1), x, randn(7, 37))
    grad_probe("log_softmax_last_backward", lambda t: F.log_softmax(t, -1), x, randn(7, 37))
    x = randn(4, 5) * 3
    probe("softmax_short", F.softmax(x, -1), x=x)
    x = randn(37, 7) * 3
    probe("softmax_dim0", F.softmax(x, 0), x=x)
    probe("log_softmax_dim0", F.log_softmax(x, 0), x=x)
    grad_probe("softmax_dim0_backward", lambda t: F.softmax(t, 0), x, randn(37, 7))
    grad_probe("log_softmax_dim0_backward", lambda t: F.log_softmax(t, 0), x, randn(37, 7))
    # losses: the nll cascade past 256 rows, and ignored rows
    x = randn(300, 5)
    t = torch.randint(0, 5, (300,), generator=gen)
    probe("cross_entropy_300", F.cross_entropy(x, t), x=x, t=t)
    x = randn(50, 6)
    t = torch.randint(0, 6, (50,), generator=gen)
    t[torch.randint(0, 50, (12,), generator=gen)] = -100
    probe("nll_ignore", F.nll_loss(F.log_softmax(x, 1), t), x=x, t=t)
    # embedding backward: repeated indices accumulate in index order
    w = randn(6, 4).requires_grad_()
    idx = torch.randint(0, 6, (40,), generator=gen)
    g = randn(40, 4)
    F.embedding(idx, w).backward(g)
    lines.extend([tensor_line("embedding_backward.idx", idx), tensor_line("embedding_backward.g", g),
                  tensor_line("embedding_backward.grad", w.grad)])
    # addmm past one 256-deep block: BLIS starts the sum from the bias, (bias + chain0) + chain1
    x, w, bias = randn(10, 300), randn(7, 300), randn(7)
    probe("linear_k300", F.linear(x, w, bias), x=x, w=w, bias=bias)
    with open(KERNELS_OUT, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", os.path.relpath(KERNELS_OUT), f"({len(lines)} lines)", file=sys.stderr)


if __name__ == "__main__":
    main()
    kernel_probes()
