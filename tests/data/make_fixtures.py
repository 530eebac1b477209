"""Writes the default tier's fixture data: made-up texts for four shipped tasks, in the canonical form
(`text`, `label`) the offline samples use, so that a clone alone passes the default tier.

The texts are generated here from word lists, never copied: the offline samples in ../shared/data may not
be copied into the repository (their README says so). What the fixtures take from them is their shape:
each task's classes in its YAML's order, and roughly its class proportions (trec's rare first class stays
rare, rotten_tomatoes stays sorted by label) at a few hundred rows a task. Rerun to rebuild them:
`python tests/data/make_fixtures.py` (deterministic: the same files every time).
"""

from __future__ import annotations

import random
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
FILLER = (
    "the a of to and in on for with at by from about over after this that new first last more most "
    "some many few other said says will would could may today week year report people group local"
).split()
WORDS = {  # per task, per class in the YAML's order: the words that make a text of that class
    "ag_news": [
        "minister election border talks treaty embassy rebels parliament ceasefire capital refugees",
        "coach season league striker playoff championship injury tournament goal match victory",
        "shares profit quarterly market investors merger bank earnings prices company retail",
        "software chip internet researchers satellite browser wireless scientists device network",
    ],
    "rotten_tomatoes": [
        "dull tedious clumsy flat boring lifeless mess pointless stale forgettable hollow",
        "charming moving witty gripping delightful sharp tender funny vivid rewarding graceful",
    ],
    "trec": [
        "abbreviation acronym stand short letters initials",
        "animal color instrument food sport plant invention product language disease",
        "mean definition cause reason origin describe explain why how meaning",
        "person inventor author president actor founder leader painter singer",
        "city country river mountain state capital island ocean where located",
        "year date many much population distance percent temperature long number",
    ],
    "climate_fever": [
        "warming emissions carbon temperature records confirm rising observed measured",
        "hoax cooling myth never exaggerated fake natural cycle disproved",
        "ocean clouds models sensitivity uncertain regional estimates projections",
        "debated contested controversial disputed claims scientists disagree",
    ],
}
OPENERS = {  # trec's texts are questions: an opener per class
    "trec": [
        ["What does", "What is the abbreviation"],
        ["What", "Which"],
        ["How", "Why", "What is"],
        ["Who"],
        ["Where", "What"],
        ["How many", "When", "How much"],
    ],
}
SHAPE = {  # rows, share of each class (roughly the sample's), words per text (low, high)
    "ag_news": (600, [0.25, 0.25, 0.25, 0.25], (18, 40)),
    "rotten_tomatoes": (600, [0.5, 0.5], (8, 30)),
    "trec": (600, [0.02, 0.23, 0.21, 0.23, 0.15, 0.16], (5, 12)),
    "climate_fever": (300, [0.42, 0.17, 0.31, 0.10], (8, 22)),
}


def text(rng: random.Random, task: str, label: int, low: int, high: int) -> str:
    words = WORDS[task][label].split()
    body = [
        rng.choice(words) if rng.random() < 0.4 else rng.choice(FILLER) for _ in range(rng.randint(low, high))
    ]
    if task in OPENERS:
        return f"{rng.choice(OPENERS[task][label])} {' '.join(body)} ?"
    return " ".join(body).capitalize() + "."


def build(task: str) -> pd.DataFrame:
    rng = random.Random(task)
    rows, shares, (low, high) = SHAPE[task]
    labels = [k for k, share in enumerate(shares) for _ in range(max(4, round(rows * share)))]
    if task != "rotten_tomatoes":  # the sample of rotten_tomatoes is sorted by label; the others are not
        rng.shuffle(labels)
    seen, texts = set(), []
    for label in labels:
        t = text(rng, task, label, low, high)
        while t in seen:
            t = text(rng, task, label, low, high)
        seen.add(t)
        texts.append(t)
    return pd.DataFrame({"text": texts, "label": pd.array(labels, dtype="int64")})


if __name__ == "__main__":
    for task in SHAPE:
        (HERE / task).mkdir(exist_ok=True)
        build(task).to_parquet(HERE / task / "data.parquet", index=False)
        print(task, len(build(task)))
