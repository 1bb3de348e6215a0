#!/usr/bin/python3
"""What `--deterministic` costs: the step time of `hfta trial` with and without it, per model, for
one model alone (B = 1) and for a fused array (plan auto, which times its candidates under each
mode separately), interleaved (the order alternates every repeat), medians of the repeats.

  benchmarks/deterministic_cost.py [--hfta build/hfta] [--repeats 3] [--threads 2] [--B 4]
      [--models mlp,lenet,...]

Prints a Markdown table for docs/benchmarks.md. Each (model, B) gets its own plan cache, shared by
its repeats, so plan auto times its candidates once per mode and later repeats read the choice.
"""
import argparse
import os
import re
import statistics
import subprocess
import tempfile

# HFTA's shapes where it has them (batch 64 for the MLP and LeNet, 32 for the conv nets).
CASES = {
    'mlp': '--dataset synthetic --batch-size 64 --steps 100 --warmup 10',
    'lenet': '--dataset synthetic --batch-size 64 --steps 30 --warmup 5',
    'resnet18': '--dataset synthetic --batch-size 32 --steps 6 --warmup 2',
    'mobilenetv2': '--dataset synthetic --batch-size 32 --steps 6 --warmup 2',
    'pointnet_cls': '--dataset shapes --batch-size 32 --steps 6 --warmup 2',
    'transformer': '--dataset synthetic-text --vocab 2000 --batch-size 8 --steps 10 --warmup 2',
    'dcgan': '--dataset synthetic --image-size 32 --batch-size 16 --steps 4 --warmup 1',
}


def step_ms(hfta, model, B, threads, deterministic, cache):
    cmd = (f'{hfta} trial --model {model} {CASES[model]} --B {B} --plan auto --threads {threads} '
           f'--seed 1' + (' --deterministic' if deterministic else ''))
    # OpenMP's default wait policy (spinning), as `hfta train` and a sweep's lone processes run:
    # passive waits add a wake-up to every parallel region and distort small ops.
    env = dict(os.environ, HFTA_PLAN_CACHE=cache)
    out = subprocess.run(cmd, shell=True, capture_output=True, text=True, env=env)
    ms = re.search(r'step_ms=([0-9.e+-]+)', out.stdout)
    plan = re.search(r'plan=(\S+)', out.stdout)
    if not ms:
        raise SystemExit(f'{cmd} failed:\n{out.stdout[-500:]}{out.stderr[-500:]}')
    return float(ms.group(1)), plan.group(1) if plan else '?'


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--hfta', default='build/hfta')
    p.add_argument('--repeats', type=int, default=3)
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--B', type=int, default=4)
    p.add_argument('--models', default=','.join(CASES))
    a = p.parse_args()
    print('| model | B | default step ms (plan) | deterministic step ms (plan) | deterministic / default |')
    print('|---|---|---|---|---|')
    with tempfile.TemporaryDirectory() as tmp:
        for model in a.models.split(','):
            for B in (1, a.B):
                cache = os.path.join(tmp, f'{model}_{B}.json')
                times = {False: [], True: []}
                plans = {}
                for r in range(a.repeats):
                    for det in (False, True) if r % 2 == 0 else (True, False):
                        ms, plan = step_ms(a.hfta, model, B, a.threads, det, cache)
                        times[det].append(ms)
                        plans[det] = plan
                d, s = statistics.median(times[False]), statistics.median(times[True])
                print(f'| {model} | {B} | {d:.2f} ({plans[False]}) | {s:.2f} ({plans[True]}) | '
                      f'{s / d:.2f} |', flush=True)


if __name__ == '__main__':
    main()
