#!/usr/bin/python3
"""Times one training step (forward, backward, Adam) of the same MLP, LeNet, ResNet-18 and
MobileNetV2 at batch 64 in hfta (B=1, via `hfta trial`) and in PyTorch on CPU, in one run, and
prints PyTorch / hfta.

Needs Debian's python3-torch (`apt-get install python3-torch`); it is a benchmark, not a test.
Both sides use the same thread count, synthetic data of the same shape, and flush denormals
(hfta does so on every thread; torch.set_flush_denormal(True) here). The two are measured in
alternating rounds so that a noisy neighbour affects both; each side's time is its median round.

  /usr/bin/python3 benchmarks/torch_compare.py [--hfta build/hfta] [--threads 2] [--rounds 5]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit("torch_compare.py needs PyTorch: apt-get install python3-torch, "
             "and run it with /usr/bin/python3")


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402

# The sample shape `hfta trial --dataset synthetic` uses for each model (its default).
SAMPLE_SHAPES = {"mlp": (1, 28, 28), "lenet": (1, 28, 28), "resnet18": (3, 32, 32),
                 "mobilenetv2": (3, 32, 32)}


def torch_step_ms(name, batch, warmup, steps):
    torch.manual_seed(1)
    shape = SAMPLE_SHAPES[name]
    model = torch_models.build(name, shape, 10)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(batch, *shape)
    y = torch.randint(0, 10, (batch,))

    def step():
        opt.zero_grad(set_to_none=False)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(warmup):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps * 1000.0


def hfta_step_ms(hfta, name, batch, warmup, steps, threads):
    out = subprocess.run(
        [hfta, "trial", "--model", name, "--dataset", "synthetic", "--B", "1",
         "--batch-size", str(batch), "--warmup", str(warmup), "--steps", str(steps),
         "--threads", str(threads)],
        capture_output=True, text=True)
    match = re.search(r"\bstep_ms=([0-9.eE+-]+)", out.stdout)
    if out.returncode != 0 or not match:
        sys.exit(f"`hfta trial` failed ({out.returncode}): {out.stderr.strip()}")
    return float(match.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hfta", default="build/hfta")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--models", default="mlp,lenet,resnet18,mobilenetv2")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    print(f"PyTorch {torch.__version__}, {args.threads} threads; batch {args.batch_size}; "
          f"median of {args.rounds} alternating rounds")
    print(f"{'model':<12} {'hfta ms':>9} {'torch ms':>9} {'torch/hfta':>10}")
    for name in args.models.split(","):
        steps = {"mlp": 200, "lenet": 20}.get(name, 10)
        ours, theirs = [], []
        for _ in range(args.rounds):
            ours.append(hfta_step_ms(args.hfta, name, args.batch_size, 5, steps, args.threads))
            theirs.append(torch_step_ms(name, args.batch_size, 5, steps))
        o, t = statistics.median(ours), statistics.median(theirs)
        print(f"{name:<12} {o:9.3f} {t:9.3f} {t / o:10.2f}", flush=True)


if __name__ == "__main__":
    main()
