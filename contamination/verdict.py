"""The exposure test's result in words: which exposures it shows at alpha, and the caveats that keep a
flag from reading as SEEN (no calibration, a shifted reference, a label flag beside a text flag)."""

from __future__ import annotations

from contamination.exposure import CODEC, EXPOSURE_TESTS, LABELS_SEEN
from harness.core.design.power import POWER


def flags(result: dict) -> dict[str, bool]:
    """Which exposures the result shows at alpha: each statistic for the suspect documents, and the
    other side of the text statistic (the reference's text)."""
    a = result["alpha"]
    return {name: result[name]["p_test"] <= a for name in EXPOSURE_TESTS if name in result} | {
        "extra_text": result["text"]["p_extra"] <= a
    }


def shifted(result: dict) -> list[str]:
    """The statistics whose base scores alone separate the two sets (two-sided, at alpha)."""
    return [name for name, r in result.get("shift", {}).items() if r["p_two_sided"] <= result["alpha"]]


def inconclusive(result: dict) -> str | None:
    """Why a whole-split result cannot say SEEN (None where it can): the reference check could not
    reach alpha with these set sizes, or it found the reference unlike the suspect documents."""
    check = result.get("reference_check")
    if check is None:
        return None
    if not check["can_reject"]:
        return (
            f"too few documents to check that the reference is like the suspect documents (the check's "
            f"smallest p-value is {check['smallest_p']:.3g} > {result['alpha']}); use at least 4 a side"
        )
    if check["shifted"] or shifted(result):
        most = check["most"] if check["shifted"] else f"base {shifted(result)[0]}"
        p = check["p"] if check["shifted"] else result["shift"][shifted(result)[0]]["p_two_sided"]
        return (
            f"the reference is unlike the suspect documents (p {p:.3g}; most on: {most}), and an adapter "
            "of the task gains less on shifted text whether or not it saw the suspect documents"
        )
    return None


def verdict(result: dict) -> list[str]:
    """The result in words: a line per statistic (and caveats: uncalibrated, a shifted reference, a
    label flag where the text was seen too)."""
    a, names, seen = result["alpha"], result["names"], flags(result)
    suspect, reference = names["test"], names["extra"]
    lines = []
    if not result["calibrated"]:
        lines.append(
            "UNCALIBRATED: no base model was scored to subtract; a suspect set that is easier for any "
            "model reads as exposure"
        )
    why_not = inconclusive(result)
    if why_not:
        lines.append(f"INCONCLUSIVE: {why_not}; no SEEN is given. Prefer a reference of the same source.")
    shift = shifted(result)
    for name in shift:
        lines.append(
            f"REFERENCE SHIFTED: the base alone separates {suspect} from {reference} on the {name} "
            f"statistic (two-sided p {result['shift'][name]['p_two_sided']:.4g} <= {a}): they are not "
            "exchangeable, so the calibrated result rests on the base's calibration alone; prefer a "
            "reference of the same distribution"
        )
    for name in (n for n in EXPOSURE_TESTS if n in result):
        lines.append(statistic_line(result, name, seen, bool(why_not), name in shift))
    if CODEC in result:
        lines.append(codec_line(result))
    return lines


def statistic_line(result: dict, name: str, seen: dict, why_not: bool, shifted_here: bool) -> str:
    """One statistic's line: seen, inconclusive, not seen (with the reference's own false alarm), or no
    evidence with the gain it would have seen."""
    a, stat, r = result["alpha"], EXPOSURE_TESTS[name], result[name]
    suspect, reference = result["names"]["test"], result["names"]["extra"]
    what = f"{stat.seen} of {suspect}"
    caveat = " (UNRELIABLE: the reference is shifted on this statistic)" if shifted_here else ""
    if why_not and (seen[name] or r["p_extra"] <= a):
        p = min(r["p_test"], r["p_extra"])
        return f"{what}: inconclusive (p {p:.4g} <= {a}, but the reference is not comparable)"
    if seen[name] and stat.seen == LABELS_SEEN and seen["extra_text"]:
        return (
            f"{what}: inconclusive (p {r['p_test']:.4g} <= {a}); the text of the reference {reference} "
            "was seen, and training on text alone moves this statistic"
        )
    if seen[name] and stat.seen == LABELS_SEEN and seen["text"]:
        return (
            f"text or {what}: SEEN (p {r['p_test']:.4g} <= {a}){caveat}; the text was seen too, and "
            "training on the text alone moves this statistic: it cannot tell labels from text here "
            "(in a grid, the twin statistic can)"
        )
    if seen[name]:
        return f"{what}: SEEN (p {r['p_test']:.4g} <= {a}){caveat}"
    if r["p_extra"] <= a:
        return (
            f"{what}: not seen; the {stat.seen} of the reference {reference} read as seen (p "
            f"{r['p_extra']:.4g} <= {a}; a reference the model never saw reads so in {a:.0%} of checks)"
            f"{caveat}"
        )
    return (
        f"{what}: no evidence of it (p {r['p_test']:.4g}); a gain above {r['detectable']:.4g} "
        f"would have been seen with {POWER:.0%} power{caveat}"
    )


def codec_line(result: dict) -> str:
    """CoDeC's line: seen, inconclusive where the base alone separates the sets too, or no evidence."""
    a, suspect = result["alpha"], result["names"]["test"]
    p, base = result[CODEC]["p_test"], result.get(f"{CODEC}_base", {}).get("p_test")
    if p <= a and base is not None and base <= a:
        return (
            f"CoDeC: inconclusive (p {p:.4g} <= {a}, but the base alone separates the sets too, p {base:.4g})"
        )
    if p <= a:
        return f"CoDeC: the text of {suspect} SEEN (its documents fell more with a context, p {p:.4g})"
    return f"CoDeC: no evidence the text of {suspect} was seen (p {p:.4g})"


def format_result(result: dict) -> str:
    lines = [f"  {'statistic':11} {'effect':>9} {'95% interval':>21} {'p(test)':>9} {'p(extra)':>9}"]
    rows = [(name, result[name], "") for name in EXPOSURE_TESTS if name in result]
    rows += [(name, r, "base alone, ") for name, r in result.get("shift", {}).items()]
    for name, r, shift in rows:
        unit = EXPOSURE_TESTS[name].unit(result["text_score"])
        lines.append(
            f"  {(shift and 'shift ') + name:11} {r['effect']:+9.4f} "
            f"[{r['ci_low']:+9.4f}, {r['ci_high']:+9.4f}] "
            f"{r['p_test']:9.4g} {r['p_extra']:9.4g}  ({shift}{unit}, suspect - reference)"
        )
    for name, who in ((CODEC, "suspect"), (f"{CODEC}_base", "base alone")):
        if name in result:
            r = result[name]
            lines.append(
                f"  {name:11} {r['effect']:+9.4f} [{r['ci_low']:+9.4f}, {r['ci_high']:+9.4f}] "
                f"{r['p_test']:9.4g} {r['p_extra']:9.4g}  ({who}: drop with a context, suspect - reference; "
                f"shares that fell {r['share_test']:.0%} and {r['share_extra']:.0%})"
            )
    check = result.get("reference_check")
    if check:
        lines.append(
            f"  reference check: two-sided p {check['p']:.4g} over {len(check['z'])} features (the base's "
            f"scores, the texts' surface); most apart on {check['most']} (|z| "
            f"{max(check['z'].values(), default=0):.2f})"
        )
    return "\n".join(lines + verdict(result))
