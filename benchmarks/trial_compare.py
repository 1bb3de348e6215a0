#!/usr/bin/python3
"""Compares the step time of two hfta binaries (e.g. before and after a change) on the same
`hfta trial` cases, interleaved (the order alternates every repeat), and prints the medians.

  benchmarks/trial_compare.py OLD_HFTA NEW_HFTA [--repeats 5] [--threads 2]
"""
import argparse
import re
import statistics
import subprocess

CASES = [
    ('mlp', '--dataset synthetic --B 4 --batch-size 64 --steps 200 --warmup 20'),
    ('lenet', '--dataset synthetic --B 4 --batch-size 64 --steps 40 --warmup 5'),
    ('transformer',
     '--dataset synthetic-text --vocab 2000 --B 2 --batch-size 8 --steps 20 --warmup 3'),
    ('dcgan', '--dataset synthetic --image-size 16 --B 2 --batch-size 16 --steps 10 --warmup 2'),
]


def step_ms(exe, model, flags, threads):
    cmd = f'{exe} trial --model {model} {flags} --plan fused --threads {threads} --seed 1'
    # OpenMP's default wait policy (spinning), as `hfta train` runs: passive waits add a wake-up
    # to every parallel region and distort small ops.
    out = subprocess.run(cmd, shell=True, capture_output=True, text=True,
                         env={'PATH': '/usr/bin:/bin'})
    m = re.search(r'step_ms=([0-9.e+-]+)', out.stdout)
    if not m:
        raise SystemExit(f'{cmd} failed:\n{out.stdout[-500:]}{out.stderr[-500:]}')
    return float(m.group(1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument('old')
    p.add_argument('new')
    p.add_argument('--repeats', type=int, default=5)
    p.add_argument('--threads', type=int, default=2)
    a = p.parse_args()
    for model, flags in CASES:
        times = {'old': [], 'new': []}
        for r in range(a.repeats):
            order = [('old', a.old), ('new', a.new)]
            for name, exe in order if r % 2 == 0 else reversed(order):
                times[name].append(step_ms(exe, model, flags, a.threads))
        old, new = statistics.median(times['old']), statistics.median(times['new'])
        print(f'{model:12s} old {old:9.3f} ms  new {new:9.3f} ms  new/old {new / old:.3f}  '
              f'(old {min(times["old"]):.2f}-{max(times["old"]):.2f}, '
              f'new {min(times["new"]):.2f}-{max(times["new"]):.2f})')


if __name__ == '__main__':
    main()
