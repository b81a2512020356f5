"""regions.py SASS: for each function of a cuobjdump -sass listing, the instructions of each region
between its block barriers (BAR.SYNC), by opcode, leaving out the basic blocks that hold a 32-bit
global load (LDG.E without a width: the element-at-a-time fallbacks), and the HMMA of the region
with the instructions an HMMA there."""
import collections
import re
import sys

functions, ins = [], None
for line in open(sys.argv[1]):
    f = re.match(r"\s*Function : (\S+)", line)
    if f:
        ins = []
        functions.append((f.group(1), ins))
        continue
    m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
    if m and ins is not None:
        ins.append((int(m.group(1), 16), m.group(2)))
for name, ins in functions:
    print(name)
    targets = {int(m.group(1), 16) for _, t in ins for m in [re.search(r"BRA (?:\S+, )?(0x[0-9a-f]+)", t)] if m}
    bars = [0] + [i for i, (_, t) in enumerate(ins) if "BAR.SYNC" in t] + [len(ins) - 1]
    for lo, hi in zip(bars, bars[1:]):
        blocks, cur = [], []
        for a, t in ins[lo : hi + 1]:
            if a in targets and cur:
                blocks.append(cur)
                cur = []
            cur.append(t)
            if "BRA" in t or "EXIT" in t:
                blocks.append(cur)
                cur = []
        if cur:
            blocks.append(cur)
        kept = [b for b in blocks if not any(re.search(r"\bLDG\.E(\.64)?\s", x) for x in b)]
        ops = collections.Counter(re.sub(r"^@!?U?P[0-9T]+\s+", "", x).split()[0].split(".")[0] for b in kept for x in b)
        n = sum(ops.values())
        if n:
            top = " ".join(f"{k} {v}" for k, v in ops.most_common(14))
            per = f", {n / ops['HMMA']:.1f} an HMMA" if ops["HMMA"] else ""
            print(f"  {ins[lo][0]:06x}-{ins[hi][0]:06x}: {n} instructions in {len(kept)} of {len(blocks)} blocks{per}: {top}")
