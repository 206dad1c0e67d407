"""The datasets greenlab knows: canonical names, accepted aliases, input shape, classes and
full split sizes, and which torchvision class holds each real one."""

from __future__ import annotations

# name -> (torchvision class name, input shape, classes, full train size, full test size)
SPECS = {
    "fashion-mnist": ("FashionMNIST", (1, 28, 28), 10, 60000, 10000),
    "cifar10": ("CIFAR10", (3, 32, 32), 10, 50000, 10000),
    "synthetic": (None, (1, 28, 28), 10, 10000, 2000),
}
ALIASES = {"fashionmnist": "fashion-mnist", "fashion_mnist": "fashion-mnist", "fmnist": "fashion-mnist",
           "cifar-10": "cifar10", "cifar_10": "cifar10"}
DATASETS = tuple(SPECS)
# the real datasets: canonical name -> torchvision class name
TORCHVISION = {key: spec[0] for key, spec in SPECS.items() if spec[0] is not None}


def canonical(name) -> str:
    """The canonical name of dataset ``name`` (case and aliases forgiven); ValueError otherwise."""
    if not isinstance(name, str):
        raise ValueError(f"dataset name must be a string, one of {', '.join(DATASETS)}; got {name!r}")
    key = ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in SPECS:
        raise ValueError(f"unknown dataset {name!r}; allowed: {', '.join(DATASETS)}")
    return key
