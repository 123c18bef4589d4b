#!/usr/bin/python3
"""Writes the fixtures that pin scratchgrad's bfloat16 tensors to PyTorch 1.13's.

Run with Debian's PyTorch: /usr/bin/python3 tests/reference/make_bf16_fixtures.py
Output: tests/reference/fixtures/bf16/{convert,ops,print}.txt, read by tests/test_bfloat16.cpp.
Fixed seeds: re-running reproduces the files byte for byte. Like make_gpt_fixtures.py the script re-runs
itself under ATEN_CPU_CAPABILITY=default (PyTorch's portable kernels, glibc's libm: the float32 bits the
engine's kernels give), one thread.

convert.txt: one "<float32 bits> <bfloat16 bits>" pair per line (hex), torch's .to(torch.bfloat16).

ops.txt: one block per case:
    case <op>                 the op, as tests/test_bfloat16.cpp names it
    # ...                     for the ops in ROUNDED_BETWEEN_STEPS: how the expected values were made
    in <d0> <d1> ... ; <bits> each input: its shape, then its bfloat16 bits in hex (row-major)
    out <dtype> <d0> ... ; <values>   bfloat16 bits in hex, or 0/1 for bool
    end

autocast.txt: torch.autocast("cpu", dtype=torch.bfloat16) on float32 master weights, in the format of
fixtures/gpt (`tensor NAME NDIM D0 .. V0 ..` with float.hex values, `itensor` for integers):
    linear    x, weight, bias, c; y = the autocast Linear's output (bfloat16, written widened), and the
              gradients of loss = (y.float() * c).sum(), made with float32 sums: g = c rounded,
              dW = gᵀ·x, dx = g·W, db = Σ g over float32 copies of the bfloat16 operands, each rounded
              once. (Debian's PyTorch 1.13, built without MKL, multiplies bfloat16 matrices in a plain
              layout adding each term into a bfloat16 sum; oneDNN's autocast products, and scratchgrad's,
              add into float32. Its own gradients are written too, torch.*, for the record.)
    gpt       the GPT of make_gpt_fixtures.py (seed 123, its config), a batch xb/yb, and for the
              cross-entropy loss the loss and every parameter's gradient twice: under autocast (bf16.*)
              and in float32 (f32.*), so a test can size its tolerance by the distance between the two

print.txt: one block per case:
    case <name>
    in <shape> ; <bits>      the bfloat16 tensor
    grad 0|1                 whether it requires grad
    expected <n>             then n lines of str(tensor), verbatim
    end
"""

import math
import os
import struct

import torch
import torch.nn.functional as F

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "bf16")


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def bf16_bits(t):
    return [v & 0xFFFF for v in t.contiguous().view(torch.int16).flatten().tolist()]


def tensor_line(tag, t):
    shape = " ".join(str(d) for d in t.shape)
    if t.dtype == torch.bfloat16:
        values = " ".join("%04x" % b for b in bf16_bits(t))
        return "%s bfloat16 %s ; %s" % (tag, shape, values) if tag == "out" else "%s %s ; %s" % (tag, shape, values)
    assert t.dtype == torch.bool
    return "out bool %s ; %s" % (shape, " ".join(str(int(v)) for v in t.flatten().tolist()))


def write_convert():
    gen = torch.Generator().manual_seed(1)
    values = [0.0, -0.0, 1.0, -1.0, 1.00390625, 1.01171875, 1.0078125, 3.140625, 65504.0, 3.3895314e38,
              3.4028235e38, -3.4028235e38, 1e-38, 1e-40, -1e-45, float("inf"), -float("inf"), float("nan"),
              0.1, 0.3, 2.7, -2.7]
    values += (torch.randn(200, generator=gen) * 10).tolist()
    values += (torch.rand(50, generator=gen) * 1e-3).tolist()
    # every tie: the dropped half exactly 0x8000, kept halves even and odd
    values += [struct.unpack("<f", struct.pack("<I", (k << 16) | 0x8000))[0] for k in (0x3F80, 0x3F81, 0xBF82, 0x4049)]
    x = torch.tensor(values, dtype=torch.float32)
    y = x.to(torch.bfloat16)
    with open(os.path.join(OUT_DIR, "convert.txt"), "w") as f:
        f.write("# float32 bits -> bfloat16 bits, torch %s\n" % torch.__version__)
        for v, b in zip(x.tolist(), bf16_bits(y)):
            f.write("%08x %04x\n" % (f32_bits(v), b))


