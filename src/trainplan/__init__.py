"""trainplan: what a training or serving job needs, from a workload file whose every assumption is named."""

__version__ = "0.1.0"
