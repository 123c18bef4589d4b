import torch
import torch.nn as nn
import torch.nn.functional as F

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

model = MiniSelfAttention()
opt = torch.optim.Adam(model.parameters(), lr=0.01)

def batch():
    i = torch.randint(0, len(data) - T - 1, (16,))
    xb = torch.stack([data[j:j+T] for j in i])
    yb = torch.stack([data[j+1:j+T+1] for j in i])
    return xb, yb

for step in range(301):
    xb, yb = batch()
    logits = model(xb)
    loss = F.cross_entropy(logits.view(-1, V), yb.view(-1))
    opt.zero_grad(); loss.backward(); opt.step()
    if step % 100 == 0:
        print(f"step {step:>3} | loss {loss.item():.3f}")

# Greedy generation from a seed
idx = torch.tensor([[stoi[c] for c in "aditi li"]])
for _ in range(14):
    logits = model(idx[:, -T:])
    nxt = logits[:, -1, :].argmax(-1, keepdim=True)
    idx = torch.cat([idx, nxt], dim=1)
print("generated:", "".join(itos[i] for i in idx[0].tolist()))
