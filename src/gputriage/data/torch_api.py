"""Names of torch's API that the collectors and the rules both read."""

# Tensor factories: the calls that make a tensor, on the CPU unless given `device=`.
FACTORIES = frozenset(
    {
        "arange",
        "ones",
        "zeros",
        "full",
        "empty",
        "eye",
        "rand",
        "randn",
        "randint",
        "randperm",
        "linspace",
        "logspace",
        "tensor",
        "as_tensor",
        "ones_like",
        "zeros_like",
        "full_like",
        "empty_like",
        "rand_like",
        "randn_like",
        "tril_indices",
        "triu_indices",
    }
)
