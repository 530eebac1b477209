"""The house rules a review counts, held by a test: no product function over 60 lines, every seed stream
built in core/design/seeds.py, every result path in harness/results."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("harness", "tapt", "contamination", "tasks_yaml")


def sources():
    return [p for pkg in PRODUCT for p in sorted((ROOT / pkg).rglob("*.py"))]


def test_no_product_function_is_over_60_lines():
    long = [
        f"{p.relative_to(ROOT)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for p in sources()
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno >= 60
    ]
    assert long == []


def test_seed_streams_are_built_in_seeds_py_and_result_paths_in_harness_results():
    seeds = ROOT / "harness" / "core" / "design" / "seeds.py"
    stream = re.compile(r"default_rng\(\[|SeedSequence\(\[")  # a seed built from parts: a stream
    built = [str(p.relative_to(ROOT)) for p in sources() if p != seeds and stream.search(p.read_text())]
    assert built == []
    layout = re.compile(r'"tapt\.json"|"accuracies\.csv"|"probabilities\.parquet"|units/\[0-9\]')
    results = ROOT / "harness" / "results"
    paths = [
        str(p.relative_to(ROOT))
        for p in sources()
        if results not in p.parents and layout.search(p.read_text())
    ]
    assert paths == []


def test_a_commands_args_hold_their_sections_side_by_side_and_inherit_none_two_at_once():
    """A command's `...Args` is made of sections (`args.model.base`), as a GridConfig is; a benchmark's may
    extend one section with its own flags, never join two by inheriting them."""
    from harness.core.plumbing.sections import Sections
    from tapt.methods.single import TrainArgs

    args = [
        (f"{p.relative_to(ROOT)}:{node.name}", len(node.bases))
        for p in [*sources(), *sorted((ROOT / "benchmarks").glob("*.py"))]
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.ClassDef) and node.name.endswith("Args")
    ]
    assert len(args) > 20 and [name for name, bases in args if bases > 1] == []
    train = TrainArgs(task="ag_news", out="x", quantize="none")
    assert isinstance(train, Sections) and list(train.sections()) == ["sample", "model", "options", "form"]
    assert (train.model.base, train.form.quantize, train.sample.split) == (
        "SmolLM2-135M-Instruct",
        "none",
        "test",
    )
