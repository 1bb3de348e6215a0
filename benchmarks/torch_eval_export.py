#!/usr/bin/python3
"""Loads a model written by `hfta export` into its PyTorch module (torchvision's resnet18 /
mobilenet_v2 with the file's input channels and classes, or torch_models' MLP / LeNet) with
load_state_dict(strict=True), and prints its Fashion-MNIST test loss and accuracy, to compare
with `hfta eval` of the same model.

  /usr/bin/python3 benchmarks/torch_eval_export.py model.safetensors
"""
import argparse
import ast
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--data-dir", default=torch_models.FASHION_MNIST_DIR)
    args = ap.parse_args()
    torch.set_num_threads(2)
    state, meta = torch_models.read_safetensors(args.file)
    shape = tuple(ast.literal_eval(meta["sample_shape"]))
    model = torch_models.build(meta["hfta_model"], shape, int(meta["num_classes"]))
    model.load_state_dict(state, strict=True)
    x, y = torch_models.fashion_mnist("test", args.data_dir)
    loss, acc = torch_models.evaluate(model, x, y)
    print(f"{args.file} ({meta['hfta_model']}, {meta['source']}): PyTorch test loss {loss:.4f}, "
          f"test acc {100 * acc:.2f}%")


if __name__ == "__main__":
    main()
