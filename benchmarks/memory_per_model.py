#!/usr/bin/env python3
"""Peak RSS per model of fused arrays against one model alone, at several thread counts.

For each model, thread count and B, runs `hfta trial` (synthetic data, plan auto with a fresh
plan cache per model and thread count, so the first run's candidate timing is included, as in a
user's first `hfta train`) and reads its peak_rss_bytes. Prints a Markdown table: peak RSS, peak
RSS / B, and that over one model's peak RSS at the same thread count (the issue's bound: at most
1.1).

  ./benchmarks/memory_per_model.py --hfta ./build/hfta --models lenet,resnet18 --threads 2,16 \
      --B 1,8,16
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

# HFTA's shapes (batch 64 for LeNet, 32 for the rest) and the sweep's data flags.
MODEL_FLAGS = {
    "mlp": ["--batch-size", "64"],
    "lenet": ["--batch-size", "64"],
    "resnet18": ["--batch-size", "32"],
    "mobilenetv2": ["--batch-size", "32"],
    "pointnet_cls": ["--batch-size", "32"],
    "pointnet_seg": ["--batch-size", "32"],
    "transformer": ["--batch-size", "20"],
}


def trial(hfta, model, B, threads, cache, plan):
    cmd = [hfta, "trial", "--model", model, "--B", str(B), "--threads", str(threads),
           "--steps", "1", "--warmup", "1", "--plan", plan] + MODEL_FLAGS.get(model, [])
    env = dict(os.environ, HFTA_PLAN_CACHE=cache)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stderr}")
    text = out.stdout + out.stderr
    rss = re.search(r"peak_rss_bytes=(\d+)", text)
    chosen = re.search(r"plan=(\S+)", text)
    if not rss:
        sys.exit(f"{' '.join(cmd)}: no peak_rss_bytes in its output:\n{text}")
    return int(rss.group(1)), chosen.group(1) if chosen else plan


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hfta", default="./build/hfta")
    ap.add_argument("--models", default="lenet,resnet18,mobilenetv2,pointnet_cls,transformer")
    ap.add_argument("--threads", default="2,16")
    ap.add_argument("--B", default="1,8,16")
    ap.add_argument("--plan", default="auto")
    args = ap.parse_args()
    print("| model | threads | B | plan | peak RSS (MiB) | per model (MiB) | per model / one alone |")
    print("|---|---|---|---|---|---|---|")
    for model in args.models.split(","):
        for threads in [int(t) for t in args.threads.split(",")]:
            with tempfile.TemporaryDirectory() as d:
                cache = os.path.join(d, "plans.json")
                alone = None
                for B in [int(b) for b in args.B.split(",")]:
                    rss, plan = trial(args.hfta, model, B, threads, cache, args.plan)
                    if B == 1:
                        alone = rss
                    ratio = f"{rss / B / alone:.2f}" if alone else ""
                    print(f"| {model} | {threads} | {B} | {plan} | {rss / 2**20:,.0f} | "
                          f"{rss / B / 2**20:,.0f} | {ratio} |", flush=True)


if __name__ == "__main__":
    main()
