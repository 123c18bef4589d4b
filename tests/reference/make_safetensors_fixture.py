"""Writes tests/reference/fixtures/safetensors/python.safetensors from torch tensors, following the
safetensors format description (8-byte little-endian header length, JSON header, raw data), so the C++
loader is tested on a file it did not write. Run with /usr/bin/python3."""
import json, os, struct
import torch

tensors = {"weight": torch.tensor([[0.5, -1.0, 2.0], [4.0, 8.0, -16.0]]), "ids": torch.tensor([1, 2, 3])}
codes = {torch.float32: "F32", torch.int64: "I64"}
header, blobs, offset = {"__metadata__": {"source": "torch"}}, [], 0
for name, t in tensors.items():
    data = t.contiguous().numpy().tobytes()
    header[name] = {"dtype": codes[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
    blobs.append(data)
    offset += len(data)
text = json.dumps(header).encode()
text += b" " * ((8 - len(text) % 8) % 8)
out = os.path.join(os.path.dirname(__file__), "fixtures", "safetensors", "python.safetensors")
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
print("wrote", out)
