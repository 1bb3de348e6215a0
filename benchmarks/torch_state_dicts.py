#!/usr/bin/python3
"""Regenerates tests/cli/golden/state_dicts.txt: the state_dict (names, dtypes, shapes) of the
PyTorch module of every model of tests/cli/test_cli_matrix_slow.cpp, at the matrix's sizes. The
matrix test exports model 1 of each fused run with `hfta export` and expects the file's tensors to
be exactly these.

  /usr/bin/python3 benchmarks/torch_state_dicts.py            # writes the golden file
  /usr/bin/python3 benchmarks/torch_state_dicts.py --check m.safetensors transformer

--check loads an exported file into the module of MODEL (a name of MODELS below, e.g. dcgan:d)
with load_state_dict(strict=True), after printing any names, shapes or dtypes that differ (and
exiting 1 if some do). Needs Debian's python3-torch and python3-torchvision (the `python3` on
PATH may be another interpreter).

Lines of the golden file: `<model> <name> <dtype> <shape>` in state_dict order, dtype as
safetensors names it (F32, I64), shape as d0xd1x... or `scalar` for a 0-d tensor (BatchNorm's
num_batches_tracked).
"""
import argparse
import datetime
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests", "cli",
                      "golden", "state_dicts.txt")

# The matrix's sizes (tests/cli/test_cli_matrix_slow.cpp's data_flags):
# - image classifiers on --dataset synthetic take their model's default sample shape and 10
#   classes (models/model.cpp's table): [1, 28, 28] for mlp and lenet, [3, 32, 32] for resnet18,
#   mobilenetv2 and mobilenetv3_small / _large;
# - the PointNets on --dataset shapes --npoints 32: samples [32, 3], 10 classes
#   (datasets/shapes.h's kShapesClasses) or 22 parts (kShapesParts) for the segmenters;
# - the language models on the test's corpus (write_corpus: 120 lines over the 30 words
#   w0..w29, all of which occur) with --emsize 8 --nhid 16 --nlayers 1 --nhead 2: the
#   transformer's vocabulary is the 30 words and <eos> (31), BERT's those and its mask id (32),
#   as `hfta export` of the matrix runs writes in its metadata (vocab 31; vocab 32, mask_id 31);
# - dcgan on --dataset synthetic --image-size 8: samples [3, 8, 8], nz 100, ngf = ndf = 64.
IMAGE_CLASSES = 10
POINTS = 32
SHAPES_CLASSES, SHAPES_PARTS = 10, 22
LM = {"emsize": 8, "nhid": 16, "nlayers": 1, "nhead": 2}
TRANSFORMER_VOCAB = 31
BERT_VOCAB = 32
DCGAN_IMAGE, DCGAN_CHANNELS = 8, 3


def module(model):
    """The PyTorch module of matrix model `model` (dcgan: the generator; dcgan:d the
    discriminator)."""
    if model in ("mlp", "lenet"):
        return torch_models.build(model, (1, 28, 28), IMAGE_CLASSES)
    if model in ("resnet18", "mobilenetv2", "mobilenetv3_small", "mobilenetv3_large"):
        return torch_models.build(model, (3, 32, 32), IMAGE_CLASSES)
    if model in ("pointnet_cls", "pointnet_cls_ft"):
        return torch_models.build(model, (POINTS, 3), SHAPES_CLASSES)
    if model in ("pointnet_seg", "pointnet_seg_ft"):
        return torch_models.build(model, (POINTS, 3), SHAPES_PARTS)
    if model == "transformer":
        return torch_models.TransformerModel(TRANSFORMER_VOCAB, LM["emsize"], LM["nhead"],
                                             LM["nhid"], LM["nlayers"])
    if model == "bert":
        return torch_models.Bert(BERT_VOCAB, hidden=LM["emsize"], n_layers=LM["nlayers"],
                                 attn_heads=LM["nhead"], d_ff=LM["nhid"])
    if model == "dcgan":
        return torch_models.DcganGenerator(nc=DCGAN_CHANNELS, image=DCGAN_IMAGE)
    if model == "dcgan:d":
        return torch_models.DcganDiscriminator(nc=DCGAN_CHANNELS, image=DCGAN_IMAGE)
    raise SystemExit(f"unknown model {model}")


MODELS = ["mlp", "lenet", "resnet18", "mobilenetv2", "mobilenetv3_small", "mobilenetv3_large",
          "pointnet_cls", "pointnet_cls_ft", "pointnet_seg", "pointnet_seg_ft", "transformer",
          "bert", "dcgan", "dcgan:d"]
DTYPES = {torch.float32: "F32", torch.int64: "I64"}


def shape_str(shape):
    return "x".join(str(d) for d in shape) if len(shape) else "scalar"


def debian_version(package):
    """The installed Debian package's version, or None."""
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True,
                             text=True)
    except OSError:
        return None
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def write_golden(path):
    import torchvision
    command = "/usr/bin/python3 benchmarks/torch_state_dicts.py"
    versions = f"torch {torch.__version__}, torchvision {torchvision.__version__}"
    debian = [f"{p} {v}" for p in ("python3-torch", "python3-torchvision")
              if (v := debian_version(p))]
    if debian:
        versions += f" (Debian {', '.join(debian)})"
    lines = [
        f"# Written by `{command}` on {datetime.date.today().isoformat()} with {versions}.",
        "# The PyTorch state_dict of each model of tests/cli/test_cli_matrix_slow.cpp at the "
        "matrix's sizes",
        "# (dcgan: the generator, dcgan:d the discriminator), in state_dict order:",
        "# <model> <name> <dtype> <shape: d0xd1x... or scalar>",
    ]
    for model in MODELS:
        for name, tensor in module(model).state_dict().items():
            lines.append(f"{model} {name} {DTYPES[tensor.dtype]} {shape_str(tensor.shape)}")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {os.path.normpath(path)} ({len(lines) - 4} tensors of {len(MODELS)} models)")


def check(path, model):
    """Loads `path` into `model`'s module strictly; exits non-zero on any difference."""
    state, meta = torch_models.read_safetensors(path)
    net = module(model)
    expected = net.state_dict()
    missing = [n for n in expected if n not in state]
    extra = [n for n in state if n not in expected]
    shapes = [f"{n}: file {list(state[n].shape)}, torch {list(expected[n].shape)}"
              for n in expected if n in state and state[n].shape != expected[n].shape]
    dtypes = [f"{n}: file {state[n].dtype}, torch {expected[n].dtype}"
              for n in expected if n in state and state[n].dtype != expected[n].dtype]
    for what, names in (("missing", missing), ("extra", extra), ("shape differs", shapes),
                        ("dtype differs", dtypes)):
        for n in names:
            print(f"{what}: {n}")
    differ = len(missing) + len(extra) + len(shapes) + len(dtypes)
    if differ:
        sys.exit(f"{path}: {differ} tensors differ from {model}'s module")
    # Strict: every name and shape (it casts dtypes, hence the check above).
    net.load_state_dict(state, strict=True)
    print(f"{path} ({meta.get('hfta_model', '?')}): loads into {model}'s module "
          f"(strict, {len(state)} tensors)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=GOLDEN, help="the golden file (default: %(default)s)")
    ap.add_argument("--check", nargs=2, metavar=("FILE", "MODEL"),
                    help="load an exported safetensors FILE into MODEL's module (strict)")
    args = ap.parse_args()
    if args.check:
        check(*args.check)
    else:
        write_golden(args.out)


if __name__ == "__main__":
    main()
