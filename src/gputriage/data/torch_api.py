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

# Constructors that make a tensor on the CPU and take no `device=` (a legacy typed constructor refuses a CUDA device;
# from_numpy shares the array's host memory): the tensor goes to the device with `.to(device)` after the call.
HOST_CONSTRUCTORS = frozenset(
    {
        "from_numpy",
        "Tensor",
        "FloatTensor",
        "DoubleTensor",
        "HalfTensor",
        "BFloat16Tensor",
        "LongTensor",
        "IntTensor",
        "ShortTensor",
        "CharTensor",
        "ByteTensor",
        "BoolTensor",
    }
)
