"""seq2seq's forward fills `outputs = torch.zeros(...)` made on the CPU and returns it; the loop takes a view of it
(`output[1:].view(-1, dim)`) and the loss dies mixing it with the target on the device. The crash's origin was not
named: the view is no tensor the forward made (trial 10)."""

import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"


class Decoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.step = nn.Linear(4, 6)

    def forward(self, src: torch.Tensor) -> torch.Tensor:
        outputs = torch.zeros(src.shape[0], src.shape[1], 6)  # MARK made
        for t in range(src.shape[0]):
            outputs[t] = self.step(src[t])
        return outputs


model = Decoder().to(device)
criterion = nn.CrossEntropyLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(4):
    src = torch.randn(5, 3, 4, device=device)
    trg = torch.randint(0, 6, (5, 3), device=device)
    output = model(src)
    output = output[1:].view(-1, 6)
    loss = criterion(output, trg[1:].reshape(-1))  # MARK crash
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done")
