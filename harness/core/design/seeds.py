"""Every random stream of a unit, derived from the run's seed and the unit's index by one function.

A unit has one seed (the run's, `seed`) and one index (`k`, its subsample). Each stage asks `derive` for
its stream by name, so no stage builds a seed of its own and two stages share a stream only where this
table says so. The values are those every recorded unit was computed with, kept so that a rerun gives
the same numbers:

| stream        | value                 | read by                                                        |
|---------------|-----------------------|----------------------------------------------------------------|
| `draw`        | `[seed, k]`           | a study task's draw of train, extra, test and null (numpy)     |
| `eval_draw`   | `[seed, k, 1]`        | an lm-eval task's extra and test from its evaluation docs      |
| `eval_train`  | `[seed, k, 2]`        | an lm-eval task's train from its training docs                 |
| `adapt`       | `seed`                | the zero-shot flow's method (the same for every subsample)     |
| `classifier`  | `seed + k`            | the classifier flow's method, head and training order          |
| `exposure`    | `seed`                | the exposure test's masks and permutations                     |
| `mlm_head`    | `[seed, 4]`           | the rows an encoder's MLM head is fitted on (once a run: no k) |
| `sample`      | `[seed, 3]`           | a command's seeded sample of n documents (`--n`; no unit: no k)  |
| `document`    | `[seed, row]`         | one document's: its exposure-test masks, its CoDeC context      |

`document(seed, row)` gives the last (a document's row, not a unit's k); `head` derives a condition's own
head seed from the `classifier` stream (`per_condition` heads).
"""

from __future__ import annotations

import numpy as np

STREAMS = ("draw", "eval_draw", "eval_train", "adapt", "classifier", "exposure", "mlm_head", "sample")


def derive(seed: int, k: int, stream: str) -> int | list[int]:
    """The seed of `stream` for unit `k` of a run seeded `seed`: a list is a numpy SeedSequence's entropy
    (pass it to `np.random.default_rng`), an int a seed for torch and transformers' `set_seed`."""
    if stream == "draw":
        return [seed, k]
    if stream == "eval_draw":
        return [seed, k, 1]
    if stream == "eval_train":
        return [seed, k, 2]
    if stream in ("adapt", "exposure"):
        return seed
    if stream == "mlm_head":
        return [seed, 4]
    if stream == "sample":
        return [seed, 3]
    if stream == "classifier":
        return seed + k
    raise ValueError(f"no random stream {stream!r}; the streams are {', '.join(STREAMS)}")


def rng(seed: int, k: int, stream: str) -> np.random.Generator:
    """numpy's generator of one of the draws' streams (`draw`, `eval_draw`, `eval_train`)."""
    return np.random.default_rng(derive(seed, k, stream))


def document(seed: int, row: int) -> np.random.Generator:
    """numpy's generator of one document's stream: the same for every model that reads it."""
    return np.random.default_rng([seed, int(row)])


def head(seed: int, k: int, index: int) -> int:
    """A classifier head's own seed (`per_condition`): from the unit's `classifier` stream and the
    condition's index, 31 bits."""
    state = np.random.SeedSequence([derive(seed, k, "classifier"), index]).generate_state(1)[0]
    return int(state % 2**31)
