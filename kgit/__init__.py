"""kgit: a git-native experiment runner for optimizing GPU kernels."""

__version__ = "0.1.0"
