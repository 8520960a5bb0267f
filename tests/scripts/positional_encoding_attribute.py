"""A transformer language model whose positional encoding keeps its table as a plain tensor attribute.

The pattern of many tutorials: `self.pe = pe` instead of `self.register_buffer("pe", pe)`, so `model.to(device)` moves
every weight but leaves the table on the CPU; on a GPU the first forward dies adding it to the embeddings.
"""

import math
import os

import torch
from torch import nn


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, max_len: int = 512) -> None:
        super().__init__()
        self.dropout = nn.Dropout(p=0.1)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.pe = pe  # MARK model-partly-on-cpu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(x + self.pe[: x.size(0)])


class TransformerModel(nn.Module):
    def __init__(self, ntoken: int, d_model: int = 32) -> None:
        super().__init__()
        self.embedding = nn.Embedding(ntoken, d_model)
        self.pos_encoder = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead=2, dim_feedforward=64)
        self.encoder = nn.TransformerEncoder(layer, num_layers=1)
        self.linear = nn.Linear(d_model, ntoken)

    def forward(self, src: torch.Tensor) -> torch.Tensor:
        src = self.pos_encoder(self.embedding(src) * math.sqrt(32))
        return self.linear(self.encoder(src))


def main() -> None:
    device = torch.device(os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu"))
    model = TransformerModel(ntoken=100).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    for _ in range(6):
        data = torch.randint(0, 100, (16, 4)).to(device)
        targets = torch.randint(0, 100, (16 * 4,)).to(device)
        output = model(data)
        loss = criterion(output.view(-1, 100), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
