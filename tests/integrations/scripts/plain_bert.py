"""The plain loop that tests/integrations/test_hf.py trains through `Trainer`: same data, model, optimizer."""

import torch
from tiny import tiny_bert, token_loader

model = tiny_bert()
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for batch in token_loader():
    loss = model(**batch).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
