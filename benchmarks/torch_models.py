"""PyTorch counterparts of hfta's models, with hfta's state_dict names, and a safetensors reader.

Shared by torch_compare.py (timing), torch_golden.py (golden losses for the tests) and
torch_eval_export.py (loading an `hfta export` file). Needs Debian's python3-torch and, for
resnet18/mobilenetv2, python3-torchvision.
"""
import json
import math
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Mlp(nn.Module):
    def __init__(self, in_features=784, num_classes=10):
        super().__init__()
        self.fc1 = nn.Linear(in_features, 256)
        self.fc2 = nn.Linear(256, 256)
        self.fc3 = nn.Linear(256, num_classes)

    def forward(self, x):
        x = x.flatten(1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class LeNet(nn.Module):
    def __init__(self, channels=1, size=28, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(64 * (size // 4) * (size // 4), 1024)
        self.fc2 = nn.Linear(1024, num_classes)

    def forward(self, x):
        # ReLU after the pool, as hfta's LeNet: the same function and gradients as before it
        # (max commutes with the monotone ReLU), on a quarter of the values.
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class PositionalEncoding(nn.Module):
    """PyTorch's examples/word_language_model PositionalEncoding (sinusoids, then dropout)."""

    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0).transpose(0, 1))

    def forward(self, x):
        return self.dropout(x + self.pe[:x.size(0), :])


class TransformerModel(nn.Module):
    """word_language_model's TransformerModel (HFTA's examples/transformer): src [T, S] token ids
    -> log-probabilities [T, S, ntoken], with a causal mask."""

    def __init__(self, ntoken, ninp=128, nhead=2, nhid=128, nlayers=2, dropout=0.2):
        super().__init__()
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        layer = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(layer, nlayers)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def forward(self, src):
        T = src.size(0)
        mask = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
        x = self.pos_encoder(self.encoder(src) * math.sqrt(self.ninp))
        x = self.transformer_encoder(x, mask)
        return F.log_softmax(self.decoder(x), dim=-1)


def fixed_tokens(step, streams, bptt, vocab):
    """Inputs and next-token targets [T, S] (PyTorch's layout; hfta's is [S, T]): token t of
    stream s is (13 s + 7 t + 3 step + s t) mod vocab, the target the next token's value."""
    def tok(s, t):
        return (13 * s + 7 * t + 3 * step + s * t) % vocab
    x = torch.tensor([[tok(s, t) for s in range(streams)] for t in range(bptt)])
    y = torch.tensor([[tok(s, t + 1) for s in range(streams)] for t in range(bptt)])
    return x, y
class BertEmbedding(nn.Module):
    """HFTA's examples/bert BERTEmbedding: token + (position + segment), then dropout."""

    def __init__(self, vocab_size, embed_size, dropout=0.1):
        super().__init__()
        self.token = nn.Embedding(vocab_size, embed_size)
        self.position = nn.Embedding(512, embed_size)
        self.segment = nn.Embedding(3, embed_size)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, sequence, position, segment):
        x = self.token(sequence)
        x = x + (self.position(position) + self.segment(segment))
        return self.dropout(x)


class BertFeedForward(nn.Module):
    """The example's PositionwiseFeedForward: w_2(dropout(gelu(w_1(x))))."""

    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.w_2(self.dropout(F.gelu(self.w_1(x))))


class BertSublayer(nn.Module):
    """The example's SublayerConnection (pre-norm): x + dropout(sublayer(norm(x)))."""

    def __init__(self, size, dropout):
        super().__init__()
        self.norm = nn.LayerNorm(size)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, sublayer):
        return x + self.dropout(sublayer(self.norm(x)))


