"""summary.txt from the raw results (raw.tar.xz): per call and variant, off the MLP suite (controls left out), the
geometric mean (and min) of cuBLAS ms / variant ms on the whole GPU, beside the push kernel's SMs against cuBLAS on the
whole GPU, and against cuBLASLt on the same SMs (the median over sweeps of the ratio within each sweep).

    tar -xJf raw.tar.xz && python3 provenance/summary.py > summary.txt
"""
import json
import math


def gmean(v):
    return math.exp(sum(map(math.log, v)) / len(v))


for call, path in [("1", "call1/notify-bench.json"), ("2", "call2/notify-bench.json"), ("3", "call3/notify-bench.json"), ("4", "call4/ab-bench.json"), ("6", "call6/coal-bench.json"), ("7", "call7/ab-bench.json")]:
    r = json.load(open(path))
    names = [c["label"].split(" ")[0] for c in r["shapes"][0]["cases"]]
    whole, push, same = ({n: [] for n in names} for _ in range(3))
    for s in r["shapes"]:
        if s.get("control"):
            continue
        for c in s["cases"]:
            n = c["label"].split(" ")[0]
            if "ratio" not in c:  # call 7's next-* kernels, which this tree's primitives refuse (README)
                continue
            if s.get("reserve"):
                push[n].append(c["ratio"])
                ratios = sorted(a / b for a, b in zip(s["cublasSameSms"]["sweepsMs"], c["sweepsMs"]))
                same[n].append(ratios[len(ratios) // 2])
            else:
                whole[n].append(c["ratio"])
    print(f"call {call} ({r['device']}, torch {r['torch']}, triton {r['triton']}): 6 off-table GEMM+RS producer shapes")
    print(f"  {'variant':12s} {'whole GPU':>9s} {'min':>6s} {'push÷cuBLAS':>11s} {'push÷cuBLASLt same SMs':>22s} {'min':>6s}")
    for n in names:
        if not whole[n]:
            continue
        print(
            f"  {n:12s} {gmean(whole[n]):9.3f} {min(whole[n]):6.3f} {gmean(push[n]):11.3f} {gmean(same[n]):22.3f} {min(same[n]):6.3f}"
        )
