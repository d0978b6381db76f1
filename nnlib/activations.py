"""Activation names and the integer codes the kernels use (see kernels/activation.cl)."""

ACTIVATIONS = {"none": 0, "tanh": 1, "sigmoid": 2, "relu": 3, "leaky_relu": 4, "softmax": 5}
LEAKY_SLOPE = 0.01


def activation_code(name: str) -> int:
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; choose one of {list(ACTIVATIONS)}")
    return ACTIVATIONS[name]
