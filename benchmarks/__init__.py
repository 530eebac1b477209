"""Speed and power scripts that print ratios measured side by side in one run; each runs as
`python benchmarks/NAME.py` and takes `--smoke`."""
