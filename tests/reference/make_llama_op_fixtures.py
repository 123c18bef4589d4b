#!/usr/bin/python3
"""Write tests/reference/fixtures/llama/ops.txt: the Llama family's ops, as Hugging Face's modules compute
them, in float32 on PyTorch's CPU kernels.

  silu            F.silu forward and backward
  rms_norm        LlamaRMSNorm's forward, written from its description: x.pow(2).mean(-1, keepdim=True),
                  x * torch.rsqrt(variance + eps), weight * x; and autograd's backward through those ops
  rotary          apply_rotary_pos_emb's q * cos + rotate_half(q) * sin, forward and backward, with the
                  cos/sin of rope_tables below for positions start .. start+T-1
  rope_tables     inv_freq = 1 / theta ** (arange(0, d, 2).float() / d), optionally rescaled as
                  rope_scaling type "llama3" (Llama 3.1/3.2) rescales it; then the cos and sin of
                  position_ids.float() times inv_freq (Hugging Face's float32 matrix product)

No transformers package: the formulas are re-implemented from their description.
Run with the Debian PyTorch:  /usr/bin/python3 tests/reference/make_llama_op_fixtures.py
Like make_gpt_fixtures.py the script re-runs itself under ATEN_CPU_CAPABILITY=default (PyTorch's portable
kernels: plain loops, glibc libm, no fused multiply-add) and one thread; only that capability is written.
The format is that of fixtures/gpt/README.md; fixtures/llama/README.md lists the cases.
"""
import math
import os
import subprocess
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "llama")
CAPABILITY = "default"


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
    """`tensor NAME NDIM D0 D1 ... V0 V1 ...` (float32 values, hex)."""
    t = t.detach()
    assert t.dtype == torch.float32, name
    vals = [hex32(float(v)) for v in t.reshape(-1).tolist()]
    return " ".join(["tensor", name, str(t.dim())] + [str(d) for d in t.shape] + vals)


# --------------------------------------------------------------------------- the formulas
def rms_norm(x, weight, eps):
    """LlamaRMSNorm: the mean of squares over the last dim, its reciprocal square root, the weight."""
    variance = x.pow(2).mean(-1, keepdim=True)
    normed = x * torch.rsqrt(variance + eps)
    return normed if weight is None else weight * normed


def rotate_half(x):
    """(x1, x2) -> (-x2, x1) for the two halves of the last dim."""
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def default_inv_freq(head_dim, theta):
    return 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))


