"""The planted leak read as a positive control, in three steps, before any bias is read.

1. Matched: the leak trained the same optimizer steps as extra and test (its twin, test, differs from it
   in its labels alone). Where any unit's steps differ, the leak is not read, unless the run named it
   (`leak_steps: unmatched`): then it is read with the difference named.
2. Absorbed (the manipulation check): the leak model gives each test document's gold answer a higher
   log-probability at its slot than the extra model does. Per unit, d = the mean over its test documents
   of log p_leak(gold) - log p_extra(gold); over units, the one-sided sign-flip test of d above 0. Under
   MIN_ONE_SIDED units no such test can reject: then each unit's own test over its documents (that
   model, its documents paired) must reject in over half the units.
3. Seen: the leak raised test accuracy above extra's (the summary's one-sided leak test).

The word: `control not absorbed`, `absorbed but not seen in accuracy`, or `seen`; where the units
predate the check, `absorption not measured` (read by accuracy alone), and where steps differ,
`not read: steps differ`. A bias's absence is read only after `seen`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from harness import results
from harness.core.design import conditions
from harness.core.design.power import ALPHA
from harness.stats.summary.statistics import flip_interval, paired_pvalue
from harness.stats.summary.verdict import UNINFORMATIVE, key, leak_unseen, pooled_verdict

# the fewest units whose one-sided sign-flip test can reach ALPHA (its smallest p is 2^-K)
MIN_ONE_SIDED = int(np.ceil(np.log2(1 / ALPHA)))
SEEN, ABSORBED, NOT_ABSORBED = "seen", "absorbed but not seen in accuracy", "control not absorbed"
UNMEASURED, UNMATCHED = "absorption not measured", "not read: steps differ"


def unit_controls(mdir: Path) -> list[dict[str, Any]]:
    """Per unit of a model folder that planted the leak: its task, subsample, steps per condition, the
    run's leak_steps, and its gold log-probs' per-unit means (leak, extra) where the check ran."""
    out = []
    for tdir in results.units.task_dirs(mdir):
        for path in results.units.unit_records(tdir):
            unit = results.units.read_unit(path)
            settings = unit.get("settings") or {}
            if conditions.LEAK not in (settings.get("conditions") or []):
                continue
            found = unit.get(results.CONTROL) or {}
            steps = found.get("steps") or {
                c: (
                    unit.get("training", {}).get(f"pretrain_{c}") or unit.get("training", {}).get(c) or {}
                ).get("steps")
                for c in (conditions.EXTRA, conditions.TEST, conditions.LEAK)
            }
            row = {"task": tdir.name, "subsample": int(path.stem), "steps": steps}
            row["named_unmatched"] = settings.get("leak_steps") == "unmatched"
            gold = found.get("gold_log_probs") or {}
            if conditions.LEAK in gold and conditions.EXTRA in gold:
                leak, extra = np.asarray(gold[conditions.LEAK]), np.asarray(gold[conditions.EXTRA])
                row |= {"leak": float(leak.mean()), "extra": float(extra.mean()), "docs": len(leak)}
                row["docs_higher"] = int((leak > extra).sum())
                row["p_docs"] = paired_pvalue(leak, extra, 0, "greater")  # this unit's model, its documents
            out.append(row)
    return out


def steps_line(units: list[dict[str, Any]]) -> str | None:
    """Where a unit's leak trained other steps than its extra or test: the count and the first, in words."""
    odd = [u for u in units if len({u["steps"].get(c) for c in u["steps"]}) > 1]
    if not odd:
        return None
    s = odd[0]["steps"]
    return (
        f"in {len(odd)} of {len(units)} units the conditions trained different steps (e.g. "
        f"{odd[0]['task']} subsample {odd[0]['subsample']}: extra {s.get('extra')}, test {s.get('test')}, "
        f"leak {s.get('leak')}): leak - extra mixes the labels with other training"
    )


