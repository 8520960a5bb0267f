"""The annotated transformer's collate_batch: the collate_fn tokenizes in Python and builds the batch on the GPU
(`device=` in collate). The loop waits for the loader, but the usual advice (num_workers) applied as it stands kills
the job: a worker process cannot use CUDA. The fix says so first; and the stand-in's compute inside the wait is not
counted as waiting."""

import random

import torch
from torch import nn
from torch.utils.data import DataLoader

device = "cuda" if torch.cuda.is_available() else "cpu"
random.seed(0)
sentences = [" ".join(random.choice("abcdefgh") * random.randint(1, 6) for _ in range(20)) for _ in range(4096)]
vocab: dict[str, int] = {}


def collate(batch: list[str]) -> torch.Tensor:
    rows = []
    for s in batch:
        ids = [vocab.setdefault(w, len(vocab) % 1000) for w in s.split() for _ in range(160)][:128]
        rows.append(torch.tensor(ids + [0] * (128 - len(ids)), device=device))
    return torch.stack(rows)


loader = DataLoader(sentences, batch_size=32, shuffle=True, collate_fn=collate)  # MARK input-pipeline-bound
model = nn.Sequential(nn.Embedding(1000, 32), nn.Flatten(), nn.Linear(32 * 128, 2)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x in loader:
    loss = model(x).logsumexp(-1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
