#!/usr/bin/python3
"""Trains the models `hfta train` trains, in PyTorch, with the same hyperparameters and steps,
one model per learning rate, and prints each model's Fashion-MNIST test accuracy: the reference
for hfta's per-model results (same architecture, initialization rule, optimizer, batch size and
number of steps; the shuffling and initial weights are PyTorch's own).

  /usr/bin/python3 benchmarks/torch_train.py --model resnet18 --lr 0.0003,0.001,0.003 \
      --iters 300 [--batch-size 64] [--optimizer adam]
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--lr", default="0.0003,0.001,0.003")
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--optimizer", default="adam", choices=["adam", "adadelta", "sgd"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    x, y = torch_models.fashion_mnist("train")
    tx, ty = torch_models.fashion_mnist("test")
    for lr in [float(v) for v in args.lr.split(",")]:
        torch.manual_seed(args.seed)
        model = torch_models.build(args.model, (1, 28, 28), 10)
        opt = {"adam": torch.optim.Adam, "adadelta": torch.optim.Adadelta,
               "sgd": torch.optim.SGD}[args.optimizer](model.parameters(), lr=lr)
        order = torch.randperm(len(x))
        start = time.perf_counter()
        model.train()
        for step in range(args.iters):
            idx = order[step * args.batch_size:(step + 1) * args.batch_size]
            opt.zero_grad()
            F.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
        seconds = time.perf_counter() - start
        loss, acc = torch_models.evaluate(model, tx, ty)
        print(f"{args.model} lr {lr:g}: {args.iters} steps in {seconds:.1f} s, test loss "
              f"{loss:.4f}, test acc {100 * acc:.2f}%", flush=True)


if __name__ == "__main__":
    main()
