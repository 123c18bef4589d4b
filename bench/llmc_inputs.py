#!/usr/bin/env python3
"""Write the inputs llm.c's CPU trainer (train_gpt2.c) reads from its working directory, so that it can be
timed next to bench_gpt2_train without a download (bench/gpt2_train.sh, bench/llmc_build.sh):

  gpt2_124M.bin        the model, in llm.c's checkpoint format: 256 int32 of header (magic 20240326,
                       version 3 = float32, maxT 1024, V 50257, L 12, NH 12, C 768, padded V 50304), then the
                       float32 parameters in llm.c's order: wte (padded to 50304 rows, the padding zero), wpe,
                       then each kind of tensor for all 12 layers in turn (ln1w, ln1b, qkvw, qkvb, attprojw,
                       attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb), then lnfw, lnfb; matrices [out, in].
                       Random weights as bench_gpt2_train makes them: the matrices (wte and wpe included)
                       N(0, 0.02), the biases 0, the LayerNorm gains 1.
  dev/data/tinyshakespeare/tiny_shakespeare_train.bin, ..._val.bin
                       the token files (llmc/dataloader.h): 256 int32 of header (magic 20240520, version 1,
                       the number of tokens), then the tokens as uint16; random ids below 50257.
  gpt2_tokenizer.bin   the decoder table train_gpt2.c samples with every 20 steps (llmc/tokenizer.h): 256 uint32
                       of header (magic 20240328, version 2, 50257 tokens, end-of-text id 50256), then each
                       token as a length byte and its bytes. The real GPT-2 table is not here: token i is
                       written as the text "<i>". Without the file train_gpt2.c would sample from an
                       uninitialised end-of-text id at step 20.

  python3 bench/llmc_inputs.py DIR

Uses numpy when it is installed (a few seconds); otherwise plain Python's random (about a minute).
"""
import array
import os
import random
import struct
import sys

MAX_T, V, L, NH, C = 1024, 50257, 12, 12, 768
VP = 50304  # V padded to a multiple of 128, as llm.c pads it
TRAIN_TOKENS, VAL_TOKENS = 65536, 16384
SEED = 1337


def header(*values):
    """256 little-endian int32, the given values first, the rest zero."""
    return struct.pack("<256i", *values, *([0] * (256 - len(values))))


def llmc_tensors():
    """(name, shape, kind) in llm.c's order; kind: 'normal' (a matrix), 'zeros' (a bias), 'ones' (a gain)."""
    layered = [("ln1w", (C,), "ones"), ("ln1b", (C,), "zeros"),
               ("qkvw", (3 * C, C), "normal"), ("qkvb", (3 * C,), "zeros"),
               ("attprojw", (C, C), "normal"), ("attprojb", (C,), "zeros"),
               ("ln2w", (C,), "ones"), ("ln2b", (C,), "zeros"),
               ("fcw", (4 * C, C), "normal"), ("fcb", (4 * C,), "zeros"),
               ("fcprojw", (C, 4 * C), "normal"), ("fcprojb", (C,), "zeros")]
    yield "wte", (V, C), "normal"
    yield "wte_padding", (VP - V, C), "zeros"
    yield "wpe", (MAX_T, C), "normal"
    for name, shape, kind in layered:
        yield name, (L, *shape), kind
    yield "lnfw", (C,), "ones"
    yield "lnfb", (C,), "zeros"


def float32_bytes(count, kind, rng):
    try:
        import numpy as np
        if kind == "normal":
            return (np.random.default_rng(rng.getrandbits(32)).standard_normal(count, dtype=np.float32)
                    * np.float32(0.02)).astype("<f4").tobytes()
        return np.full(count, 1.0 if kind == "ones" else 0.0, dtype="<f4").tobytes()
    except ImportError:
        if kind == "normal":
            values = array.array("f", (rng.gauss(0.0, 0.02) for _ in range(count)))
        else:
            values = array.array("f", [1.0 if kind == "ones" else 0.0]) * count
        if sys.byteorder != "little":
            values.byteswap()
        return values.tobytes()


def write_model(path, rng):
    with open(path, "wb") as f:
        f.write(header(20240326, 3, MAX_T, V, L, NH, C, VP))
        for _name, shape, kind in llmc_tensors():
            count = 1
            for n in shape:
                count *= n
            f.write(float32_bytes(count, kind, rng))


def write_tokens(path, count, rng):
    tokens = array.array("H", (rng.randrange(V) for _ in range(count)))
    if sys.byteorder != "little":
        tokens.byteswap()
    with open(path, "wb") as f:
        f.write(header(20240520, 1, count))
        f.write(tokens.tobytes())


def write_tokenizer(path):
    with open(path, "wb") as f:
        f.write(struct.pack("<256I", 20240328, 2, V, V - 1, *([0] * 252)))
        for i in range(V):
            text = f"<{i}>".encode()
            f.write(bytes([len(text)]) + text)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: python3 bench/llmc_inputs.py DIR")
    out = sys.argv[1]
    data = os.path.join(out, "dev", "data", "tinyshakespeare")
    os.makedirs(data, exist_ok=True)
    rng = random.Random(SEED)
    write_model(os.path.join(out, "gpt2_124M.bin"), rng)
    write_tokens(os.path.join(data, "tiny_shakespeare_train.bin"), TRAIN_TOKENS, rng)
    write_tokens(os.path.join(data, "tiny_shakespeare_val.bin"), VAL_TOKENS, rng)
    write_tokenizer(os.path.join(out, "gpt2_tokenizer.bin"))
    print(f"llmc_inputs: wrote gpt2_124M.bin, gpt2_tokenizer.bin and dev/data/tinyshakespeare/ under {out}")


if __name__ == "__main__":
    main()
