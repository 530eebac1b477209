"""What an adapter tapt-bench wrote records of the documents it was trained on (its tapt.json): read as
the defaults of every command that reads the adapter's documents again (lm-eval's --metadata, the
contamination checks' flags), so that each reads the draw the adapter saw."""

from __future__ import annotations

import json
from pathlib import Path

from harness.core.plumbing.errors import UserError, named
from harness.results.paths import adapter_record_path
from harness.results.units import FIRST_TRAIN_DRAW

# what an adapter tapt-bench wrote records of its draw, read as the defaults of --metadata
TRAINED = ("m", "n", "seed", "subsample", "prompt_format", "train_draw")


def trained_for(peft, given: dict, task: str, slug: str, flag: str = "--metadata") -> dict:
    """The draw an adapter was trained on (its task, m, n, seed, subsample and prompt format, from the
    record tapt-bench wrote beside it, its tapt.json), as the defaults of --metadata: lm-eval then scores
    the documents of that draw. A --metadata value that contradicts the record, or another task, is
    refused naming both. `flag`: how the caller names the values it was given (lm-eval's --metadata, or
    a command's flags)."""
    path = adapter_record_path(peft) if peft else None
    for key in ("m", "n", "seed", "subsample"):
        value = given.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise UserError(f"task {task}: {flag} {key} must be a whole number, got {value!r}")
    if path is None:
        return {}
    if not path.is_file():  # an adapter tapt-bench did not write, or its record deleted: said, not guessed
        import sys

        draw = ", ".join(f"{k} {given[k]}" for k in TRAINED if k in given) or "none: the defaults"
        print(
            f"note: {peft} has no tapt.json naming the documents it was trained on; {flag} name the draw "
            f"({draw})",
            file=sys.stderr,
        )
        return {}
    record = read_record(path, given, task, slug, flag, peft)
    trained = {k: record[k] for k in TRAINED if record.get(k) is not None}
    trained.setdefault("train_draw", FIRST_TRAIN_DRAW)  # an adapter written before its record named one
    clash = {k: (given[k], v) for k, v in trained.items() if k in given and given[k] != v}
    if clash and flag == "--metadata":
        said = ", ".join(f"{k} {g!r} (the adapter's: {v!r})" for k, (g, v) in clash.items())
        raise UserError(
            f"task {task}: {flag} sets {said}, but the adapter {peft} was trained on that draw "
            f"({path}): drop {', '.join(clash)} from {flag} to read the documents it was trained for"
        )
    if clash:
        said = ", ".join(f"--{k.replace('_', '-')} {g}, the adapter's {v}" for k, (g, v) in clash.items())
        raise UserError(
            f"{said} ({path}): it was trained on another draw; drop "
            f"{', '.join('--' + k.replace('_', '-') for k in clash)} to check the documents it was trained on"
        )
    return trained


def read_record(path: Path, given: dict, task: str, slug: str, flag: str, peft) -> dict:
    """An adapter's tapt.json, checked: whole, naming its task (this one) and every value of its draw that
    `given` does not; else one line saying what to pass or write again."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise UserError(
            f"task {task}: {path} is not a whole adapter record ({named(err)}); it names the "
            "documents the adapter was trained for: write it again (tapt-bench train), or delete it and name "
            f"the draw with {flag}"
        ) from None
    recorded = record.get("task", slug) if isinstance(record, dict) else record
    if not isinstance(recorded, str):
        raise UserError(
            f"task {task}: {path} names no task slug (task: {recorded!r}); it was edited: write it again "
            "with tapt-bench train"
        )
    optional = ("prompt_format", "train_draw")
    missing = [k for k in TRAINED if record.get(k) is None and k not in given and k not in optional]
    if missing:
        example = ", ".join(f'"{k}": ...' for k in missing)
        raise UserError(
            f"task {task}: {path} does not name the adapter's {', '.join(missing)}, so the documents it was "
            f"trained for are unknown: pass them with {flag} (e.g. {{{example}}})"
        )
    if record.get("task") not in (None, slug):
        fix = f"--tasks tapt_{record['task']}" if flag == "--metadata" else f"--task {record['task']}"
        raise UserError(
            f"task {task}: the adapter {peft} was trained on task {record['task']!r} ({path}): read it "
            f"with {fix}"
        )
    return record


def given_flags(argv: list[str], keys=TRAINED) -> set[str]:
    """The keys of `keys` whose flag (`--m`, `--train-draw`) a command line names."""
    flags = {"--" + k.replace("_", "-"): k for k in keys}
    return {flags[a.split("=", 1)[0]] for a in argv if a.split("=", 1)[0] in flags}


def check_record(peft, model) -> None:
    """An adapter's tapt.json names the draw that is scored: it must be this adapter's own. A record copied
    from another adapter (its adapter_sha256 is not this one's) names documents this one never read."""
    path = adapter_record_path(peft)
    try:
        recorded = json.loads(path.read_text()).get("adapter_sha256")
    except (OSError, ValueError, AttributeError):
        return  # none, or not whole: trained_for says so where it reads the draw
    if not recorded:
        return
    from harness.core.engine.weights import adapter_sha256

    found = adapter_sha256(model)
    if found is not None and found != recorded:
        raise UserError(
            f"{peft}: its tapt.json records adapter_sha256 {recorded[:12]}…, but the adapter's own files "
            f"hash {found[:12]}…: the record is another adapter's (copied, or the adapter was replaced), "
            "so it names documents this adapter was not trained on; write the adapter again with tapt-bench "
            "train, or delete tapt.json and name the draw"
        )


def check_rows(peft, docs: dict) -> None:
    """The rows an adapter's tapt.json lists as trained on must be the rows of the split its draw gives
    (`docs`: that draw's splits): a record whose draw was edited (n 8 to 6, say) names other documents,
    and every check would read them as the adapter's own."""
    path = adapter_record_path(peft) if peft else None
    try:
        record = json.loads(path.read_text()) if path is not None else None
    except (OSError, ValueError):
        return  # none, or not whole: trained_for says so where it reads the draw
    if not isinstance(record, dict) or not record.get("rows") or record.get("split") not in docs:
        return
    split, listed = record["split"], sorted(int(r) for r in record["rows"])
    drawn = sorted(int(r) for r in docs[split]["row"])
    if drawn != listed:
        draw = ", ".join(f"{k} {record[k]}" for k in TRAINED if k in record)
        raise UserError(
            f"{peft}: its tapt.json names the draw {draw}, whose {split} split is {len(drawn)} rows, not the "
            f"{len(listed)} rows it lists as trained on ({len(set(drawn) & set(listed))} in common): the "
            "record was edited, or the data changed; restore it, or write the adapter again with tapt-bench "
            "train"
        )
