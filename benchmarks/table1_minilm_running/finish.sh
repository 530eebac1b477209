#!/usr/bin/env bash
# When the run has written its 80th unit: ship the cell beside the first (benchmarks/table1_minilm/m100,
# as m50 ships: units, tables, manifest, the logs gzipped) and read both cells with the plan's commands.
# Run from the repository root; $1: the run's worktree (default ../table1). Refuses a cell not whole.
set -euo pipefail
wt=${1:-$(dirname "$(pwd)")/table1}
src="$wt/results/table1_minilm/m100/n100/minilm"
units=$(find "$src" -path '*/units/*.json' | wc -l)
[ "$units" -eq 80 ] || { echo "error: $src holds $units of 80 units: not whole yet" >&2; exit 1; }
dst=benchmarks/table1_minilm/m100/n100/minilm
mkdir -p "$dst/logs"
rsync -a --exclude=logs --exclude='.*' "$src/" "$dst/"
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
