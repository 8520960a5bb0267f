"""Hogwild on CUDA (pytorch/examples mnist_hogwild --cuda): a model on the device, shared with spawned processes.
CUDA passes its tensors by IPC handles; the preflight's stand-in cannot, and must say so, not blame the script."""

import torch
import torch.multiprocessing as mp
from torch import nn


def train(model):
    print("child sum", float(model.weight.sum()))


if __name__ == "__main__":
    mp.set_start_method("spawn")
    model = nn.Linear(4, 2).to("cuda" if torch.cuda.is_available() else "cpu")
    model.share_memory()
    worker = mp.Process(target=train, args=(model,))
    worker.start()  # MARK spawn
    worker.join()