class BertBlock(nn.Module):
    """The example's TransformerBlock: bidirectional self-attention (no attention dropout), the
    feed-forward, each behind a pre-norm sublayer, then dropout."""

    def __init__(self, hidden, heads, d_ff, dropout):
        super().__init__()
        self.attention = nn.MultiheadAttention(hidden, heads, batch_first=True)
        self.feed_forward = BertFeedForward(hidden, d_ff, dropout)
        self.input_sublayer = BertSublayer(hidden, dropout)
        self.output_sublayer = BertSublayer(hidden, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = self.input_sublayer(x, lambda h: self.attention(h, h, h, need_weights=False)[0])
        x = self.output_sublayer(x, self.feed_forward)
        return self.dropout(x)


class Bert(nn.Module):
    """HFTA's examples/bert BERT built unfused (its state_dict names): inputs [S, T] of token,
    position and segment ids -> log-probabilities [S, T, vocab]. hfta's `bert` takes hidden from
    --emsize and the feed-forward width from --nhid (the example's 4 * hidden)."""

    def __init__(self, vocab_size, hidden=512, n_layers=8, attn_heads=8, d_ff=2048, dropout=0.1):
        super().__init__()
        self.embedding = BertEmbedding(vocab_size, hidden, dropout)
        self.transformer_blocks = nn.ModuleList(
            [BertBlock(hidden, attn_heads, d_ff, dropout) for _ in range(n_layers)])
        self.output = nn.Linear(hidden, vocab_size)

    def forward(self, x, position, segment):
        x = self.embedding(x, position, segment)
        for block in self.transformer_blocks:
            x = block(x)
        return F.log_softmax(self.output(x), dim=-1)


def fixed_mlm(step, streams, bptt, words):
    """A masked window [S, T] (tests/models/test_bert_golden.cpp): fixed_tokens' ids; position t;
    segment 1 from T/2 on; positions with (s + t + step) % 3 == 0 predicted (target the id, else
    -100), their input the mask id `words` when (s + t) is even."""
    tok = lambda s, t: (13 * s + 7 * t + 3 * step + s * t) % words
    x, pos, seg, y = [], [], [], []
    for s in range(streams):
        row = [[], [], [], []]
        for t in range(bptt):
            chosen = (s + t + step) % 3 == 0
            row[0].append(words if chosen and (s + t) % 2 == 0 else tok(s, t))
            row[1].append(t)
            row[2].append(1 if 2 * t >= bptt else 0)
            row[3].append(tok(s, t) if chosen else -100)
        for r, v in zip((x, pos, seg, y), row):
            r.append(v)
    return tuple(torch.tensor(v) for v in (x, pos, seg, y))


class STNkd(nn.Module):
    """fxia22's STN3d (k = 3) and STNkd: a per-cloud k x k transform."""

    def __init__(self, k=3):
        super().__init__()
        self.k = k
        self.conv1 = nn.Conv1d(k, 64, 1)
        self.conv2 = nn.Conv1d(64, 128, 1)
        self.conv3 = nn.Conv1d(128, 1024, 1)
        self.fc1 = nn.Linear(1024, 512)
        self.fc2 = nn.Linear(512, 256)
        self.fc3 = nn.Linear(256, k * k)
        self.bn1 = nn.BatchNorm1d(64)
        self.bn2 = nn.BatchNorm1d(128)
        self.bn3 = nn.BatchNorm1d(1024)
        self.bn4 = nn.BatchNorm1d(512)
        self.bn5 = nn.BatchNorm1d(256)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(self.bn3(self.conv3(x)))
        x = torch.max(x, 2)[0]
        x = F.relu(self.bn4(self.fc1(x)))
        x = F.relu(self.bn5(self.fc2(x)))
        iden = torch.eye(self.k, dtype=x.dtype).flatten()[None, :]
        return (self.fc3(x) + iden).view(-1, self.k, self.k)


class PointNetCls(nn.Module):
    """fxia22's pointnet.pytorch PointNetCls (HFTA's examples/pointnet) on [n, L, 3] clouds (hfta's
    sample layout; the module transposes them to PyTorch's [n, 3, L]). forward() returns logits
    (log_softmax + nll_loss = cross_entropy); after a forward, self.trans_feat holds the feature
    transform (or None) for regularizer()."""

    def __init__(self, num_classes=10, feature_transform=False, dropout=0.3):
        super().__init__()
        self.feature_transform = feature_transform
        self.feat = nn.Module()
        self.feat.stn = STNkd(3)
        self.feat.conv1 = nn.Conv1d(3, 64, 1)
        self.feat.conv2 = nn.Conv1d(64, 128, 1)
        self.feat.conv3 = nn.Conv1d(128, 1024, 1)
        self.feat.bn1 = nn.BatchNorm1d(64)
        self.feat.bn2 = nn.BatchNorm1d(128)
        self.feat.bn3 = nn.BatchNorm1d(1024)
        if feature_transform:
            self.feat.fstn = STNkd(64)
        self.fc1 = nn.Linear(1024, 512)
        self.fc2 = nn.Linear(512, 256)
        self.fc3 = nn.Linear(256, num_classes)
        self.dropout = nn.Dropout(p=dropout)
        self.bn1 = nn.BatchNorm1d(512)
        self.bn2 = nn.BatchNorm1d(256)
        self.trans_feat = None

    def forward(self, points):
        f = self.feat
        x = points.transpose(2, 1)
        trans = f.stn(x)
        x = torch.bmm(x.transpose(2, 1), trans).transpose(2, 1)
        x = F.relu(f.bn1(f.conv1(x)))
        self.trans_feat = None
        if self.feature_transform:
            self.trans_feat = f.fstn(x)
            x = torch.bmm(x.transpose(2, 1), self.trans_feat).transpose(2, 1)
        x = F.relu(f.bn2(f.conv2(x)))
        x = f.bn3(f.conv3(x))
        x = torch.max(x, 2)[0]
        x = F.relu(self.bn1(self.fc1(x)))
        x = F.relu(self.bn2(self.dropout(self.fc2(x))))
        return self.fc3(x)

    def regularizer(self):
        """fxia22's feature_transform_regularizer(trans_feat) * 0.001 (0 without the transform)."""
        if self.trans_feat is None:
            return 0.0
        a = self.trans_feat
        eye = torch.eye(a.size(1), dtype=a.dtype)[None, :, :]
        return torch.mean(torch.norm(torch.bmm(a, a.transpose(2, 1)) - eye, dim=(1, 2))) * 0.001
class DcganGenerator(nn.Module):
    """PyTorch's examples/dcgan Generator (64x64; nz, ngf, nc as its flags). `image` 8, 16 or 32
    drops the first up-sampling blocks, as hfta's --image-size does (64: the example's layers)."""

    def __init__(self, nz=100, ngf=64, nc=3, image=64):
        super().__init__()
        s = {8: 0, 16: 1, 32: 2, 64: 3}[image]
        ch = ngf << s
        layers = [nn.ConvTranspose2d(nz, ch, 4, 1, 0, bias=False), nn.BatchNorm2d(ch),
                  nn.ReLU(True)]
        for _ in range(s):
            layers += [nn.ConvTranspose2d(ch, ch // 2, 4, 2, 1, bias=False),
                       nn.BatchNorm2d(ch // 2), nn.ReLU(True)]
            ch //= 2
        layers += [nn.ConvTranspose2d(ch, nc, 4, 2, 1, bias=False), nn.Tanh()]
        self.main = nn.Sequential(*layers)

    def forward(self, z):
        return self.main(z)


class DcganDiscriminator(nn.Module):
    """PyTorch's examples/dcgan Discriminator (64x64), Sigmoid included; `image` as the
    Generator's."""

    def __init__(self, ndf=64, nc=3, image=64):
        super().__init__()
        s = {8: 0, 16: 1, 32: 2, 64: 3}[image]
        layers = [nn.Conv2d(nc, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True)]
        ch = ndf
        for _ in range(s):
            layers += [nn.Conv2d(ch, ch * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ch * 2),
                       nn.LeakyReLU(0.2, inplace=True)]
            ch *= 2
        layers += [nn.Conv2d(ch, 1, 4, 1, 0, bias=False), nn.Sigmoid()]
        self.main = nn.Sequential(*layers)

    def forward(self, x):
        return self.main(x)


class PointNetDenseCls(nn.Module):
    """fxia22's PointNetDenseCls (HFTA's examples/pointnet part segmentation) on [n, L, 3] clouds:
    PointNetfeat(global_feat=False) gives each point [1088] (the global feature repeated over the
    points, then the point's 64-d feature), then Conv1d 1088 -> 512 -> 256 -> 128 -> k with
    BatchNorm and ReLU. forward() returns per-point logits [n, L, k] (fxia22's log_softmax +
    nll_loss over all points = cross_entropy of the flattened logits); regularizer() as
    PointNetCls's."""

    def __init__(self, num_parts=2, feature_transform=False):
        super().__init__()
        self.feature_transform = feature_transform
        self.feat = nn.Module()
        self.feat.stn = STNkd(3)
        self.feat.conv1 = nn.Conv1d(3, 64, 1)
        self.feat.conv2 = nn.Conv1d(64, 128, 1)
        self.feat.conv3 = nn.Conv1d(128, 1024, 1)
        self.feat.bn1 = nn.BatchNorm1d(64)
        self.feat.bn2 = nn.BatchNorm1d(128)
        self.feat.bn3 = nn.BatchNorm1d(1024)
        if feature_transform:
            self.feat.fstn = STNkd(64)
        self.conv1 = nn.Conv1d(1088, 512, 1)
        self.conv2 = nn.Conv1d(512, 256, 1)
        self.conv3 = nn.Conv1d(256, 128, 1)
        self.conv4 = nn.Conv1d(128, num_parts, 1)
        self.bn1 = nn.BatchNorm1d(512)
        self.bn2 = nn.BatchNorm1d(256)
        self.bn3 = nn.BatchNorm1d(128)
        self.trans_feat = None

    def forward(self, points):
        f = self.feat
        n_pts = points.size(1)
        x = points.transpose(2, 1)
        trans = f.stn(x)
        x = torch.bmm(x.transpose(2, 1), trans).transpose(2, 1)
        x = F.relu(f.bn1(f.conv1(x)))
        self.trans_feat = None
        if self.feature_transform:
            self.trans_feat = f.fstn(x)
            x = torch.bmm(x.transpose(2, 1), self.trans_feat).transpose(2, 1)
        pointfeat = x
        x = F.relu(f.bn2(f.conv2(x)))
        x = f.bn3(f.conv3(x))
        x = torch.max(x, 2)[0]
        x = torch.cat([x.view(-1, 1024, 1).repeat(1, 1, n_pts), pointfeat], 1)
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(self.bn3(self.conv3(x)))
        return self.conv4(x).transpose(2, 1).contiguous()

    regularizer = PointNetCls.regularizer


def fixed_point_labels(step, batch, points, num_parts):
    """Per-point labels of tests/models/test_torch_golden.cpp's segmentation runs: point j of
    sample n is labelled (7n + 3 step + 5j) mod parts."""
    return torch.tensor([[(7 * n + 3 * step + 5 * j) % num_parts for j in range(points)]
                         for n in range(batch)], dtype=torch.int64)


def build(name, sample_shape, num_classes=10, dropout=None):
    """The PyTorch model `name` for samples of `sample_shape` (C, H, W)."""
    channels, size = sample_shape[0], sample_shape[-1]
    if name == "mlp":
        return Mlp(int(np.prod(sample_shape)), num_classes)
    if name == "lenet":
        return LeNet(channels, size, num_classes)
    if name in ("pointnet_cls", "pointnet_cls_ft"):
        return PointNetCls(num_classes, name == "pointnet_cls_ft",
                           0.3 if dropout is None else dropout)
    if name in ("pointnet_seg", "pointnet_seg_ft"):
        return PointNetDenseCls(num_classes, name == "pointnet_seg_ft")
    import torchvision
    if name == "resnet18":
        model = torchvision.models.resnet18(num_classes=num_classes)
        model.conv1 = nn.Conv2d(channels, 64, 7, 2, 3, bias=False)
        return model
    if name == "mobilenetv2":
        model = torchvision.models.mobilenet_v2(num_classes=num_classes)
        model.features[0][0] = nn.Conv2d(channels, 32, 3, 2, 1, bias=False)
        if dropout is not None:
            model.classifier[0].p = dropout
        return model
    if name in ("mobilenetv3_small", "mobilenetv3_large"):
        build_v3 = (torchvision.models.mobilenet_v3_small if name == "mobilenetv3_small"
                    else torchvision.models.mobilenet_v3_large)
        model = build_v3(num_classes=num_classes)
        # The stem follows the data's channels, as for MobileNetV2 (weights come from hfta).
        model.features[0][0] = nn.Conv2d(channels, 16, 3, 2, 1, bias=False)
        if dropout is not None:
            model.classifier[2].p = dropout
        return model
    raise SystemExit(f"unknown model {name}")


def read_safetensors(path):
    """{name: tensor} and the metadata of a safetensors file (F32 and I64 only)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    out = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        dtype = {"F32": np.float32, "I64": np.int64}[entry["dtype"]]
        array = np.frombuffer(data[begin:end], dtype=dtype).reshape(entry["shape"])
        out[name] = torch.from_numpy(array.copy())
    return out, meta


def fixed_batch(step, batch, sample_shape, num_classes):
    """The deterministic minibatch of tests/models/test_torch_golden.cpp: sample n's element i is
    sin(0.05 * (i + 1) * (n + 1) + 0.3 * step), its label (7n + 3 step) mod classes."""
    per_sample = int(np.prod(sample_shape))
    i = np.arange(per_sample, dtype=np.float64) + 1.0
    rows = [np.sin(0.05 * i * (n + 1) + 0.3 * step) for n in range(batch)]
    x = torch.from_numpy(np.stack(rows).astype(np.float32)).reshape(batch, *sample_shape)
    y = torch.tensor([(7 * n + 3 * step) % num_classes for n in range(batch)], dtype=torch.int64)
    return x, y


FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
FASHION_MNIST_MEAN, FASHION_MNIST_STD = 0.2860, 0.3530  # datasets/fashion_mnist.h


def fashion_mnist(split, directory=FASHION_MNIST_DIR):
    """Images [n, 1, 28, 28] normalized as hfta's loader does, and int64 labels."""
    import gzip
    import os
    prefix = "train" if split == "train" else "t10k"

    def read(stem, offset):
        path = os.path.join(directory, stem)
        opener = gzip.open if os.path.exists(path + ".gz") else open
        with opener(path + ".gz" if opener is gzip.open else path, "rb") as f:
            return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)

    images = read(f"{prefix}-images-idx3-ubyte", 16).reshape(-1, 1, 28, 28)
    labels = read(f"{prefix}-labels-idx1-ubyte", 8)
    x = (images.astype(np.float32) / 255.0 - FASHION_MNIST_MEAN) / FASHION_MNIST_STD
    return torch.from_numpy(x), torch.from_numpy(labels.astype(np.int64))


def evaluate(model, x, y, batch=1000):
    """Mean cross-entropy and accuracy of `model` in eval mode."""
    model.eval()
    loss, correct = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            logits = model(x[i:i + batch])
            loss += F.cross_entropy(logits, y[i:i + batch], reduction="sum").item()
            correct += (logits.argmax(1) == y[i:i + batch]).sum().item()
    return loss / len(x), correct / len(x)
