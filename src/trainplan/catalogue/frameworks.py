"""What a training framework offers (catalogue/kernel_efficiency.toml [frameworks]): the model-parallel
degrees, the ZeRO stages and the kernels its layers run. One reader, for the workload's boundary check and the layout search."""

from __future__ import annotations

from dataclasses import dataclass

from trainplan import catalogue

#: the model-parallel degrees a framework may offer beside data parallelism
PARALLELISMS = ("tensor", "pipeline", "context", "expert")
ZERO_STAGES = (0, 1, 2, 3)


@dataclass(frozen=True)
class Offers:
    parallelisms: tuple[str, ...]  # the model-parallel degrees it has
    zero_stages: tuple[int, ...]  # the ZeRO stages it has
    pipeline_zero_stages: tuple[int, ...]  # those it has together with pipeline parallelism
    kernels: str  # "fused": its layers run fused kernels (activation_traits.toml [fused]); "module": the model's code


def offers(key: str) -> Offers:
    """A framework's offers (all where its row says nothing); `key` must be a catalogue framework."""
    e = catalogue.table("kernel_efficiency")["frameworks"][key]
    zero = tuple(e.get("zero_stages", ZERO_STAGES))
    return Offers(parallelisms=tuple(e.get("parallelisms", PARALLELISMS)), zero_stages=zero,
                  pipeline_zero_stages=tuple(e.get("pipeline_zero_stages", zero)),
                  kernels=str(e.get("kernels", "module")))
