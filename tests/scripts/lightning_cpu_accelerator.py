"""Lightning's examples' shape: the Trainer places the model and every batch, and it was told to use the CPU
(`accelerator="cpu"`, left from a debugging run). The script has no .to() of its own: the fix is the Trainer's keyword,
at the line that builds the Trainer."""

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Classifier(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


data = TensorDataset(torch.randn(640, 32), torch.randint(0, 4, (640,)))
trainer = L.Trainer(  # MARK data-on-cpu
    accelerator="cpu", devices=1, max_epochs=1, logger=False, enable_checkpointing=False
)
trainer.fit(Classifier(), DataLoader(data, batch_size=32))
print("trained")
