"""A GPT-2-style decoder forward pass on DEVICE=TT, checked against tinygrad's CPU device.

token + position embedding, `layers` pre-norm blocks (layer norm, causal multi-head attention, layer norm, GELU MLP,
residuals), a final layer norm, logits against the tied token embedding and the cross-entropy loss of next tokens.
Weights are random (numpy, seeded; the device's RNG is not needed). Defaults: 2 layers, sequence 64, width 128, 4
heads, vocabulary 256.

    DEVICE=TT python examples/gpt2_decoder.py [--layers 2 --seq 64 --width 128 --heads 4 --vocab 256] [--json out]

Kernels tinygrad fuses beyond one pass through Dst (softmax and layer-norm reductions feeding each other, attention)
are staged (lowering/families/staged.py); TT_DUMP shows their stages. The script prints the loss on TT and on CPU and
the largest logit difference relative to the largest logit, and exits 1 when that exceeds --rtol (default 1e-4:
float32 everywhere, sums in another order than the CPU's, ~1e-6 per op compounded over the blocks).
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np
from tinygrad import Tensor, dtypes


def init(layers: int, width: int, vocab: int, seq: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    def w(*shape, scale=0.02): return (rng.standard_normal(shape) * scale).astype(np.float32)
    p = {"wte": w(vocab, width), "wpe": w(seq, width), "lnf_g": 1 + w(width, scale=0.1), "lnf_b": w(width)}
    for i in range(layers):
        p |= {f"{i}.ln1_g": 1 + w(width, scale=0.1), f"{i}.ln1_b": w(width), f"{i}.qkv": w(width, 3 * width),
              f"{i}.qkv_b": w(3 * width), f"{i}.proj": w(width, width), f"{i}.proj_b": w(width),
              f"{i}.ln2_g": 1 + w(width, scale=0.1), f"{i}.ln2_b": w(width), f"{i}.fc": w(width, 4 * width),
              f"{i}.fc_b": w(4 * width), f"{i}.out": w(4 * width, width), f"{i}.out_b": w(width)}
    return p


def forward(p: dict[str, Tensor], tokens: Tensor, targets: Tensor, layers: int, heads: int) -> tuple[Tensor, Tensor]:
    """(logits (T, vocab), mean cross-entropy of targets)."""
    T, C = tokens.shape[0], p["wte"].shape[1]
    def ln(x, g, b): return x.layernorm() * g + b
    x = p["wte"][tokens] + p["wpe"][:T]
    for i in range(layers):
        q, k, v = (ln(x, p[f"{i}.ln1_g"], p[f"{i}.ln1_b"]) @ p[f"{i}.qkv"] + p[f"{i}.qkv_b"]).split(C, dim=1)
        q, k, v = [t.reshape(T, heads, C // heads).transpose(0, 1) for t in (q, k, v)]
        att = q.scaled_dot_product_attention(k, v, is_causal=True).transpose(0, 1).reshape(T, C)
        x = x + att @ p[f"{i}.proj"] + p[f"{i}.proj_b"]
        h = ln(x, p[f"{i}.ln2_g"], p[f"{i}.ln2_b"]) @ p[f"{i}.fc"] + p[f"{i}.fc_b"]
        x = x + h.gelu() @ p[f"{i}.out"] + p[f"{i}.out_b"]
    logits = ln(x, p["lnf_g"], p["lnf_b"]) @ p["wte"].T
    return logits, logits.sparse_categorical_crossentropy(targets)


def run(device: str, params: dict[str, np.ndarray], tokens: np.ndarray, layers: int, heads: int):
    p = {k: Tensor(v, device=device) for k, v in params.items()}
    tok = Tensor(tokens[:-1], device=device, dtype=dtypes.int32)
    tgt = Tensor(tokens[1:], device=device, dtype=dtypes.int32)
    logits, loss = forward(p, tok, tgt, layers, heads)
    return logits.numpy(), float(loss.item())


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--device", default="TT")
    ap.add_argument("--json", help="write the check as JSON here")
    a = ap.parse_args(argv)
    params = init(a.layers, a.width, a.vocab, a.seq, a.seed)
    tokens = np.random.default_rng(a.seed + 1).integers(0, a.vocab, a.seq + 1).astype(np.int32)
    logits, loss = run(a.device, params, tokens, a.layers, a.heads)
    ref_logits, ref_loss = run("CPU", params, tokens, a.layers, a.heads)
    rel = float(np.abs(logits - ref_logits).max() / np.abs(ref_logits).max())
    result = {"loss": loss, "cpu_loss": ref_loss, "logits_max_rel": rel, "loss_rel": abs(loss - ref_loss) / abs(ref_loss),
              "rtol": a.rtol}
    print(f"loss {loss:.6f} on {a.device}, {ref_loss:.6f} on CPU; largest logit difference {rel:.2e} of the largest "
          f"logit (tolerance {a.rtol:g})")
    if a.json:
        with open(a.json, "w") as f: json.dump(result, f)
    return int(rel > a.rtol or result["loss_rel"] > a.rtol)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
