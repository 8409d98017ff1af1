#!/usr/bin/python3
"""File translation throughput: `translate --input` in sorted token batches against fixed input-order batches.

usage: /usr/bin/python3 tools/bench_file_translate.py [--vkformer build/vkformer] [--model DIR] [--lines 2000]
           [--min-tokens 5] [--max-tokens 120] [--beam 4] [--batch 32] [--max-batch-tokens 1024]
           [--max-new 150] [--max-new-factor 1.2] [--rounds 1] [--seed 1] [--keep FILE]

Writes --lines lines of English-like words (tests/gen_marian.SRC_WORDS) whose source lengths (the folder's
source.spm pieces, eos included) are uniform in [--min-tokens, --max-tokens], then runs, alternately for
--rounds rounds, `vkformer translate --model DIR --input FILE --beam K --max-new M --max-new-factor F --timing`
with `--batch B` (input order) and with `--max-batch-tokens N` (sorted by length). A random-weight model
(the default folder is tools/bench_translate.py's OPUS-MT en-de shape) almost never chooses eos, so
--max-new-factor gives each line a target about as long as its source, as a trained model's would be. Each
run's stdout must be identical (same translations, input order); reports the wall time, the CPU time
(user + system of the vkformer process: on a shared machine the steadier measure of the work done), target
tokens (the --timing line's), target tokens/s and tokens per CPU-second of each run, and the ratios of the
medians. Rounds alternate the order (A B, then B A).
"""
import argparse
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(ROOT, "tests"))


def write_lines(path, model, n, lo, hi, seed):
    import sentencepiece as spm
    import gen_marian
    sp = spm.SentencePieceProcessor(model_file=os.path.join(model, "source.spm"))
    rng = random.Random(seed)
    lengths = []
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(n):
            want = rng.randint(lo, hi)
            words = []
            while len(sp.encode_as_pieces(" ".join(words))) + 1 < want:
                words.append(rng.choice(gen_marian.SRC_WORDS))
            lengths.append(len(sp.encode_as_pieces(" ".join(words))) + 1)
            f.write(" ".join(words) + "\n")
    return lengths


def run(args, extra):
    cmd = [args.vkformer, "translate", "--model", args.model, "--input", args.file, "--beam", str(args.beam),
           "--max-new", str(args.max_new), "--max-new-factor", repr(args.max_new_factor), "--timing"] + extra
    t0, r0 = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall, r1 = time.monotonic() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    if p.returncode != 0:
        sys.exit("vkformer %s exited %d: %s" % (" ".join(cmd[1:]), p.returncode, p.stderr.strip()[-2000:]))
    m = re.search(r"(\d+) tokens in ([\d.]+) ms", p.stderr)
    tokens = int(m.group(1)) if m else 0
    return {"wall_s": wall, "cpu_s": cpu, "tokens": tokens, "tokens_per_s": tokens / wall,
            "tokens_per_cpu_s": tokens / cpu if cpu > 0 else 0.0, "out": p.stdout,
            "timing": [l for l in p.stderr.splitlines() if l.startswith("timing")]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vkformer", default=os.path.join(ROOT, "build", "vkformer"))
    ap.add_argument("--model", default=os.path.join(os.path.expanduser("~"), ".cache", "vkformer",
                                                    "opus-mt-en-de-shape"))
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--min-tokens", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=120)
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--max-batch-tokens", type=int, default=1024)
    ap.add_argument("--max-new", type=int, default=150)
    ap.add_argument("--max-new-factor", type=float, default=1.2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", help="write the lines here (and keep them)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        args.file = args.keep or os.path.join(tmp, "lines.txt")
        lengths = write_lines(args.file, args.model, args.lines, args.min_tokens, args.max_tokens, args.seed)
        print("%d lines, source tokens %d..%d (mean %.1f); beam %d, --max-new %d --max-new-factor %g"
              % (len(lengths), min(lengths), max(lengths), statistics.mean(lengths), args.beam, args.max_new,
                 args.max_new_factor), flush=True)
        configs = [("input order, --batch %d" % args.batch, ["--batch", str(args.batch)]),
                   ("sorted, --max-batch-tokens %d" % args.max_batch_tokens,
                    ["--max-batch-tokens", str(args.max_batch_tokens)])]
        results = {name: [] for name, _ in configs}
        reference = None
        for r in range(args.rounds):
            for name, extra in (configs if r % 2 == 0 else configs[::-1]):
                res = run(args, extra)
                if reference is None:
                    reference = res["out"]
                elif res["out"] != reference:
                    sys.exit("%s: the translations differ from the first run's" % name)
                results[name].append(res)
                print("round %d  %-32s %8.1f s wall %8.1f s CPU  %7d tokens  %6.1f target tokens/s  %6.2f per CPU-s"
                      "   %s" % (r + 1, name, res["wall_s"], res["cpu_s"], res["tokens"], res["tokens_per_s"],
                               res["tokens_per_cpu_s"], " ".join(res["timing"])), flush=True)
        for key, unit in (("tokens_per_s", "target tokens/s (wall)"), ("tokens_per_cpu_s", "target tokens per CPU-s")):
            med = {name: statistics.median(x[key] for x in runs) for name, runs in results.items()}
            a, b = (med[name] for name, _ in configs)
            print("median %s: %s %.2f, %s %.2f: %.2fx" % (unit, configs[0][0], a, configs[1][0], b, b / a))


if __name__ == "__main__":
    main()
