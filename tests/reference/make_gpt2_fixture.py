#!/usr/bin/python3
"""Write the GPT-2 import fixtures under tests/reference/fixtures/gpt2/ (issue 35).

  tiny_gpt2.safetensors   a small GPT-2 with random weights in Hugging Face's layout and names: wte, wpe,
                          h.N.ln_1, h.N.attn.c_attn (q, k, v fused, Conv1D-style [in, out]), h.N.attn.c_proj,
                          h.N.ln_2, h.N.mlp.c_fc, h.N.mlp.c_proj, ln_f; no head (it is tied to wte); and the
                          causal-mask buffer h.N.attn.bias that older conversions carry. __metadata__ holds
                          "format": "pt" as Hugging Face's files do, and "n_head" (the shapes do not say it).
  tiny_gpt2_llmc.bin      the same weights in llm.c's checkpoint format (train_gpt2.c's gpt2_build_from_checkpoint):
                          256 int32 of header (magic 20240326, version 3, maxT, V, L, NH, C, padded V), then
                          float32 wte (padded to 64 rows with zeros), wpe, and each kind of tensor for all
                          layers in turn (ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb,
                          fcprojw, fcprojb), then lnfw, lnfb; weights as nn.Linear stores them, [out, in].
  tiny_gpt2_logits.safetensors
                          "ids" (int64 [2, 16]) and "logits" (float32 [2, 16, vocab]): the forward of GPT-2
                          written below from the architecture (pre-LN blocks, GELU in its tanh form,
                          LayerNorm eps 1e-5, logits = ln_f(x) @ wteᵀ), in float32 on one thread.

The safetensors format is written here with struct and json (8-byte little-endian header length, the JSON
header, the raw data), so the `safetensors` module is not needed.
Run with the Debian PyTorch:  /usr/bin/python3 tests/reference/make_gpt2_fixture.py
"""
import json
import math
import os
import struct

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "gpt2")

VOCAB, CONTEXT, DIM, HEADS, LAYERS = 50, 16, 32, 4, 2
EPS = 1e-5


def random_weights(g):
    """Hugging Face's names and layouts. Larger than GPT-2's 0.02 initial spread, so the logits differ
    clearly from one token to the next and a wrong transpose or split cannot hide."""
    def randn(*shape, std):
        return (torch.randn(*shape, generator=g) * std).float()

    w = {"wte.weight": randn(VOCAB, DIM, std=0.5), "wpe.weight": randn(CONTEXT, DIM, std=0.3)}
    for i in range(LAYERS):
        p = f"h.{i}."
        w[p + "ln_1.weight"] = 1 + randn(DIM, std=0.1)
        w[p + "ln_1.bias"] = randn(DIM, std=0.1)
        w[p + "attn.bias"] = torch.tril(torch.ones(CONTEXT, CONTEXT)).view(1, 1, CONTEXT, CONTEXT)
        w[p + "attn.c_attn.weight"] = randn(DIM, 3 * DIM, std=0.3)   # Conv1D: [in, out]
        w[p + "attn.c_attn.bias"] = randn(3 * DIM, std=0.1)
        w[p + "attn.c_proj.weight"] = randn(DIM, DIM, std=0.2)
        w[p + "attn.c_proj.bias"] = randn(DIM, std=0.1)
        w[p + "ln_2.weight"] = 1 + randn(DIM, std=0.1)
        w[p + "ln_2.bias"] = randn(DIM, std=0.1)
        w[p + "mlp.c_fc.weight"] = randn(DIM, 4 * DIM, std=0.2)
        w[p + "mlp.c_fc.bias"] = randn(4 * DIM, std=0.1)
        w[p + "mlp.c_proj.weight"] = randn(4 * DIM, DIM, std=0.1)
        w[p + "mlp.c_proj.bias"] = randn(DIM, std=0.1)
    w["ln_f.weight"] = 1 + randn(DIM, std=0.1)
    w["ln_f.bias"] = randn(DIM, std=0.1)
    return w


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def layer_norm(x, weight, bias):
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(var + EPS) * weight + bias


def conv1d(x, w, prefix):
    """Hugging Face's Conv1D: y = x @ W + b with W stored [in, out] (the transpose of nn.Linear's)."""
    return x @ w[prefix + ".weight"] + w[prefix + ".bias"]


def gpt2_forward(w, ids):
    b, t = ids.shape
    x = w["wte.weight"][ids] + w["wpe.weight"][torch.arange(t)]
    head_dim = DIM // HEADS
    future = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
    for i in range(LAYERS):
        p = f"h.{i}."
        h = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"])
        q, k, v = conv1d(h, w, p + "attn.c_attn").split(DIM, dim=-1)
        q, k, v = (z.view(b, t, HEADS, head_dim).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(head_dim)
        att = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        a = (att @ v).transpose(1, 2).contiguous().view(b, t, DIM)
        x = x + conv1d(a, w, p + "attn.c_proj")
        h = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"])
        x = x + conv1d(gelu_tanh(conv1d(h, w, p + "mlp.c_fc")), w, p + "mlp.c_proj")
    x = layer_norm(x, w["ln_f.weight"], w["ln_f.bias"])
    return x @ w["wte.weight"].t()  # the head is tied to the token embedding


def write_safetensors(path, tensors, metadata):
    codes = {torch.float32: "F32", torch.int64: "I64"}
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        data = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": codes[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    print("wrote", path, os.path.getsize(path), "bytes")


def write_llmc(path, w):
    padded_vocab = 64
    header = [0] * 256
    header[:8] = [20240326, 3, CONTEXT, VOCAB, LAYERS, HEADS, DIM, padded_vocab]
    wte = torch.zeros(padded_vocab, DIM)
    wte[:VOCAB] = w["wte.weight"]
    parts = [wte, w["wpe.weight"]]
    linear = lambda name: w[name].t()  # Conv1D [in, out] -> Linear [out, in]
    kinds = [("ln_1.weight", None), ("ln_1.bias", None), ("attn.c_attn.weight", linear), ("attn.c_attn.bias", None),
             ("attn.c_proj.weight", linear), ("attn.c_proj.bias", None), ("ln_2.weight", None), ("ln_2.bias", None),
             ("mlp.c_fc.weight", linear), ("mlp.c_fc.bias", None), ("mlp.c_proj.weight", linear),
             ("mlp.c_proj.bias", None)]
    for kind, transform in kinds:
        for i in range(LAYERS):
            name = f"h.{i}.{kind}"
            parts.append(transform(name) if transform else w[name])
    parts += [w["ln_f.weight"], w["ln_f.bias"]]
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        for t in parts:
            f.write(t.contiguous().float().numpy().tobytes())
    print("wrote", path, os.path.getsize(path), "bytes")


def main():
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(35)
    w = random_weights(g)
    ids = torch.randint(0, VOCAB, (2, CONTEXT), generator=g)
    with torch.no_grad():
        logits = gpt2_forward(w, ids)
    os.makedirs(OUT, exist_ok=True)
    write_safetensors(os.path.join(OUT, "tiny_gpt2.safetensors"), w, {"format": "pt", "n_head": str(HEADS)})
    write_llmc(os.path.join(OUT, "tiny_gpt2_llmc.bin"), w)
    write_safetensors(os.path.join(OUT, "tiny_gpt2_logits.safetensors"), {"ids": ids, "logits": logits.contiguous()},
                      {"source": "tests/reference/make_gpt2_fixture.py"})


if __name__ == "__main__":
    main()
