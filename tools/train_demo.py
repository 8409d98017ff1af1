#!/usr/bin/python3
"""Trains the vkformer demo model on the CPU: English number words -> digits.

Source: a number from 0 to 999999 in words, split on whitespace, e.g.
"three hundred forty two thousand seven hundred five" (no "and", no hyphens).
Target: its digits, one token per character, e.g. "342705".

Run with Debian's /usr/bin/python3 (python3-torch):

    /usr/bin/python3 tools/train_demo.py [--out models/demo.safetensors] \\
        [--heldout tests/data/demo_heldout.tsv] [--minutes 8] [--seed 1234]

It writes the held-out set (500 numbers never used for training, "words<TAB>digits"
per line) first, trains (Adam, warmup then cosine decay over --steps steps) until greedy
exact-match accuracy on that set reaches --target, the schedule ends or the time
budget runs out, then writes the model in the vkformer format (F32) with
the vocabularies and the text options "src_split": "whitespace" and "tgt_join": "" in
its config. The model is export_torch.Seq2Seq; the file is written with
export_torch.write_safetensors.
"""
import argparse
import json
import math
import os
import random
import sys
import time
import warnings

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_torch  # noqa: E402

ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
        "nineteen"]
TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
SPECIALS = ["<pad>", "<bos>", "<eos>"]
SRC_VOCAB = SPECIALS + ["<unk>"] + ONES + TENS[2:] + ["hundred", "thousand"]
TGT_VOCAB = SPECIALS + [str(d) for d in range(10)]
PAD, BOS, EOS = 0, 1, 2
SRC_ID = {w: i for i, w in enumerate(SRC_VOCAB)}
TGT_ID = {w: i for i, w in enumerate(TGT_VOCAB)}
MAX_DIGITS = 6
HELDOUT_SIZE = 500


