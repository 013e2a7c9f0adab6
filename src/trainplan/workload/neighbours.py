"""Keys checked against their neighbours (issue 29): two keys the user wrote that say different things.

A single key's constraint (schema.py) cannot see another key, and `schema._check_consistency` sees only
values, not which of them the user wrote. These rules apply where both keys were written (a file,
--set, a measurement): one left to its default yields to the other as documented, but two written
ones that disagree name two different jobs, and neither silently wins. Each refusal names the key
read second and what the first one says.

- training.zero and training.sharding: the same sharding, stage for stage (fsdp is ZeRO-3's).
- cluster.hfu and cluster.mfu: hardware FLOPs count everything model FLOPs count, and the recomputation,
  so hfu >= mfu.
- training.state_recipe and training.precision / training.optimizer: each recipe says the precisions
  it trains in and the optimizer whose state it holds (catalogue/state_recipes.toml).
- training.attention and parallel.flash_attention: an eager kernel is not a flash one.
- parallel.flash_kernel and parallel.flash_attention / training.attention: a flash kernel's generation
  names a flash kernel, which an unfused (eager) attention does not run.
- data.pixels_per_frame and data.width x data.height: a corpus's mean frame within 64x of the size written.

model.mlp and model.norm beside model.hf_config are checked where the config's activation shape is read
(planning/model_terms.py), against the config's own activation and norm.

training.tokens below one global batch is refused where the step is known (planning/evaluate.py).
"""

from __future__ import annotations

from trainplan import catalogue
from trainplan.errors import UserError
from trainplan.workload.schema import Workload, sharding_of_zero


def check_neighbours(w: Workload) -> None:
    """UserError naming the first key that disagrees with a neighbour the user also wrote."""
    _sharding(w)
    _utilisation(w)
    _recipe(w)
    _attention(w)
    _flash_kernel(w)
    _frame_pixels(w)


def _sharding(w: Workload) -> None:
    t = w.training
    if not (w.given("training.zero") and w.given("training.sharding")) or t.sharding is None:
        return
    said = sharding_of_zero(t.zero)
    if t.sharding != said and not (t.sharding == "fsdp" and said == "zero3"):
        raise UserError("training.sharding", f"expected {said!r} as training.zero = {t.zero} says (fsdp for 3), "
                        f"got {t.sharding!r}; give one of the two")


#: How far a corpus's frame-weighted mean frame (data.pixels_per_frame) may lie from the width x height
#: written beside it: a mixed-size corpus's mean is between its sizes, and `data inspect` writes the
#: dominant size beside it; 100 pixels beside 1920 x 1080 is another job (issue 29).
PIXELS_APART = 64.0


def _frame_pixels(w: Workload) -> None:
    d = w.data
    if d.pixels_per_frame is None or not (w.given("data.pixels_per_frame") and w.given("data.width")
                                          and w.given("data.height")):
        return
    size = float(d.width) * float(d.height)
    if not size / PIXELS_APART <= d.pixels_per_frame <= size * PIXELS_APART:
        raise UserError("data.pixels_per_frame", f"expected a mean frame within {PIXELS_APART:g}x of data.width x "
                        f"data.height ({d.width} x {d.height} = {size:,.0f} pixels), got {d.pixels_per_frame:,.0f}")


def _utilisation(w: Workload) -> None:
    c = w.cluster
    if c.hfu is not None and w.given("cluster.hfu") and w.given("cluster.mfu") and c.hfu < c.mfu:
        raise UserError("cluster.hfu", f"expected at least cluster.mfu ({c.mfu:g}): hardware FLOPs are the model's "
                        f"and the recomputation's, got {c.hfu:g}")


def _recipe(w: Workload) -> None:
    t = w.training
    if t.state_recipe is None or not w.given("training.state_recipe"):
        return
    r = catalogue.table("state_recipes")["recipe"][t.state_recipe]
    if w.given("training.precision") and t.precision not in r["precisions"]:
        raise UserError("training.state_recipe", f"expected a recipe that trains in training.precision {t.precision!r}: "
                        f"{t.state_recipe} trains in {' or '.join(r['precisions'])}; give one of the two")
    family = "sgd" if t.optimizer == "sgd" else "adam"
    if w.given("training.optimizer") and family != r["optimizer"]:
        raise UserError("training.state_recipe", f"expected a recipe of training.optimizer {t.optimizer!r}: "
                        f"{t.state_recipe} holds {r['optimizer']} state; give one of the two")


def _attention(w: Workload) -> None:
    if not (w.given("training.attention") and w.given("parallel.flash_attention")):
        return
    flash, kind = w.parallel.flash_attention, w.training.attention
    if (flash and kind == "eager") or (not flash and kind == "flash"):
        raise UserError("parallel.flash_attention", f"expected {'false' if flash else 'true'} with training.attention "
                        f"= {kind!r}, got {'true' if flash else 'false'}; give one of the two")


def _flash_kernel(w: Workload) -> None:
    if not w.given("parallel.flash_kernel"):
        return
    kernel = w.parallel.flash_kernel
    if w.given("parallel.flash_attention") and not w.parallel.flash_attention:
        raise UserError("parallel.flash_kernel", f"expected no flash kernel with parallel.flash_attention = false "
                        f"(the attention runs unfused), got {kernel!r}; give one of the two")
    if w.given("training.attention") and w.training.attention == "eager":
        raise UserError("parallel.flash_kernel", f"expected no flash kernel with training.attention = 'eager' "
                        f"(the attention runs unfused), got {kernel!r}; give one of the two")
