"""torch.compile (fullgraph) of a step that calls `torch.binary_cross_entropy_with_logits` and `torch.kl_div`
directly, first compiled while gputriage's loss wrappers stand in for them: a user trial's job crashed after the
window, Dynamo's table of torch functions knowing the wrapper and not the function put back."""

import torch

torch.manual_seed(0)
lin = torch.nn.Linear(8, 4)
opt = torch.optim.SGD(lin.parameters(), lr=0.1)


def loss_fn(x):
    out = lin(x)
    bce = torch.binary_cross_entropy_with_logits(out, torch.ones_like(out)).mean()
    kl = torch.kl_div(out.log_softmax(-1), torch.full_like(out, 0.25), reduction=1)
    return bce + kl


step_loss = torch.compile(loss_fn, fullgraph=True, backend="eager")
for step in range(6):
    loss = step_loss(torch.randn(16, 8))
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, f"{loss.item():.6f}")