def ops_cases():
    gen = torch.Generator().manual_seed(2)

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=gen) * scale).to(torch.bfloat16)

    x = randn(4, 37, scale=2.0)
    pos = (torch.rand(4, 37, generator=gen) * 5 + 0.01).to(torch.bfloat16)
    row = randn(37)
    big = randn(3, 1000)
    unary = {
        "neg": lambda a: -a, "exp": torch.exp, "tanh": torch.tanh, "relu": torch.relu, "abs": torch.abs,
        "add_0.1": lambda a: a + 0.1, "sub_0.3": lambda a: a - 0.3, "mul_0.1": lambda a: a * 0.1,
        "div_0.3": lambda a: a / 0.3, "rsub_0.7": lambda a: 0.7 - a, "pow_2": lambda a: a.pow(2.0),
        "gelu": F.gelu, "gelu_tanh": lambda a: F.gelu(a, approximate="tanh"),
        "softmax": lambda a: torch.softmax(a, -1), "log_softmax": lambda a: torch.log_softmax(a, -1),
        "layer_norm": lambda a: F.layer_norm(a, (a.shape[-1],)),
        "sum": torch.sum, "sum_0": lambda a: a.sum(0), "sum_1": lambda a: a.sum(1), "mean": torch.mean,
        "mean_1": lambda a: a.mean(1), "max_1": lambda a: a.max(1).values, "lt_0.1": lambda a: a < 0.1,
        "to_float32_exp": lambda a: a.float().exp().to(torch.bfloat16),
    }
    for name, f in unary.items():
        yield name, [x], f(x)
    for name, f in {"log": torch.log, "sqrt": torch.sqrt, "rdiv_1.7": lambda a: 1.7 / a,
                    "pow_1.3": lambda a: a.pow(1.3)}.items():
        yield name, [pos], f(pos)
    for name in ("sum", "sum_1", "mean_1", "softmax", "layer_norm"):
        yield name, [big], unary[name](big)
    binary = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}
    for name, f in binary.items():
        yield name, [x, pos], f(x, pos)
        yield name, [x, row], f(x, row)  # broadcast along the rows


# Where PyTorch 1.13's own bfloat16 kernel rounds to bfloat16 between the steps of the op (measured here:
# its tanh-GELU is a chain of bfloat16 operations; layer_norm and log_softmax round an intermediate; `s / x`
# is reciprocal(x) * s, two ops), the expected values are instead PyTorch's float32 op on the widened
# input (a scalar rounded to bfloat16 first, as PyTorch casts it), rounded once: the rule every other op
# here follows and scratchgrad applies to all (docs/precision.md).
S17 = float(torch.tensor(1.7).to(torch.bfloat16))
ROUNDED_BETWEEN_STEPS = {
    "gelu_tanh": lambda a: F.gelu(a, approximate="tanh"),
    "layer_norm": lambda a: F.layer_norm(a, (a.shape[-1],)),
    "log_softmax": lambda a: torch.log_softmax(a, -1),
    "rdiv_1.7": lambda a: a.reciprocal() * S17,
}


def write_ops():
    with open(os.path.join(OUT_DIR, "ops.txt"), "w") as f:
        f.write("# bfloat16 ops, torch %s\n" % torch.__version__)
        for name, inputs, out in ops_cases():
            if name in ROUNDED_BETWEEN_STEPS:
                once = ROUNDED_BETWEEN_STEPS[name](inputs[0].float()).to(torch.bfloat16)
                differ = int((once.view(torch.int16) != out.view(torch.int16)).sum())
                f.write("# %s: float32 op rounded once; torch's bfloat16 kernel differs in %d of %d values\n"
                        % (name, differ, out.numel()))
                out = once
            f.write("case %s\n" % name)
            for t in inputs:
                f.write(tensor_line("in", t) + "\n")
            f.write(tensor_line("out", out) + "\n")
            f.write("end\n")


