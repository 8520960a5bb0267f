"""word_language_model's pattern: the LSTM's hidden state is made from the model's own weights (`weight.new_zeros`),
so it sits wherever the model does. The batches go to the device, the model never does: the hidden state on the CPU
follows the model, and moving the model is the fix (not moving `hidden`)."""

import os

import torch
from torch import nn

device = torch.device(
    os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
)  # written for CUDA; the tests pin meta


class RNNModel(nn.Module):
    def __init__(self, vocab: int = 50, hidden: int = 32) -> None:
        super().__init__()
        self.hidden = hidden
        self.encoder = nn.Embedding(vocab, hidden)
        self.rnn = nn.LSTM(hidden, hidden)
        self.decoder = nn.Linear(hidden, vocab)

    def forward(self, tokens: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, tuple]:
        out, state = self.rnn(self.encoder(tokens), state)
        return self.decoder(out), state

    def init_hidden(self, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        weight = next(self.parameters())
        return weight.new_zeros(1, batch, self.hidden), weight.new_zeros(1, batch, self.hidden)


def main() -> None:
    model = RNNModel()  # MARK model-on-cpu
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(5):
        tokens = torch.randint(0, 50, (12, 4)).to(device)
        targets = torch.randint(0, 50, (12 * 4,)).to(device)
        hidden = model.init_hidden(4)
        output, hidden = model(tokens, hidden)
        loss = nn.functional.cross_entropy(output.view(-1, 50), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
