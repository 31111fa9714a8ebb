"""A small CNN taking AdamW training steps on DEVICE=TT, checked against the same steps on tinygrad's CPU device.

conv 3x3 (no bias) -> batch norm (batch statistics, training mode) -> ReLU -> 2x2 max pool -> linear -> cross-entropy, on a
fixed random batch; tinygrad's AdamW updates every parameter. Weights and data are numpy-initialised (seeded; the
device's RNG is not needed). The backward kernels (conv input/weight gradients, batch-norm and pooling gradients) are
fused beyond one pass through Dst and are staged (lowering/families/staged.py).

    DEVICE=TT python examples/cnn_adamw.py [--steps 3 --batch 8 --size 8 --channels 4 --classes 10] [--json out]

The script prints the loss of every step on TT and on CPU and the largest parameter difference after the last step,
and exits 1 when either exceeds its tolerance: loss rtol 1e-4 (float32, sums in another order), parameters atol
--atol (default 1e-5; Adam's first step moves each weight by about lr whatever the gradient's size, so differences
are rounding-sized as long as no gradient component sits at the rounding noise level).
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np
from tinygrad import Tensor, dtypes
from tinygrad.helpers import Context
from tinygrad.nn.optim import AdamW


def init(channels: int, size: int, classes: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    flat = channels * (size // 2) ** 2
    # no conv bias: batch norm subtracts the batch mean right after, so its gradient is 0 up to rounding, and Adam
    # would scale that rounding noise up to steps of lr (on any two devices differently)
    p = {"conv_w": rng.standard_normal((channels, 1, 3, 3)) * 0.3,
         "bn_g": 1 + rng.standard_normal(channels) * 0.1, "bn_b": rng.standard_normal(channels) * 0.1,
         "fc_w": rng.standard_normal((classes, flat)) * 0.1, "fc_b": rng.standard_normal(classes) * 0.1}
    return {k: v.astype(np.float32) for k, v in p.items()}


def forward(p: dict[str, Tensor], x: Tensor) -> Tensor:
    """The logits. Batch norm with the batch's statistics (training mode; no running statistics are kept: tinygrad's
    nn.BatchNorm counts batches in int64, which TT does not hold)."""
    h = x.conv2d(p["conv_w"], padding=1)
    mean = h.mean(axis=(0, 2, 3))
    var = (h - mean.reshape(1, -1, 1, 1)).square().mean(axis=(0, 2, 3))
    h = h.batchnorm(p["bn_g"], p["bn_b"], mean, (var + 1e-5).rsqrt())
    return h.relu().max_pool2d(2).flatten(1).linear(p["fc_w"].T, p["fc_b"])


def train(device: str, steps: int, batch: int, size: int, channels: int, classes: int, seed: int):
    rng = np.random.default_rng(seed + 1)
    xs = rng.standard_normal((batch, 1, size, size)).astype(np.float32)
    ys = rng.integers(0, classes, batch).astype(np.int32)
    p = {k: Tensor(v, device=device).is_param_() for k, v in init(channels, size, classes, seed).items()}
    opt = AdamW(list(p.values()), lr=1e-2, weight_decay=0.01)
    x, y = Tensor(xs, device=device), Tensor(ys, device=device, dtype=dtypes.int32)
    losses = []
    with Context(TRAINING=1):
        for _ in range(steps):
            opt.zero_grad()
            loss = forward(p, x).sparse_categorical_crossentropy(y)
            loss.backward()
            opt.step()
            losses.append(float(loss.item()))
    return losses, {k: v.numpy() for k, v in p.items()}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--size", type=int, default=8)
    ap.add_argument("--channels", type=int, default=4)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--atol", type=float, default=1e-5)
    ap.add_argument("--device", default="TT")
    ap.add_argument("--json", help="write the check as JSON here")
    a = ap.parse_args(argv)
    shape = (a.steps, a.batch, a.size, a.channels, a.classes, a.seed)
    losses, params = train(a.device, *shape)
    ref_losses, ref_params = train("CPU", *shape)
    loss_rel = max(abs(l - r) / abs(r) for l, r in zip(losses, ref_losses))
    param_diff = max(float(np.abs(params[k] - ref_params[k]).max()) for k in params)
    for i, (l, r) in enumerate(zip(losses, ref_losses)):
        print(f"step {i}: loss {l:.6f} on {a.device}, {r:.6f} on CPU")
    print(f"largest parameter difference after {a.steps} steps: {param_diff:.2e} (tolerance {a.atol:g})")
    result = {"losses": losses, "cpu_losses": ref_losses, "loss_max_rel": loss_rel, "param_max_abs": param_diff,
              "atol": a.atol}
    if a.json:
        with open(a.json, "w") as f: json.dump(result, f)
    return int(loss_rel > 1e-4 or param_diff > a.atol)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
