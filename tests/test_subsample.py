import json
import subprocess
import sys

import numpy as np
import pytest

from harness.core.plumbing.errors import UserError
from harness.tasks.subsample import draw, stratified_counts

LABELS = np.repeat([0, 1, 2, 3], [500, 300, 150, 50])  # imbalanced pool of 1000


def test_sizes_and_disjointness():
    sub = draw(LABELS, subsample=3, m=40, n=100, seed=0, train_draw="proportional")
    assert (len(sub.train), len(sub.extra), len(sub.test)) == (40, 100, 100)
    sets = [set(sub.train), set(sub.extra), set(sub.test)]
    assert sum(map(len, sets)) == len(set.union(*sets)) == 240


def test_the_null_draw_is_a_third_disjoint_set_and_leaves_extra_and_test_as_they_were():
    from harness.tasks.subsample import draw_eval

    sub = draw(LABELS, subsample=3, m=40, n=100, seed=0, train_draw="proportional")
    sets = [set(sub.train), set(sub.extra), set(sub.test), set(sub.null)]
    assert len(sub.null) == 100 and sum(map(len, sets)) == len(set.union(*sets)) == 340
    # extra and test as the draw made them before the null draw existed: the shuffle's first 2n rows
    rng = np.random.default_rng([0, 3])
    for rows in (np.flatnonzero(np.equal(LABELS, c)) for c in range(4)):  # train's draws, class by class
        rng.choice(rows, size={500: 20, 300: 12, 150: 6, 50: 2}[len(rows)], replace=False)
    rest = rng.permutation(np.setdiff1d(np.arange(len(LABELS)), sub.train))
    assert (sub.extra == rest[:100]).all() and (sub.test == rest[100:200]).all()
    short = draw(
        LABELS, subsample=3, m=40, n=400, seed=0, train_draw="proportional"
    )  # 40 + 2*400 leaves 160 rows
    assert len(short.null) == 160 and not set(short.null) & set(short.test)
    evaluated = draw_eval(LABELS, subsample=3, n=100, seed=0, size=len(LABELS))
    stratified = [np.bincount(LABELS[evaluated.rows(s)], minlength=4) for s in ("extra", "test", "null")]
    assert (stratified[0] == stratified[2]).all() and not set(evaluated.null) & set(evaluated.extra)


def test_the_proportional_train_draw_keeps_every_class():
    sub = draw(LABELS, subsample=0, m=40, n=100, seed=0, train_draw="proportional")
    assert np.bincount(LABELS[sub.train], minlength=4).tolist() == [20, 12, 6, 2]
    rare = np.repeat([0, 1], [995, 5])  # 0.5% class still gets a train row
    assert np.bincount(rare[draw(rare, 0, m=10, n=50, seed=0, train_draw="proportional").train]).tolist() == [
        9,
        1,
    ]
    # the default, the study's: int(m / K) of each class
    assert np.bincount(LABELS[draw(LABELS, 0, m=40, n=100, seed=0).train]).tolist() == [10, 10, 10, 10]


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


def test_each_stream_of_a_unit_is_the_one_its_results_were_drawn_with():
    from harness.core.design import seeds

    found = [seeds.derive(7, 3, s) for s in seeds.STREAMS]
    assert found == [[7, 3], [7, 3, 1], [7, 3, 2], 7, 10, 7, [7, 4], [7, 3]]  # sample: [seed, 3], no k
    assert [int(seeds.document(7, 12).integers(100)) for _ in "ab"] == [
        int(np.random.default_rng([7, 12]).integers(100))
    ] * 2  # a document's own stream, as every recorded exposure test drew it
    assert seeds.head(7, 3, 0) != seeds.head(7, 3, 1)
    with pytest.raises(ValueError, match="no random stream 'trian'.*draw, eval_draw"):
        seeds.derive(7, 3, "trian")
