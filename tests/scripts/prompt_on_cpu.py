"""A model trained on the device, then asked to generate from a prompt made on the CPU (karpathy's ng-video-lecture
gpt.py without `device=device` on its `context`): the crash is inside the embedding, after the probes' window; the
line to change is the prompt's."""

import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.head = nn.Linear(8, 10)

    def forward(self, idx):
        return self.head(self.emb(idx))

    def generate(self, idx, n):
        for _ in range(n):
            logits = self(idx[:, -4:])
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            idx = torch.cat([idx, nxt], dim=1)
        return idx


model = Tiny().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(8):  # below the preflight's PREFLIGHT_STEPS: a loaded machine must not end the job before generate
    x = torch.randint(0, 10, (4, 6), device=device)
    loss = nn.functional.cross_entropy(model(x).flatten(0, 1), x.flatten())
    opt.zero_grad()
    loss.backward()
    opt.step()
context = torch.zeros((1, 1), dtype=torch.long)  # MARK device-mismatch-error
print(model.generate(context, 5)[0].tolist())
