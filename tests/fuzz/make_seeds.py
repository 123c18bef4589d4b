#!/usr/bin/env python3
"""make_seeds.py SCRATCHGRAD — writes the seed corpora in tests/fuzz/corpus/ (what is committed there).

SCRATCHGRAD is a built scratchgrad command line: the real checkpoints are written by `train --save`.
Every other seed is made here from those, or from scratch, so each is small and says what it is.
"""
import os, random, struct, subprocess, sys, tempfile

here = os.path.dirname(os.path.abspath(__file__))
scratchgrad = os.path.abspath(sys.argv[1])
rng = random.Random(17)

def put(target, name, data):
    d = os.path.join(here, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())

def safetensors(header_json, data=b""):
    h = header_json.encode()
    return struct.pack("<Q", len(h)) + h + data

def patched(data, old, new, count=-1):
    """data with `old` replaced by `new` (`count` times; -1: all) in its header, and the header length fixed to match"""
    n = struct.unpack("<Q", data[:8])[0]
    header = data[8 : 8 + n].replace(old, new, count)
    return struct.pack("<Q", len(header)) + header + data[8 + n :]

# ---- real checkpoints of both models (small sizes)
tmp = tempfile.mkdtemp()
text = os.path.join(tmp, "text.txt")
with open(text, "w") as f:
    f.write("the quick brown fox jumps over the lazy dog.\n")
mini, gpt = os.path.join(tmp, "mini.safetensors"), os.path.join(tmp, "gpt.safetensors")
run = lambda *a: subprocess.run([scratchgrad, "train", "--text", text, "--steps", "2", "--batch", "2", "--eval-every", "1",
                                 "--sample", "2", *a], check=True, stdout=subprocess.DEVNULL)
run("--dim", "4", "--context", "3", "--save", mini)
run("--model", "gpt", "--layers", "1", "--dim", "4", "--heads", "2", "--context", "3", "--warmup", "1", "--save", gpt)
real = {"mini": open(mini, "rb").read(), "gpt": open(gpt, "rb").read()}

