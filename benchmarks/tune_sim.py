#!/usr/bin/env python3
"""Simulates `mpirun -np K hfta tune --algorithm hyperband` at scale (python3 stdlib only).

What it models (tune/tune_mpi.h, tune_scheduler.h):
  * HFHT's Hyperband brackets (R = 81, eta = 3, skip_last 0), bracket after bracket, repeated
    until `--configs` configurations have started. Each round of a bracket is one batch: the
    scheduler waits for the whole batch before the next round (a barrier per round).
  * A batch's trials split into non-fusible groups (here: `--groups` batch sizes, drawn at
    random), each group into arrays of at most F models, in order of first appearance.
  * Arrays queue FIFO; rank 0 hands the next array to whichever rank is idle. With more than 4
    ranks rank 0 only coordinates, so K - 1 ranks train.
  * Cost of an array of B models trained for u budget units: u * (1 + c * (B - 1)) time units,
    where 1 is one model alone for one unit. c < 1 is what fusion saves: c = 0.35 means an
    array of 8 runs 8 models in 3.45x one model's time (2.3x the throughput), in line with the
    fused-vs-serial speedups of small models in docs/benchmarks.md. A fixed per-array start cost
    `--overhead` (building the model, loading checkpoints, evaluating) is added.

Prints, per fused array size F, for the scheduler as it is (rounds in turn, a barrier each) and
for brackets run at once (each bracket's rounds in turn, all brackets' arrays in one queue):
makespan, rank utilisation (busy rank-time / (ranks x makespan)) and the speedup over F = 1.
"""
import argparse
import heapq
import math
import random


def brackets(R, eta, skip_last):
    s_max = 0
    while eta ** (s_max + 1) <= R:
        s_max += 1
    B = (s_max + 1) * R
    out = []
    for s in range(s_max, -1, -1):
        n = math.ceil(B / R / (s + 1) * eta**s)
        rounds = []
        for i in range(0, s - skip_last + 1):
            keep = n if i == 0 else n // eta**i
            r = max(1, round(R * eta ** (i - s)))
            rounds.append((keep, r))
        out.append(rounds)
    return out


def bracket_runs(configs, R, eta, skip_last, groups, rng):
    """Brackets until `configs` started; each a list of rounds of (trial, group, from, to)."""
    started, runs = 0, []
    while started < configs:
        for rounds in brackets(R, eta, skip_last):
            if started >= configs:
                break
            n = min(rounds[0][0], configs - started)
            trials = [(started + t, rng.randrange(groups), rng.random()) for t in range(n)]
            started += n
            prev, run = 0, []
            for i, (keep, r) in enumerate(rounds):
                if i > 0:
                    # Survivors: the best by a hidden quality score, as successive halving keeps.
                    trials = sorted(trials, key=lambda t: t[2])[: max(1, len(trials) // eta)]
                run.append([(t, g, prev, r) for t, g, _ in trials])
                prev = r
            runs.append(run)
    return runs


def arrays_of(batch, F):
    order, by = [], {}
    for t, g, a, b in batch:
        key = (g, a, b)
        if key not in by:
            by[key] = []
            order.append(key)
        by[key].append(t)
    for key in order:
        ts = by[key]
        for i in range(0, len(ts), F):
            yield key, ts[i : i + F]


def cost(args, a, b, B):
    return args.overhead + (b - a) * (1 + args.c * (B - 1))


def simulate(args, F, concurrent):
    """(makespan, utilisation, arrays). concurrent=False: hfta tune today, one round of one
    bracket at a time (a barrier per round). concurrent=True: every bracket runs at once, a
    round's arrays queue as soon as the bracket's previous round ended."""
    rng = random.Random(args.seed)
    runs = bracket_runs(args.configs, args.R, args.eta, args.skip_last, args.groups, rng)
    workers = args.ranks - 1 if args.ranks > 4 else args.ranks
    busy, narrays = 0.0, 0
    if not concurrent:
        clock = 0.0
        for run in runs:
            for batch in run:
                free = [clock] * workers  # when each rank is next idle
                for (g, a, b), ts in arrays_of(batch, F):
                    k = min(range(workers), key=lambda w: free[w])  # FIFO to the first idle
                    c = cost(args, a, b, len(ts))
                    free[k] += c
                    busy += c
                    narrays += 1
                clock = max(free)
        return clock, busy / (workers * clock), narrays
    queue = []  # FIFO of (bracket, cost)
    left = {}  # bracket -> arrays of its current round still to finish
    events = []  # (finish time, bracket)
    idle, clock = workers, 0.0
    round_of = [0] * len(runs)

    def enqueue(i):
        arrays = list(arrays_of(runs[i][round_of[i]], F))
        left[i] = len(arrays)
        for (g, a, b), ts in arrays:
            queue.append((i, cost(args, a, b, len(ts))))

    for i in range(len(runs)):
        enqueue(i)
    head = 0
    while head < len(queue) or events:
        while idle > 0 and head < len(queue):
            i, c = queue[head]
            head += 1
            idle -= 1
            busy += c
            narrays += 1
            heapq.heappush(events, (clock + c, i))
        clock, i = heapq.heappop(events)
        idle += 1
        left[i] -= 1
        if left[i] == 0 and round_of[i] + 1 < len(runs[i]):
            round_of[i] += 1
            enqueue(i)
    return clock, busy / (workers * clock), narrays


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--configs", type=int, default=1000)
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--R", type=int, default=81)
    p.add_argument("--eta", type=int, default=3)
    p.add_argument("--skip-last", type=int, default=0)
    p.add_argument("--groups", type=int, default=2, help="non-fusible groups (batch sizes)")
    p.add_argument("--c", type=float, default=0.35, help="marginal cost of a model in an array")
    p.add_argument("--overhead", type=float, default=0.5, help="start cost of an array")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sizes", default="1,2,4,8,16,32,64")
    args = p.parse_args()
    print(
        f"Hyperband R={args.R} eta={args.eta} skip_last={args.skip_last}, {args.configs} "
        f"configurations, {args.groups} non-fusible groups, {args.ranks} ranks, array cost "
        f"u*(1+{args.c}*(B-1)) + {args.overhead}"
    )
    print()
    print("| max array size F | arrays | makespan, rounds in turn | utilisation | "
          "makespan, brackets at once | utilisation | speedup vs F=1, in turn / at once |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    base = None
    for F in [int(x) for x in args.sizes.split(",")]:
        m1, u1, n = simulate(args, F, False)
        m2, u2, _ = simulate(args, F, True)
        base = base or (m1, m2)
        print(f"| {F} | {n} | {m1:.0f} | {u1:.0%} | {m2:.0f} | {u2:.0%} | "
              f"{base[0] / m1:.2f}x / {base[1] / m2:.2f}x |")


if __name__ == "__main__":
    main()
