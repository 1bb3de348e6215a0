#!/usr/bin/env python3
"""Median table of one or more `hfta sweep` throughput.csv files: samples/s per (mode, B) as the
median over repeats, normalized to serial B=1, the plan each fused row ran, and whether fused
reaches a fraction (default 0.97) of max(serial, concurrent) at every B (issue 11's criterion).
A mode with no successful row at some B (concurrent processes that would not fit in memory) is
left out of that max and said below the table.

    python3 benchmarks/sweep_table.py results/*/throughput.csv [--fraction 0.97]
"""
import argparse
import csv
import statistics
import sys
from collections import Counter, defaultdict


def table(path, fraction, asked):
    rows = list(csv.DictReader(open(path)))
    if not rows:
        return True
    model = rows[0]["model"]
    samples = defaultdict(list)
    plans = defaultdict(Counter)
    not_run = {}  # (mode, B) -> why (e.g. concurrent processes that would not fit in memory)
    for r in rows:
        if r["status"] != "ok":
            not_run.setdefault((r["mode"], int(r["B"])), f'{r["status"]}: {r["error"]}')
            continue
        if r["mode"] == "fused" and r.get("plan_asked", asked) not in (asked, ""):
            continue  # another plan of a sweep with several
        key = (r["mode"], int(r["B"]))
        samples[key].append(float(r["samples_per_s"]))
        if r["mode"] == "fused":
            plans[int(r["B"])][r.get("plan", "fused")] += 1
    base = statistics.median(samples[("serial", 1)])
    Bs = sorted({B for (_, B) in samples})
    print(f"\n{model} ({path}): median samples/s over repeats, normalized to serial B=1 "
          f"({base:.0f} samples/s)")
    print(f"{'B':>4} {'serial':>8} {'concurrent':>11} {'fused':>8} {'fused/max':>10}  plan(s) fused ran")
    ok = True
    for B in Bs:
        med = {m: statistics.median(samples[(m, B)]) if samples[(m, B)] else float("nan")
               for m in ("serial", "concurrent", "fused")}
        # A mode that could not run at this B (concurrent processes the memory cannot hold) is
        # no option for the user: fused is compared with the modes that ran.
        best_other = max(v for m, v in med.items() if m != "fused" and v == v)
        ratio = med["fused"] / best_other
        # Only the baseline ran at this B (serial B=1 of a sweep that did not ask for B=1).
        judged = ratio == ratio
        ok &= ratio >= fraction or not judged
        ran = ", ".join(f"{p} x{n}" for p, n in plans[B].most_common())
        print(f"{B:>4} {med['serial']/base:>8.2f} {med['concurrent']/base:>11.2f} "
              f"{med['fused']/base:>8.2f} {ratio:>10.3f}  {ran}"
              + ("" if ratio >= fraction or not judged else f"   < {fraction}"))
    for (mode, B), why in sorted(not_run.items()):
        if not samples[(mode, B)]:
            print(f"  {mode} B={B} did not run ({why})")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--fraction", type=float, default=0.97)
    ap.add_argument("--plan", default="auto", help="the fused rows of this --plan (default auto)")
    a = ap.parse_args()
    ok = all([table(p, a.fraction, a.plan) for p in a.csv])
    print("\nfused >= {} x max(serial, concurrent) at every B: {}".format(a.fraction, "yes" if ok else "NO"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