def control_of(config: dict[str, Any], mdir: Path | None, seed: int = 0) -> dict[str, Any]:
    """The control's reading of one (m, n, model) of a summary (see the module's note): {"control": its
    numbers and word}, and where the word is not `seen`, the bias marked uninformative with the reason
    and its verdict read again. Nothing where no unit planted a leak."""
    units = unit_controls(mdir) if mdir is not None else []
    if not units or "leak_mean" not in config:
        return {}
    out: dict[str, Any] = {"units": len(units)}
    unmatched = steps_line(units)
    checked = [u for u in units if "leak" in u]
    if checked:
        leak, extra = np.array([u["leak"] for u in checked]), np.array([u["extra"] for u in checked])
        d = leak - extra
        low, high = flip_interval(d, seed) if len(d) > 1 else (float("nan"), float("nan"))
        out |= {
            "checked": len(checked),
            "logp_leak": float(leak.mean()),
            "logp_extra": float(extra.mean()),
            "difference": float(d.mean()),
            "low": float(low),
            "high": float(high),
            "p": paired_pvalue(leak, extra, seed, "greater"),
            "units_higher": int((d > 0).sum()),
            "units_absorbed": sum(u["p_docs"] <= ALPHA for u in checked),
            "docs_higher": sum(u["docs_higher"] for u in checked),
            "docs": sum(u["docs"] for u in checked),
        }
    absorbed = bool(checked) and out["difference"] > 0 and absorbed_over(out)
    if unmatched and not all(u["named_unmatched"] for u in units):
        word, why = (
            UNMATCHED,
            unmatched + "; the run did not name it (leak_steps: unmatched), so it is not read",
        )
    elif checked and not absorbed:
        word, why = NOT_ABSORBED, "the leak model did not absorb the answers: " + absorbed_numbers(out)
    elif leak_unseen(config):  # the bias is marked for it already (verdict.why_uninformative)
        word, why = (ABSORBED if checked else UNMEASURED), None
    else:
        word, why = (SEEN if checked else UNMEASURED), None
    out |= {"word": word, "unmatched": unmatched}
    found: dict[str, Any] = {"control": out}
    e = conditions.PRIMARY
    if why and key(e, "units") in config:
        blind = config.get(key(e, UNINFORMATIVE))
        reason = f"the control reads `{word}`: {why}"
        found[key(e, UNINFORMATIVE)] = f"{reason}; {blind}" if blind else reason
        found[key(e, "detectable")] = float("nan")
        if key(e, "p_family") in config:
            found |= pooled_verdict(config | found)
    return found


def absorbed_over(c: dict[str, Any]) -> bool:
    """Absorbed: over units, their one-sided test at ALPHA where enough units can reject (MIN_ONE_SIDED);
    with fewer, each unit's own test over its documents rejects in over half the units."""
    if c["checked"] >= MIN_ONE_SIDED:
        return c["p"] <= ALPHA
    return 2 * c["units_absorbed"] > c["checked"]


def absorbed_numbers(c: dict[str, Any]) -> str:
    """The manipulation check's numbers in one clause."""
    span = (
        f"[{c['low']:+.3f}, {c['high']:+.3f}]"
        if np.isfinite(c["low"]) and np.isfinite(c["high"])
        else "[unbounded: too few units]"
    )
    return (
        f"log p of the gold answer, leak {c['logp_leak']:.3f} against extra {c['logp_extra']:.3f} nats "
        f"(difference {c['difference']:+.3f} {span}, p one-sided over units {c['p']:.4f}; higher in "
        f"{c['units_higher']} of {c['checked']} units and {c['docs_higher']} of {c['docs']} documents; each "
        f"unit's own test over its documents at p <= {ALPHA:g} in {c['units_absorbed']})"
    )


def control_line(control: dict[str, Any]) -> str:
    """The control's word and its numbers, as the summary prints them."""
    line = f"planted control: {control['word']}"
    if "checked" in control:
        line += f"; manipulation check over {control['checked']} units: {absorbed_numbers(control)}"
    else:
        line += f" ({control['units']} units recorded no manipulation check: they predate it)"
    if control.get("unmatched"):
        line += f"; {control['unmatched']}"
    return line
