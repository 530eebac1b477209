import json
import subprocess
import sys

import numpy as np
import pytest

from harness.core.errors import UserError
from harness.tasks.subsample import draw, stratified_counts

LABELS = np.repeat([0, 1, 2, 3], [500, 300, 150, 50])  # imbalanced pool of 1000


def test_sizes_and_disjointness():
    sub = draw(LABELS, subsample=3, m=40, n=100, seed=0)
    assert (len(sub.train), len(sub.extra), len(sub.test)) == (40, 100, 100)
    sets = [set(sub.train), set(sub.extra), set(sub.test)]
    assert sum(map(len, sets)) == len(set.union(*sets)) == 240


def test_train_is_stratified_with_every_class():
    sub = draw(LABELS, subsample=0, m=40, n=100, seed=0)
    assert np.bincount(LABELS[sub.train], minlength=4).tolist() == [20, 12, 6, 2]
    rare = np.repeat([0, 1], [995, 5])  # 0.5% class still gets a train row
    assert np.bincount(rare[draw(rare, 0, m=10, n=50, seed=0).train]).tolist() == [9, 1]


def test_stratified_counts_sum_to_m():
    for m in range(3, 60):
        counts = stratified_counts(np.array([700, 200, 100]), m)
        assert counts.sum() == m and counts.min() >= 1


def test_different_subsamples_differ_and_same_one_repeats():
    a, b = draw(LABELS, 0, 40, 100, 0), draw(LABELS, 1, 40, 100, 0)
    assert set(a.test) != set(b.test) and set(a.train) != set(b.train)
    again = draw(LABELS, 0, 40, 100, 0)
    assert all(np.array_equal(getattr(a, s), getattr(again, s)) for s in ("train", "extra", "test"))


def test_identical_rows_in_separate_processes(data_dir):
    code = (
        "import json; from harness.tasks.protocol import subsample_docs; from harness.tasks.spec "
        "import load_spec;"
        "from harness.tasks.subsample import SampleSettings;"
        f"d = subsample_docs(load_spec('ag_news'), SampleSettings(data_dir={str(data_dir)!r}, "
        "m=20, n=30), 2);"
        "print(json.dumps({s: d[s]['row'].tolist() for s in d}))"
    )
    runs = [json.loads(subprocess.check_output([sys.executable, "-c", code], text=True)) for _ in range(2)]
    assert runs[0] == runs[1]
    assert [len(runs[0][s]) for s in ("train", "extra", "test")] == [20, 30, 30]


def test_clear_errors():
    with pytest.raises(UserError, match="m=3 is smaller than the number of classes \\(4\\)"):
        draw(LABELS, 0, m=3, n=10, seed=0)
    with pytest.raises(UserError, match="m \\+ 2n = 100 \\+ 2\\*500 = 1100 exceeds the pool of 1000"):
        draw(LABELS, 0, m=100, n=500, seed=0)