def llama3_inv_freq(inv_freq, factor, low_freq_factor, high_freq_factor, original_max):
    """rope_scaling type "llama3": wavelengths 2*pi/f longer than original_max/low_freq_factor are divided
    by factor, those shorter than original_max/high_freq_factor kept, and those in between blended with
    smooth = (original_max/wavelen - low) / (high - low): (1 - smooth) * f / factor + smooth * f."""
    low_freq_wavelen = original_max / low_freq_factor
    high_freq_wavelen = original_max / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    slowed = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (original_max / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * slowed / factor + smooth * slowed
    medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(medium, smoothed, slowed)


def rope_tables(inv_freq, start, count):
    """cos and sin [count, h] of position * inv_freq: Hugging Face multiplies inv_freq [1, h, 1] by the
    positions [1, 1, count] as a float32 matrix product (one product each), then takes cos and sin of
    cat(freqs, freqs); its first half is returned (the second is the same)."""
    positions = torch.arange(start, start + count, dtype=torch.int64)[None, :]
    freqs = (inv_freq[None, :, None].float() @ positions[:, None, :].float()).transpose(1, 2)[0]
    assert torch.equal(freqs, torch.outer(positions[0].float(), inv_freq))
    emb = torch.cat((freqs, freqs), dim=-1)
    h = inv_freq.shape[0]
    return emb.cos()[:, :h].contiguous(), emb.sin()[:, :h].contiguous()


# --------------------------------------------------------------------------- the cases
def make_ops():
    lines = [f"# scratchgrad llama fixture ops.txt: torch {torch.__version__}, float32, "
             f"ATEN_CPU_CAPABILITY={os.environ.get('ATEN_CPU_CAPABILITY')}, {torch.get_num_threads()} thread. "
             f"Written by make_llama_op_fixtures.py; do not edit.",
             "# single ops: each `case` line, then its input and output tensors"]
    g = torch.Generator().manual_seed(48)

    def randn(*shape, scale=1.0, shift=0.0):
        return torch.randn(tuple(shape), generator=g) * scale + shift

    # silu over a spread of values (tails where exp(-x) overflows or vanishes included)
    x = randn(5, 37, scale=6.0)
    x[0, :4] = torch.tensor([-100.0, -90.0, 90.0, 0.0])
    dy = randn(5, 37)
    xr = x.clone().requires_grad_(True)
    y = F.silu(xr)
    y.backward(dy)
    lines += ["case silu", tensor_line("x", x), tensor_line("y", y), tensor_line("dy", dy),
              tensor_line("grad_x", xr.grad)]

    # rms_norm over the last dim: SmolLM2's width 576, odd widths with tails, with and without weight
    for shape, with_weight, eps in [((2, 3, 576), True, 1e-5), ((2, 3, 37), True, 1e-6), ((4, 64), False, 1e-6),
                                    ((2, 2, 200), True, 1e-6), ((1, 1, 7), True, 1e-5)]:
        n = shape[-1]
        x = randn(*shape, scale=1.5, shift=0.25)
        w = randn(n, scale=0.3, shift=1.0) if with_weight else None
        up = randn(*shape)
        xr = x.clone().requires_grad_(True)
        wr = None if w is None else w.clone().requires_grad_(True)
        y = rms_norm(xr, wr, eps)
        y.backward(up)
        lines.append(f"case rms_norm_{'x'.join(map(str, shape))} eps {eps!r} weight {'yes' if with_weight else 'no'}")
        lines.append(tensor_line("x", x))
        if w is not None:
            lines.append(tensor_line("weight", w))
        lines += [tensor_line("y", y), tensor_line("up", up), tensor_line("grad_x", xr.grad)]
        if w is not None:
            lines.append(tensor_line("grad_weight", wr.grad))

    # rotary embedding of q [B, H, T, d] at positions start .. start+T-1
    for shape, theta, start in [((2, 3, 5, 16), 10000.0, 0), ((1, 2, 4, 64), 500000.0, 1000), ((2, 1, 3, 6), 10000.0, 7)]:
        t, d = shape[-2], shape[-1]
        cos, sin = rope_tables(default_inv_freq(d, theta), start, t)
        q = randn(*shape, scale=2.0)
        up = randn(*shape)
        qr = q.clone().requires_grad_(True)
        full_cos, full_sin = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)
        y = qr * full_cos + rotate_half(qr) * full_sin
        y.backward(up)
        lines.append(f"case rotary_{'x'.join(map(str, shape))} theta {theta!r} start {start}")
        lines += [tensor_line("q", q), tensor_line("cos", cos), tensor_line("sin", sin), tensor_line("y", y),
                  tensor_line("up", up), tensor_line("grad_q", qr.grad)]

    # the tables: default and llama3-scaled inverse frequencies, cos and sin at a few offsets
    scalings = {"none": None, "llama3.1": (8.0, 1.0, 4.0, 8192), "llama3.2": (32.0, 1.0, 4.0, 8192)}
    for head_dim, theta, scaling, start, count in [(64, 10000.0, "none", 0, 24), (64, 500000.0, "llama3.2", 0, 24),
                                                   (128, 500000.0, "llama3.1", 8000, 6), (64, 100000.0, "none", 2040, 8),
                                                   (32, 500000.0, "llama3.2", 131000, 3)]:
        inv_freq = default_inv_freq(head_dim, theta)
        if scalings[scaling] is not None:
            inv_freq = llama3_inv_freq(inv_freq, *scalings[scaling])
        cos, sin = rope_tables(inv_freq, start, count)
        label = f"rope_tables_{head_dim}_{scaling}_{start}"
        args = "" if scalings[scaling] is None else \
            " factor {!r} low_freq_factor {!r} high_freq_factor {!r} original_max_position_embeddings {}".format(
                *scalings[scaling])
        lines.append(f"case {label} head_dim {head_dim} theta {theta!r} start {start} count {count} "
                     f"scaling {scaling}{args}")
        lines += [tensor_line("inv_freq", inv_freq), tensor_line("cos", cos), tensor_line("sin", sin)]

    lines.append("end")
    with open(os.path.join(OUT, "ops.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def generate():
    assert os.environ.get("ATEN_CPU_CAPABILITY") == CAPABILITY
    torch.set_num_threads(1)
    os.makedirs(OUT, exist_ok=True)
    make_ops()


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--capability":
        generate()
        return
    env = dict(os.environ, ATEN_CPU_CAPABILITY=CAPABILITY)
    subprocess.run([sys.executable, os.path.abspath(__file__), "--capability", CAPABILITY], env=env, check=True)


if __name__ == "__main__":
    main()