for target in ("safetensors", "checkpoint"):
    for model, data in real.items():
        put(target, f"{model}.safetensors", data)
        put(target, f"{model}-truncated.safetensors", data[: len(data) - 5])
        n = struct.unpack("<Q", data[:8])[0]
        put(target, f"{model}-header-too-long.safetensors", struct.pack("<Q", n + 1000) + data[8:])
        flipped = bytearray(data)
        flipped[8 + n // 2] ^= 0x20
        put(target, f"{model}-flipped-header-byte.safetensors", bytes(flipped))

    # metadata that lies about the model
    put(target, "metadata-huge-dim.safetensors",
        patched(real["mini"], b'"dim":"4"', b'"dim":"99999999999"'))

put("safetensors", "empty.safetensors", b"")
put("safetensors", "short.safetensors", b"\x05\x00\x00")
put("safetensors", "not-json.safetensors", safetensors("{not json"))
put("safetensors", "wrapping-shape.safetensors",
    safetensors('{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}'))
put("safetensors", "bool.safetensors", safetensors('{"m":{"dtype":"BOOL","shape":[2,2],"data_offsets":[0,4]}}', b"\x00\x01\x01\x00"))
put("safetensors", "bool-not-0-or-1.safetensors", safetensors('{"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}}', b"\x00\x07"))
put("safetensors", "i64-f64-scalar.safetensors",
    safetensors('{"i":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},"d":{"dtype":"F64","shape":[],"data_offsets":[8,16]},'
                '"__metadata__":{"k":"v"}}', struct.pack("<q", -3) + struct.pack("<d", 2.5)))
put("safetensors", "overlap.safetensors",
    safetensors('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}',
                bytes(12)))
put("safetensors", "unknown-dtype.safetensors", safetensors('{"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}', bytes(4)))
put("checkpoint", "no-format.safetensors", real["mini"].replace(b'"format"', b'"formax"'))
put("checkpoint", "gpt-zero-layers.safetensors", real["gpt"].replace(b'"layers":"1"', b'"layers":"0"'))
put("checkpoint", "gpt-many-layers.safetensors", real["gpt"].replace(b'"layers":"1"', b'"layers":"9"'))
put("checkpoint", "bad-vocab.safetensors", patched(real["mini"], b'"vocab":"', b'"vocab":"\\u00ff\\ud800'))

# ---- text files
# crafted headers (issue 32): JSON nested far deeper than the header-depth limit, with a checksum key
# (whose check dumps the JSON) in a file of its own and in a tensor entry of a real checkpoint; bytes
# that no tensor covers; a header longer than its file; a vocabulary holding a character twice
deep = "[" * 5000 + "]" * 5000  # past the limit of 64 (the unit test goes 100,000 deep)
put("safetensors", "deep-nesting.safetensors",
    safetensors('{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":' + deep +
                '},"__metadata__":{"scratchgrad.checksum":"fnv1a64:0000000000000000"}}', bytes(4)))
put("safetensors", "trailing-bytes.safetensors", real["mini"] + bytes(64))
put("safetensors", "header-longer-than-file.safetensors", struct.pack("<Q", 2**40) + b"{}")
put("checkpoint", "gpt-deep-nesting.safetensors",
    patched(real["gpt"], b'"dtype":"F32"', b'"x":' + deep.encode() + b',"dtype":"F32"', 1))
put("checkpoint", "duplicate-vocab.safetensors", patched(real["mini"], b'"vocab":"', b'"vocab":"aa'))

put("text", "workshop.txt", "aditi likes warm dosa ")
put("text", "unicode.txt", "naïve café — 東京 🙂 again and again\n")
put("text", "short.txt", "ab")
put("text", "empty.txt", "")
put("text", "invalid-utf8.txt", b"abc\xff\xfedef")
put("text", "truncated-utf8.txt", b"hello \xe6\x9d")
put("text", "overlong-nul.txt", b"text with \xc0\x80 in it, long enough to train")
put("text", "surrogate.txt", b"text with \xed\xa0\x80 in it, long enough to train")
put("text", "past-unicode.txt", b"text with \xf5\x80\x80\x80 in it, long enough to train")

# ---- command lines: argv after "scratchgrad", NUL-separated
lines = [
    ["train", "--steps", "2", "--batch", "2", "--dim", "4", "--context", "3", "--eval-every", "1", "--sample", "2"],
    ["train", "--model", "gpt", "--preset", "tiny", "--steps", "2", "--dim", "4", "--layers", "1", "--heads", "2",
     "--context", "4", "--batch", "2", "--warmup", "1", "--text", "text.txt"],
    ["train", "--text", "text.txt", "--steps", "1", "--dim", "8", "--heads", "3"],
    ["train", "--steps", "0"], ["train", "--lr", "nan"], ["train", "--device", "cuda"], ["train", "--preset", "tiny"],
    ["train", "--resume", "gpt.safetensors"], ["train", "--save-every", "1", "--steps", "2"],
    ["train", "--text", "/"], ["train", "--steps", "99999999999999999999"],
    ["generate", "--checkpoint", "mini.safetensors", "--tokens", "5"],
    ["generate", "--checkpoint", "gpt.safetensors", "--prompt", "the", "--tokens", "4", "--temperature", "0.8", "--top-k", "2"],
    ["generate", "--checkpoint", "mini.safetensors", "--prompt", "Z"],
    ["generate", "--checkpoint", "."], ["info", "--checkpoint", "gpt.safetensors"], ["info"], ["--help"], ["train", "--help"],
    ["bogus"], [],
]
for i, line in enumerate(lines):
    put("cli", f"line-{i:02d}", "\0".join(line))

# ---- op programs: two leaves [2, 3] and [3, 2], then one op of each kind, then random bytes
KINDS = 26
for kind in range(KINDS):
    for variant in range(2):
        b = [1, 2, 2, 3] + [rng.randrange(256) for _ in range(6)] + [2, 3, 2] + [rng.randrange(256) for _ in range(6)]
        b += [kind, variant, 1 - variant] + [rng.randrange(256) for _ in range(12)]
        b += [rng.randrange(256) for _ in range(24 * variant)]
        put("ops", f"op-{kind:02d}-{variant}", bytes(b))