def write_print():
    gen = torch.Generator().manual_seed(3)
    cases = [
        ("small", torch.tensor([1.0, 2.5, -0.3, 1e-2]), False),
        ("integers", torch.tensor([[1.0, 2.0], [-3.0, 400.0]]), False),
        ("scientific", torch.tensor([1e-6, 3.0, 2e5]), False),
        ("scalar", torch.tensor(0.1), False),
        ("grad", torch.randn(2, 3, generator=gen), True),
        ("special", torch.tensor([float("nan"), float("inf"), -1.5]), False),
        ("wide", torch.randn(3, 30, generator=gen) * 100, False),
        ("long", torch.randn(2000, generator=gen), False),
        ("empty", torch.zeros(0, 3), False),
    ]
    with open(os.path.join(OUT_DIR, "print.txt"), "w") as f:
        f.write("# str() of bfloat16 tensors, torch %s\n" % torch.__version__)
        for name, values, grad in cases:
            t = values.to(torch.bfloat16)
            f.write("case %s\n" % name)
            f.write(tensor_line("in", t) + "\n")
            if grad:
                t.requires_grad_(True)
            text = str(t).split("\n")
            f.write("grad %d\n" % int(grad))
            f.write("expected %d\n" % len(text))
            for line in text:
                f.write(line + "\n")
            f.write("end\n")


def hex32(v):
    h = float.hex(v)
    if "p" not in h:
        return h
    mant, exp = h.split("p")
    return "%sp%s" % (mant.rstrip("0").rstrip("."), exp)


def fixture_line(name, t):
    t = t.detach()
    if t.dtype.is_floating_point:
        kind, vals = "tensor", [hex32(float(v)) for v in t.float().reshape(-1).tolist()]
    else:
        kind, vals = "itensor", [str(int(v)) for v in t.reshape(-1).tolist()]
    return " ".join([kind, name, str(t.dim())] + [str(d) for d in t.shape] + vals)


def write_autocast():
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import make_gpt_fixtures as book  # the GPT, its config and seed (nothing runs on import)

    lines = ["# torch.autocast('cpu', dtype=torch.bfloat16), torch %s, 1 thread" % torch.__version__]
    gen = torch.Generator().manual_seed(4)
    lin = torch.nn.Linear(20, 7)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(7, 20, generator=gen) * 0.3)
        lin.bias.copy_(torch.randn(7, generator=gen))
    x = torch.randn(5, 20, generator=gen).requires_grad_()
    c = torch.randn(5, 7, generator=gen)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = lin(x)
    assert y.dtype == torch.bfloat16
    (y.float() * c).sum().backward()
    def rounded(t):
        return t.detach().to(torch.bfloat16).float()

    g, xr, wr = rounded(c), rounded(x), rounded(lin.weight)
    lines += ["linear", fixture_line("x", x), fixture_line("weight", lin.weight), fixture_line("bias", lin.bias),
              fixture_line("c", c), fixture_line("y", y), fixture_line("grad.weight", rounded(g.t() @ xr)),
              fixture_line("grad.bias", rounded(g.sum(0))), fixture_line("grad.x", rounded(g @ wr)),
              fixture_line("torch.grad.weight", lin.weight.grad), fixture_line("torch.grad.bias", lin.bias.grad),
              fixture_line("torch.grad.x", x.grad)]

    model = book.build_model()
    cfg = book.GPT_CONFIG
    lines.append("gpt")
    lines.append("config " + " ".join("%s %s" % (k, int(v) if isinstance(v, bool) else v) for k, v in cfg.items()))
    xb = torch.randint(0, cfg["vocab_size"], (4, 12), generator=gen)
    yb = torch.randint(0, cfg["vocab_size"], (4, 12), generator=gen)
    lines += [fixture_line("xb", xb), fixture_line("yb", yb)]
    for tag, autocast in (("bf16", True), ("f32", False)):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = model(xb)
            loss = F.cross_entropy(logits.flatten(0, 1), yb.flatten())
        loss.backward()
        lines.append("loss.%s %s" % (tag, hex32(loss.item())))
        for name, p in model.named_parameters():
            lines.append(fixture_line("%s.%s" % (tag, name), p.grad))
        model.zero_grad(set_to_none=True)
    lines.append("end")
    with open(os.path.join(OUT_DIR, "autocast.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def generate():
    assert os.environ.get("ATEN_CPU_CAPABILITY") == "default"
    os.makedirs(OUT_DIR, exist_ok=True)
    torch.set_num_threads(1)
    write_convert()
    write_ops()
    write_print()
    write_autocast()


if __name__ == "__main__":
    import subprocess
    import sys
    if os.environ.get("ATEN_CPU_CAPABILITY") == "default":
        generate()
    else:
        subprocess.run([sys.executable, os.path.abspath(__file__)], env=dict(os.environ, ATEN_CPU_CAPABILITY="default"),
                       check=True)
