#!/usr/bin/python3
"""Times one training step (forward, backward, Adam) of the same MLP, LeNet, ResNet-18 and
MobileNetV2 at batch 64 in hfta (B=1, via `hfta trial`) and in PyTorch on CPU, in one run, and
prints PyTorch / hfta. `--models dcgan` times one step of PyTorch's examples/dcgan (D on real
and fake, then G, both Adam) against `hfta trial --model dcgan` at --image-size.
`--models pointnet_cls,pointnet_cls_ft` times fxia22's PointNetCls (HFTA's examples/pointnet;
cross-entropy plus the feature transform's regularizer) on random clouds of --npoints points.
`--models transformer` compares tokens/s of word_language_model's
TransformerModel (emsize 128, nhid 128, 2 layers, 2 heads, bptt 32, dropout 0.2; Adadelta lr 1,
clip 0.25) over --lm-streams streams of a --vocab word synthetic stream, with
`hfta trial --model transformer --dataset synthetic-text` (B=1). `--models bert` does the same
for HFTA's examples/bert BERT (torch_models.Bert: hidden 512, 8 layers, 8 heads, FF 2048, dropout
0.1; Adadelta lr 1, no clipping) on masked windows (15% of positions predicted) against
`hfta trial --model bert` (which computes the output layer on the predicted positions only; the
PyTorch module, as the example, on every position).

Needs Debian's python3-torch (`apt-get install python3-torch`); it is a benchmark, not a test.
Both sides use the same thread count, synthetic data of the same shape, and flush denormals
(hfta does so on every thread; torch.set_flush_denormal(True) here). The two are measured in
alternating rounds so that a noisy neighbour affects both; each side's time is its median round.

  /usr/bin/python3 benchmarks/torch_compare.py [--hfta build/hfta] [--threads 2] [--rounds 5]
  /usr/bin/python3 benchmarks/torch_compare.py --models dcgan --batch-size 4 --image-size 16 \
      --rounds 1 --steps 1      # a smoke run, not a timing
  /usr/bin/python3 benchmarks/torch_compare.py --models transformer --vocab 50 --lm-streams 2 \
      --lm-steps 2 --rounds 1        # a tiny setting that checks the script runs
  /usr/bin/python3 benchmarks/torch_compare.py --models bert --vocab 50 --lm-streams 1 \
      --lm-steps 1 --rounds 1        # the same for BERT
  python3 benchmarks/torch_compare.py --device cuda --models mlp,lenet,resnet18 --threads 16
      # on a GPU machine: both sides on the GPU (hfta under plan fused), HFTA's batch 64
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
POINTNETS = ("pointnet_cls", "pointnet_cls_ft")


def sample_shape(name, npoints):
    """One sample as `hfta trial --dataset synthetic` makes it: a cloud is [points, 3]."""
    return (npoints, 3) if name in POINTNETS else SAMPLE_SHAPES[name]


def seconds_per_step(step, warmup, steps, sync=lambda: None):
    """Runs `step` warmup times, then times `steps` more: seconds per step. `sync` waits for a
    device to finish what the steps queued, before the clock starts and before it stops."""
    for _ in range(warmup):
        step()
    sync()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return (time.perf_counter() - start) / steps


def torch_step_ms(name, batch, warmup, steps, npoints=1024, device="cpu"):
    torch.manual_seed(1)
    shape = sample_shape(name, npoints)
    model = torch_models.build(name, shape, 10).to(device)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(batch, *shape, device=device)
    y = torch.randint(0, 10, (batch,), device=device)

    def step():
        opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(model(x), y)
        if name in POINTNETS:
            loss = loss + model.regularizer()  # 0 without the feature transform
        loss.backward()
        opt.step()

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    return seconds_per_step(step, warmup, steps, sync) * 1000.0


def dcgan_step_ms(batch, warmup, steps, image):
    """PyTorch's examples/dcgan training step on synthetic 3-channel images in [-1, 1]."""
    torch.manual_seed(1)
    net_g = torch_models.DcganGenerator(image=image)
    net_d = torch_models.DcganDiscriminator(image=image)
    opt_d = torch.optim.Adam(net_d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_g = torch.optim.Adam(net_g.parameters(), lr=2e-4, betas=(0.5, 0.999))
    criterion = torch.nn.BCELoss()
    real = torch.rand(batch, 3, image, image) * 2 - 1
    ones, zeros = torch.full((batch,), 1.0), torch.full((batch,), 0.0)

    def step():
        net_d.zero_grad()
        criterion(net_d(real).view(-1), ones).backward()
        fake = net_g(torch.randn(batch, 100, 1, 1))
        criterion(net_d(fake.detach()).view(-1), zeros).backward()
        opt_d.step()
        net_g.zero_grad()
        criterion(net_d(fake).view(-1), ones).backward()
        opt_g.step()

    return seconds_per_step(step, warmup, steps) * 1000.0


def hfta_step_ms(hfta, name, batch, warmup, steps, threads, image=64, npoints=1024,
                 device="cpu"):
    extra = ["--image-size", str(image)] if name == "dcgan" else []
    if name in POINTNETS:
        extra = ["--npoints", str(npoints)]
    if device != "cpu":
        extra += ["--device", device, "--plan", "fused"]
    out = subprocess.run(
        [hfta, "trial", "--model", name, "--dataset", "synthetic", "--B", "1",
         "--batch-size", str(batch), "--warmup", str(warmup), "--steps", str(steps),
         "--threads", str(threads)] + extra,
        capture_output=True, text=True)
    match = re.search(r"\bstep_ms=([0-9.eE+-]+)", out.stdout)
    if out.returncode != 0 or not match:
        sys.exit(f"`hfta trial` failed ({out.returncode}): {out.stderr.strip()}")
    return float(match.group(1))


BPTT = 32  # `hfta trial --model transformer` reads [streams, 32] windows


def torch_lm_tokens_per_s(vocab, streams, warmup, steps):
    torch.manual_seed(1)
    model = torch_models.TransformerModel(vocab)
    model.train()
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
    x = torch.randint(0, vocab, (BPTT, streams))
    y = torch.randint(0, vocab, (BPTT, streams))

    def step():
        opt.zero_grad(set_to_none=False)
        F.nll_loss(model(x).view(-1, vocab), y.view(-1)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()

    return BPTT * streams / seconds_per_step(step, warmup, steps)


def torch_bert_tokens_per_s(vocab, streams, warmup, steps):
    torch.manual_seed(1)
    model = torch_models.Bert(vocab + 1)  # + the mask token, as `hfta trial --model bert`
    model.train()
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
    words = torch.randint(0, vocab, (streams, BPTT))
    chosen = torch.rand(streams, BPTT) < 0.15
    chosen[0, 0] = True
    x = torch.where(chosen, torch.full_like(words, vocab), words)
    y = torch.where(chosen, words, torch.full_like(words, -100))
    pos = torch.arange(BPTT).repeat(streams, 1)
    seg = torch.zeros(streams, BPTT, dtype=torch.long)

    def step():
        opt.zero_grad(set_to_none=False)
        out = model(x, pos, seg)
        F.nll_loss(out.view(-1, vocab + 1), y.view(-1), ignore_index=-100).backward()
        opt.step()

    return BPTT * streams / seconds_per_step(step, warmup, steps)


def hfta_lm_tokens_per_s(hfta, vocab, streams, warmup, steps, threads, model="transformer"):
    out = subprocess.run(
        [hfta, "trial", "--model", model, "--dataset", "synthetic-text", "--vocab",
         str(vocab), "--B", "1", "--batch-size", str(streams), "--warmup", str(warmup),
         "--steps", str(steps), "--threads", str(threads)],
        capture_output=True, text=True)
    # samples_per_second counts tokens for a language model.
    match = re.search(r"\bsamples_per_second=([0-9.eE+-]+)", out.stdout)
    if out.returncode != 0 or not match:
        sys.exit(f"`hfta trial` failed ({out.returncode}): {out.stderr.strip()}")
    return float(match.group(1))


def compare_lm(args, model="transformer"):
    steps = args.lm_steps
    torch_side = torch_bert_tokens_per_s if model == "bert" else torch_lm_tokens_per_s
    ours, theirs = [], []
    for _ in range(args.rounds):
        ours.append(hfta_lm_tokens_per_s(args.hfta, args.vocab, args.lm_streams, 2, steps,
                                         args.threads, model))
        theirs.append(torch_side(args.vocab, args.lm_streams, 2, steps))
    o, t = statistics.median(ours), statistics.median(theirs)
    print(f"{model:<12} {'hfta tok/s':>11} {'torch tok/s':>11} {'hfta/torch':>10}")
    print(f"{'':<12} {o:11.0f} {t:11.0f} {o / t:10.2f}   (vocab {args.vocab}, "
          f"{args.lm_streams} streams x {BPTT})", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hfta", default="build/hfta")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--models", default="mlp,lenet,resnet18,mobilenetv2,transformer",
                    help="comma-separated; also pointnet_cls, pointnet_cls_ft, dcgan and bert")
    ap.add_argument("--image-size", type=int, default=64, help="dcgan: 8, 16, 32 or 64")
    ap.add_argument("--npoints", type=int, default=1024, help="pointnet_cls(_ft): points per cloud")
    ap.add_argument("--steps", type=int, default=0, help="timed steps (0: per model)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--vocab", type=int, default=10000, help="transformer, bert: vocabulary")
    ap.add_argument("--lm-streams", type=int, default=20, help="transformer: token streams")
    ap.add_argument("--lm-steps", type=int, default=10, help="transformer: timed steps")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                    help="where both sides train the classifiers (cuda: fp32, TF32 off, cuDNN "
                         "benchmark on, as HFTA's GPU figures were measured)")
    args = ap.parse_args()
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    print(f"PyTorch {torch.__version__} on {args.device}, {args.threads} threads; "
          f"batch {args.batch_size} "
          f"(transformer, bert: {args.lm_streams} streams); "
          f"median of {args.rounds} alternating rounds")
    names = args.models.split(",")
    if args.device != "cpu" and any(n in ("dcgan", "transformer", "bert") for n in names):
        sys.exit("--device cuda: dcgan, transformer and bert train on the CPU only so far")
    if any(n not in ("transformer", "bert") for n in names):
        print(f"{'model':<12} {'hfta ms':>9} {'torch ms':>9} {'torch/hfta':>10}")
    for name in names:
        if name in ("transformer", "bert"):
            compare_lm(args, name)
            continue
        steps = args.steps or {"mlp": 200, "lenet": 20}.get(name, 10)
        ours, theirs = [], []
        for _ in range(args.rounds):
            ours.append(hfta_step_ms(args.hfta, name, args.batch_size, args.warmup, steps,
                                     args.threads, args.image_size, args.npoints, args.device))
            if name == "dcgan":
                theirs.append(dcgan_step_ms(args.batch_size, args.warmup, steps, args.image_size))
            else:
                theirs.append(torch_step_ms(name, args.batch_size, args.warmup, steps,
                                            args.npoints, args.device))
        o, t = statistics.median(ours), statistics.median(theirs)
        print(f"{name:<12} {o:9.3f} {t:9.3f} {t / o:10.2f}", flush=True)


if __name__ == "__main__":
    main()