def below_thousand(n):
    """Words for 1 <= n <= 999."""
    words = []
    if n >= 100:
        words += [ONES[n // 100], "hundred"]
        n %= 100
    if n >= 20:
        words.append(TENS[n // 10])
        n %= 10
    if n > 0:
        words.append(ONES[n])
    return words


def number_words(n):
    """'three hundred forty two thousand seven hundred five' for 342705."""
    assert 0 <= n <= 999999
    if n == 0:
        return "zero"
    words = []
    if n >= 1000:
        words += below_thousand(n // 1000) + ["thousand"]
    if n % 1000:
        words += below_thousand(n % 1000)
    return " ".join(words)


def sample_number(rng, min_digits=1):
    """Digit count uniform in min_digits..6, then a number with that many digits
    (one digit: 0..9, so 0 is included)."""
    d = rng.randint(min_digits, MAX_DIGITS)
    if d == 1:
        return rng.randint(0, 9)
    return rng.randint(10 ** (d - 1), 10 ** d - 1)


def src_ids(n):
    return [SRC_ID[w] for w in number_words(n).split()] + [EOS]


def tgt_ids(n):
    return [TGT_ID[c] for c in str(n)]


def pad_batch(seqs):
    width = max(len(s) for s in seqs)
    return torch.tensor([s + [PAD] * (width - len(s)) for s in seqs], dtype=torch.long)


def make_batch(numbers):
    src = pad_batch([src_ids(n) for n in numbers])
    tgt_in = pad_batch([[BOS] + tgt_ids(n) for n in numbers])
    label = pad_batch([tgt_ids(n) + [EOS] for n in numbers])
    return src, tgt_in, label


@torch.no_grad()
def batched_greedy(model, numbers, max_new=MAX_DIGITS + 1):
    """Greedy digit strings for a list of numbers, decoded in one batch."""
    src = pad_batch([src_ids(n) for n in numbers])
    src_pad = src == PAD
    memory = model.encode(src, src_pad)
    out = torch.full((len(numbers), 1), BOS, dtype=torch.long)
    done = torch.zeros(len(numbers), dtype=torch.bool)
    for _ in range(max_new):
        logits = model.decode(memory, out, src_pad)[:, -1]
        nxt = logits.argmax(-1)
        nxt[done] = PAD
        out = torch.cat([out, nxt[:, None]], dim=1)
        done |= nxt == EOS
        if bool(done.all()):
            break
    results = []
    for row in out[:, 1:].tolist():
        text = []
        for t in row:
            if t in (EOS, PAD):
                break
            text.append(TGT_VOCAB[t])
        results.append("".join(text))
    return results


def accuracy_batched(model, numbers):
    was_training = model.training
    model.eval()
    hyp = batched_greedy(model, numbers)
    model.train(was_training)
    return sum(h == str(n) for h, n in zip(hyp, numbers)) / len(numbers)


def accuracy_reference(model, numbers):
    """Exact match with export_torch.greedy, one unpadded example at a time."""
    model.eval()
    hits = 0
    outputs = []
    for n in numbers:
        ids = export_torch.greedy(model, src_ids(n), MAX_DIGITS + 1)
        text = "".join(TGT_VOCAB[i] if i < len(TGT_VOCAB) else "?" for i in ids)
        outputs.append(text)
        hits += text == str(n)
    return hits / len(numbers), outputs


def write_model(model, path):
    if sys.byteorder != "little":
        raise SystemExit("train_demo: this writer assumes a little-endian host")
    config = {k: model.config[k] for k in export_torch.CONFIG_KEYS}
    config["src_vocab"] = list(SRC_VOCAB)
    config["tgt_vocab"] = list(TGT_VOCAB)
    config["src_split"] = "whitespace"
    config["tgt_join"] = ""
    tensors = {name: t.detach().to(torch.float32).cpu().contiguous()
               for name, t in model.state_dict().items()}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    export_torch.write_safetensors(path, tensors, {"vkformer.config": json.dumps(config)})


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="models/demo.safetensors")
    p.add_argument("--heldout", default="tests/data/demo_heldout.tsv")
    p.add_argument("--minutes", type=float, default=8.0, help="training time budget")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--target", type=float, default=0.995,
                   help="stop at this held-out accuracy (at least 0.98; the margin above it makes "
                        "greedy argmaxes less fragile under another implementation)")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--steps", type=int, default=800,
                   help="length of the learning-rate schedule (linear warmup, cosine decay); "
                        "training stops at the end of it at the latest")
    p.add_argument("--label-smoothing", type=float, default=0.05)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()

    # PyTorch 1.13's encoder fast path (eval with a padding mask) warns about nested tensors.
    warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors")
    start = time.time()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)

    # Held-out set: 500 distinct numbers of 3..6 digits (digit count uniform). All
    # numbers below 100 stay in training: there are only 100 of them, and holding
    # them out would take whole words ("seven" alone, "forty two") out of training.
    heldout, seen = [], set()
    while len(heldout) < HELDOUT_SIZE:
        n = sample_number(rng, min_digits=3)
        if n not in seen:
            seen.add(n)
            heldout.append(n)
    heldout_set = frozenset(heldout)
    os.makedirs(os.path.dirname(os.path.abspath(a.heldout)), exist_ok=True)
    with open(a.heldout, "w", encoding="utf-8") as f:
        for n in heldout:
            f.write(f"{number_words(n)}\t{n}\n")
    print(f"held-out: {len(heldout)} numbers -> {a.heldout}", flush=True)

    d_model = 64
    config = export_torch.default_config(
        d_model=d_model, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=128,
        activation="relu", norm_first=False, layer_norm_eps=1e-5,
        src_vocab_size=len(SRC_VOCAB), tgt_vocab_size=len(TGT_VOCAB), max_len=32,
        embed_scale=math.sqrt(d_model), pad_id=PAD, bos_id=BOS, eos_id=EOS)
    model = export_torch.Seq2Seq(config)
    # Embeddings N(0, 1/d_model), so embed * sqrt(d_model) is about unit scale next to PE.
    with torch.no_grad():
        nn.init.normal_(model.src_embed.weight, std=d_model ** -0.5)
        nn.init.normal_(model.tgt_embed.weight, std=d_model ** -0.5)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params} parameters, config {json.dumps(config)}", flush=True)

    opt = torch.optim.Adam(model.parameters(), lr=a.lr, betas=(0.9, 0.98), eps=1e-9)
    def lr_factor(s):
        if s < a.warmup:
            return (s + 1) / a.warmup
        t = min(1.0, (s - a.warmup) / max(1, a.steps - a.warmup))
        return 0.05 + 0.95 * 0.5 * (1.0 + math.cos(math.pi * t))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor)
    loss_fn = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=a.label_smoothing)

    budget = a.minutes * 60.0
    step, acc, best = 0, 0.0, 0.0
    model.train()
    running = 0.0
    while True:
        numbers = []
        while len(numbers) < a.batch:
            n = sample_number(rng)
            if n not in heldout_set:
                numbers.append(n)
        src, tgt_in, label = make_batch(numbers)
        logits = model(src, tgt_in, src == PAD, tgt_in == PAD)
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), label.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        step += 1
        running += float(loss)
        elapsed = time.time() - start
        if step % a.eval_every == 0 or elapsed > budget or step >= a.steps:
            acc = accuracy_batched(model, heldout)
            best = max(best, acc)
            print(f"step {step:5d}  {elapsed:6.1f}s  loss {running / (step % a.eval_every or a.eval_every):.4f}"
                  f"  held-out exact match {acc * 100:.1f}%", flush=True)
            running = 0.0
            if acc >= a.target:
                print(f"reached the target, {a.target * 100:.1f}% held-out accuracy", flush=True)
                break
            if elapsed > budget:
                print("time budget spent", flush=True)
                break
            if step >= a.steps:
                print("schedule finished", flush=True)
                break

    train_time = time.time() - start
    acc_ref, outputs = accuracy_reference(model, heldout)
    write_model(model, a.out)
    print(f"trained {step} steps ({step * a.batch} examples) in {train_time:.1f}s", flush=True)
    print(f"held-out exact-match accuracy (PyTorch, export_torch.greedy): "
          f"{acc_ref * 100:.1f}% ({round(acc_ref * len(heldout))}/{len(heldout)})", flush=True)
    wrong = [(n, o) for n, o in zip(heldout, outputs) if o != str(n)]
    for n, o in wrong[:10]:
        print(f"  wrong: {number_words(n)!r} -> {o!r} (expected {n})")
    print("samples:")
    for n, o in list(zip(heldout, outputs))[:5]:
        print(f"  {number_words(n)}  ->  {o}")
    print(f"wrote {a.out} ({os.path.getsize(a.out)} bytes) in {time.time() - start:.1f}s total", flush=True)


if __name__ == "__main__":
    main()
