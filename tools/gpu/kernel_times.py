#!/usr/bin/env python3
"""Per-kernel device time of the decode rounds, from Nsight Compute's CSV over `tfc generate`.

usage: tools/gpu/kernel_times.py NCU_OUTPUT
where NCU_OUTPUT holds the output of
  ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
      bin/tfc generate --model CKPT --backend cuda --prompt "..." --max-tokens N --ignore-eos
(the report starts at its "ID" header; other lines are skipped). A decode round ends with the launch of the head
(`*_logits`); the prompt's launches, up to and including the first head launch, are left out.
Prints a markdown table: kernel, launches a round, µs a launch, share of the rounds' kernel time.
"""
import csv
import sys
from collections import defaultdict


def main(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        sys.exit(f"kernel_times: {path} has no Nsight Compute CSV report")
    rows = list(csv.DictReader(line for line in lines[start:] if line.startswith('"')))
    rows = [r for r in rows if r.get("Metric Name") == "gpu__time_duration.sum"]
    heads = [i for i, r in enumerate(rows) if r["Kernel Name"].endswith("_logits")]
    if len(heads) < 2:
        sys.exit(f"kernel_times: {path} has {len(heads)} head launches; decode at least 2 tokens")
    rounds = len(heads) - 1
    total, count = defaultdict(float), defaultdict(int)
    for r in rows[heads[0] + 1: heads[-1] + 1]:
        name = r["Kernel Name"]
        total[name] += float(r["Metric Value"].replace(",", ""))  # ns
        count[name] += 1
    all_ns = sum(total.values())
    print(f"{rounds} decode rounds, {all_ns / rounds / 1e6:.2f} ms of kernel time a round\n")
    print("| kernel | launches a round | µs a launch | share |")
    print("| --- | --- | --- | --- |")
    for name in sorted(total, key=lambda n: -total[n]):
        print(f"| `{name}` | {count[name] / rounds:g} | {total[name] / count[name] / 1e3:.1f} | {100 * total[name] / all_ns:.1f} % |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
