#!/usr/bin/python3
"""Trains `hfta train --model transformer --dataset text`'s language model in PyTorch, one model
per learning rate, on the same corpus split, windows and initial weights, and prints each model's
validation and test perplexity: the reference for hfta's per-model perplexities.

  /usr/bin/python3 benchmarks/torch_train_lm.py --text-files /usr/share/games/fortunes \
      --lr 0.5,1,2 [--optimizer adadelta] [--batch-size 20] [--bptt 32] [--iters N]

What is the same as hfta's run with the same flags and --seed:
- the corpus: the files (a directory stands for its regular files, sorted, without *.dat and
  symbolic links), lines that hold a word and are not a fortune's "%", the seeded 90/5/5 split of
  the lines (the shuffle of datasets/text_corpus.cpp, rewritten below), the vocabulary in order
  of first appearance in training (checked word for word against the one `hfta export --init
  --text-files` writes), <eos> per line, <unk> for words training lacks;
- batchify into --batch-size streams, --bptt windows in order (the short last one kept), the
  evaluation streams (at most --batch-size, each holding a full window), the loss averaged over
  tokens;
- the initial weights: model 0's of hfta's array (`hfta export --init --seed`), for every
  learning rate (hfta's model b draws its own, from stream (seed, b));
- the optimizer (torch.optim's Adadelta or Adam, lr from --lr), each model's gradient clipped to
  global norm --clip, dropout 0.2 (PyTorch's own masks).
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402

MASK64 = (1 << 64) - 1
SPLIT_SEED_MIX = 0x7465787473000001  # datasets/text_corpus.cpp's kSplitMix
SPACE = b" \t\r\v\f\n"


class Xoshiro256ss:
    """core/rng.h's RngStream(seed, stream): splitmix64-seeded xoshiro256**."""

    def __init__(self, seed, stream):
        x = (seed * 0xD1342543DE82EF95 + stream * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & MASK64
        self.s = []
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & MASK64
            z = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
            self.s.append(z ^ (z >> 31))

    @staticmethod
    def rotl(x, k):
        return ((x << k) | (x >> (64 - k))) & MASK64

    def next_u64(self):
        s = self.s
        result = (self.rotl((s[1] * 5) & MASK64, 7) * 9) & MASK64
        t = (s[1] << 17) & MASK64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = self.rotl(s[3], 45)
        return result

    def below(self, n):
        return (self.next_u64() * n) >> 64


def text_files(paths):
    files = []
    for p in paths:
        if not os.path.isdir(p):
            files.append(p)
            continue
        inside = [os.path.join(p, name) for name in os.listdir(p)]
        files += sorted(f for f in inside if not os.path.islink(f) and os.path.isfile(f)
                        and os.path.splitext(f)[1] != ".dat")
    return files


def split_corpus(paths, seed):
    """The lines of each split, as datasets/text_corpus.cpp's load_text_files assigns them."""
    lines = []
    for path in text_files(paths):
        with open(path, "rb") as f:
            for line in f.read().split(b"\n"):
                if line.strip(SPACE) and line.rstrip(SPACE) != b"%":
                    lines.append(line)
    n = len(lines)
    n_valid = n_test = max(1, n // 20)
    perm = list(range(n))
    rng = Xoshiro256ss(seed ^ SPLIT_SEED_MIX, 0)
    for i in range(n - 1, 0, -1):
        j = rng.below(i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    which = [0] * n
    for k in range(n_valid):
        which[perm[k]] = 1
    for k in range(n_valid, n_valid + n_test):
        which[perm[k]] = 2
    return [[lines[i] for i in range(n) if which[i] == s] for s in range(3)]


def tokenize(lines, words, ids, grow):
    out = []
    for line in lines:
        tokens = line.split()
        if not tokens:
            continue
        for w in tokens + [b"<eos>"]:
            if w not in ids:
                if not grow and w != b"<eos>":
                    w = b"<unk>"
                if w not in ids:
                    ids[w] = len(words)
                    words.append(w)
            out.append(ids[w])
    return out


def batchify(ids, streams):
    length = len(ids) // streams
    return torch.tensor(ids[:streams * length]).view(streams, length).t().contiguous()


def windows(data, bptt):
    for o in range(0, data.size(0) - 1, bptt):
        t = min(bptt, data.size(0) - 1 - o)
        yield data[o:o + t], data[o + 1:o + 1 + t]


def evaluate(model, data, bptt, vocab):
    model.eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for x, y in windows(data, bptt):
            total += x.size(0) * F.nll_loss(model(x).view(-1, vocab), y.reshape(-1)).item()
            tokens += x.size(0)
    return total / tokens


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--text-files", required=True, help="comma-separated files or directories")
    ap.add_argument("--lr", default="0.5,1,2")
    ap.add_argument("--optimizer", default="adadelta", choices=["adadelta", "adam"])
    ap.add_argument("--batch-size", type=int, default=20)
    ap.add_argument("--bptt", type=int, default=32)
    ap.add_argument("--clip", type=float, default=0.25)
    ap.add_argument("--dropout", type=float, default=0.2)
    ap.add_argument("--iters", type=int, default=0, help="steps of the epoch (0: all)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--hfta", default=os.path.join(os.path.dirname(__file__), "..", "build", "hfta"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    paths = [p for p in args.text_files.split(",") if p]
    train_lines, valid_lines, test_lines = split_corpus(paths, args.seed)
    words, ids = [], {}
    train = tokenize(train_lines, words, ids, True)
    valid = tokenize(valid_lines, words, ids, False)
    test = tokenize(test_lines, words, ids, False)
    vocab = len(words)

    with tempfile.TemporaryDirectory() as tmp:
        init = os.path.join(tmp, "transformer.safetensors")
        cmd = [args.hfta, "export", "--init", "--arch", "transformer", "--seed", str(args.seed),
               "--text-files", args.text_files, "--out", init]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed: {done.stderr.strip()}")
        with open(init + ".vocab.txt", "rb") as f:
            hfta_words = f.read().split(b"\n")[:-1]
        if hfta_words != words:
            sys.exit(f"the split differs from hfta's: vocabulary {vocab} here, "
                     f"{len(hfta_words)} in hfta's export")
        state, _ = torch_models.read_safetensors(init)
    print(f"corpus: vocabulary {vocab} (= hfta's, word for word), {len(train)} / {len(valid)} / "
          f"{len(test)} train / valid / test tokens", flush=True)

    streams = args.batch_size
    train_data = batchify(train, streams)
    eval_data = [batchify(s, min(streams, len(s) // (args.bptt + 1))) for s in (valid, test)]
    optimizers = {"adadelta": torch.optim.Adadelta, "adam": torch.optim.Adam}
    for lr in [float(v) for v in args.lr.split(",")]:
        model = torch_models.TransformerModel(vocab, dropout=args.dropout)
        model.load_state_dict(state, strict=True)
        opt = optimizers[args.optimizer](model.parameters(), lr=lr)
        model.train()
        total, steps, tokens = 0.0, 0, 0
        start = time.perf_counter()
        for x, y in windows(train_data, args.bptt):
            if args.iters and steps == args.iters:
                break
            opt.zero_grad()
            loss = F.nll_loss(model(x).view(-1, vocab), y.reshape(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            opt.step()
            total += loss.item()
            steps += 1
            tokens += y.numel()
        seconds = time.perf_counter() - start
        vloss, tloss = (evaluate(model, d, args.bptt, vocab) for d in eval_data)
        print(f"transformer lr {lr:g}: {steps} steps in {seconds:.1f} s ({tokens / seconds:.0f} "
              f"tokens/s), train loss {total / steps:.3f}, valid loss {vloss:.3f}, valid ppl "
              f"{math.exp(vloss):.1f}, test ppl {math.exp(tloss):.1f}", flush=True)


if __name__ == "__main__":
    main()
