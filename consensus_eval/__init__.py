"""consensus-eval: score cases with a panel of judges and report how far to trust the result."""

__version__ = "0.1.0"
