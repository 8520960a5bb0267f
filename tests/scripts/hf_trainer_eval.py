"""transformers' Trainer with an evaluation each epoch on a slow dataset: the Trainer builds both DataLoaders (through
accelerate) and fetches the evaluation's batches with autograd on; the fix is TrainingArguments'."""

import time

import torch
from torch import nn
from torch.utils.data import Dataset
from transformers import Trainer, TrainingArguments


class Rows(Dataset):
    def __init__(self, n, delay_s):
        self.x, self.y, self.delay_s = torch.randn(n, 16), torch.randint(0, 4, (n,)), delay_s

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        time.sleep(self.delay_s)
        return {"x": self.x[i], "labels": self.y[i]}


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(16, 4)

    def forward(self, x, labels=None):
        logits = self.net(x)
        return {"loss": nn.functional.cross_entropy(logits, labels), "logits": logits}


torch.manual_seed(0)
args = TrainingArguments(
    output_dir="hf-out",
    per_device_train_batch_size=16,
    per_device_eval_batch_size=16,
    num_train_epochs=3,
    eval_strategy="epoch",
    report_to=[],
    use_cpu=True,
    save_strategy="no",
    disable_tqdm=True,
    seed=0,
)
Trainer(model=Tiny(), args=args, train_dataset=Rows(320, 0.0), eval_dataset=Rows(160, 0.004)).train()
