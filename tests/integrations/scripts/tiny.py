"""The pieces the plain loops and the framework tests share, so that both train exactly the same job.

The dataset stands in for decoding images in the main process: each sample takes SAMPLE_DELAY_S, and the loaders use
`num_workers=0`. That is Lightning's "few workers" case, made measurable: the step waits for data.
"""

import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

# Large next to the tiny models' compute even on a busy 2-core machine, so the verdict does not depend on load.
SAMPLE_DELAY_S = 0.05
SAMPLES = 24
BATCH_SIZE = 4
STEPS = SAMPLES // BATCH_SIZE
SEQ_LEN = 8
VOCAB = 64


class SlowVectors(Dataset):
    """(features, class) pairs for the MLP."""

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        time.sleep(SAMPLE_DELAY_S)
        return torch.randn(16), index % 4


class SlowTokens(Dataset):
    """Tokenised sentences with a label, as a Hugging Face model takes them."""

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        time.sleep(SAMPLE_DELAY_S)
        ids = torch.randint(0, VOCAB, (SEQ_LEN,), generator=torch.Generator().manual_seed(index))
        mask = torch.ones(SEQ_LEN, dtype=torch.long)
        return {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor(index % 2)}


def mlp_loader() -> DataLoader:
    return DataLoader(SlowVectors(), batch_size=BATCH_SIZE, num_workers=0)


def token_loader() -> DataLoader:
    return DataLoader(SlowTokens(), batch_size=BATCH_SIZE, num_workers=0)


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


def tiny_bert():  # transformers is imported here only, by the scripts that use it
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=SEQ_LEN * 2,
        num_labels=2,
    )
    torch.manual_seed(0)
    return BertForSequenceClassification(config)
