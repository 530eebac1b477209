#!/usr/bin/env bash
# When the run has written its 80th unit: ship the cell beside the first (benchmarks/table1_minilm/m100,
# as m50 ships: units, tables, manifest, the logs gzipped) and read both cells with the plan's commands.
# Run from the repository root; $1: the run's worktree (default ../table1). Refuses a cell not whole.
set -euo pipefail
wt=${1:-$(dirname "$(pwd)")/table1}
src="$wt/results/table1_minilm/m100/n100/minilm"
units=$(find "$src" -path '*/units/*.json' | wc -l)
[ "$units" -eq 80 ] || { echo "error: $src holds $units of 80 units: not whole yet" >&2; exit 1; }
# The tasks whose units were all carried in have no tables: the plan's commit wrote them only for the tasks
# it ran. Rebuild every task's from its units with that commit's code, as its own run would have.
(cd "$wt" && PYTHONPATH="$wt" "$OLDPWD/.venv/bin/python" -c '
import sys; from pathlib import Path; from harness import results
for tdir in sorted(Path(sys.argv[1]).glob("*/units")): results.rebuild(tdir.parent)' "$src")
dst=benchmarks/table1_minilm/m100/n100/minilm
mkdir -p "$dst/logs"
(cd "$src" && tar --exclude=./logs --exclude='./.*' -cf - .) | (cd "$dst" && tar -xf -)
for f in "$src"/logs/*; do gzip -c "$f" > "$dst/logs/$(basename "$f").gz"; done
cp -n benchmarks/table1_minilm_running/m100/n100/minilm/logs/*.gz "$dst/logs/"  # earlier machines' logs
out=${OUT:-/tmp/table1_m100}
mkdir -p "$out"
.venv/bin/tapt-bench summarize benchmarks/table1_minilm | tee "$out/summarize.txt"
.venv/bin/python benchmarks/table1_compare.py --results benchmarks/table1_minilm --model minilm | tee "$out/compare.txt"
.venv/bin/tapt-bench analyze fit benchmarks/table1_minilm --models minilm --m 100 --n 100 | tee "$out/fit_ours.txt"
.venv/bin/tapt-bench analyze fit ../shared/reference/accuracies/bert_gpt2 --models bert --m 100 --n 100 \
  | tee "$out/fit_study.txt"
echo "shipped $dst ($(du -sh "$dst" | cut -f1)); outputs in $out; then: README and docs rows, remove benchmarks/table1_minilm_running"
