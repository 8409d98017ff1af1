#!/usr/bin/python3
"""Beam search of the vkformer CLI against a PyTorch reference beam search written here.

usage: /usr/bin/python3 tests/test_beam.py /path/to/vkformer /path/to/demo.safetensors [--quick] [--verbose]

The reference follows Hugging Face generate()'s beam search (transformers 5's
_beam_search; checked once against transformers 5.12.1's generate on random
MarianMTModels) for num_beams, length_penalty, early_stopping, num_return_sequences
(--n-best) and min_new_tokens (--min-new):
  - scores: log_softmax(logits) of each beam + the beam's running score, (batch, K*V)
    flattened, the 2K best kept (sorted);
  - a candidate among the first K whose token is eos (at the last step: any of the
    first K) finishes a hypothesis scored sum_logprobs / generated_len ** length_penalty
    (generated_len counts the eos); the K best hypotheses are kept; the first K
    candidates without eos are the next running beams;
  - a source is done once it holds K hypotheses and either early_stopping, or the
    best running beam's score / generated_len ** length_penalty cannot beat the worst;
  - step 0 has beam 0 only (the others start at -1e9).
Each step recomputes the decoder over the whole prefix (no cache), so it also checks
vkformer's KV-cache reorder. generate ends each source with eos (as translate does);
the reference gets the same source. Several --src in one call (one batch of
sources x beams rows) must give each source's hypotheses as when it runs alone. Hypotheses (ids) must be identical and scores within
SCORE_ATOL, on random models and on the demo model. Also: --beam 1 equals greedy
`generate`; sampling with --top-k 1 equals greedy, a fixed --seed repeats itself and
other seeds differ; values outside an option's fixed range (--beam 0 or 17, --n-best 0)
are usage errors (exit 2), values the library refuses (--n-best > --beam, --min-new >
--max-new, --top-p 1.5, --temperature -1, sampling with beams) exit 1; each with one
line on stderr naming the option or value.
"""
import json
import os
import struct
import sys

try:
    import torch
except ImportError:
    print("test_beam: PyTorch is missing: apt-get install python3-torch (run with /usr/bin/python3)", file=sys.stderr)
    sys.exit(1)
import random

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tools"))
sys.path.insert(0, HERE)
import export_torch  # noqa: E402
import vkf_testlib as lib  # noqa: E402
from vkf_testlib import bad, ok, run_vkformer  # noqa: E402

SCORE_ATOL = 2e-4


def load_model(path):
    """A Seq2Seq (tools/export_torch.py) from a vkformer model file (F32 or F16)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    cfg = json.loads(header.pop("__metadata__")["vkformer.config"])
    model = export_torch.Seq2Seq({k: cfg[k] for k in export_torch.CONFIG_KEYS})
    state = {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        dtype = {"F32": torch.float32, "F16": torch.float16}[t["dtype"]]
        state[name] = torch.frombuffer(bytearray(data[a:b]), dtype=dtype).reshape(t["shape"]).float()
    model.load_state_dict({k: v for k, v in state.items() if not k.startswith("lowrank.")})
    return model.eval()


class Hyps:
    """The finished hypotheses of one source: the best k."""

    def __init__(self, k, lp, early):
        self.k, self.lp, self.early = k, lp, early
        self.beams = []  # (score, ids)
        self.worst = 1e9

    def add(self, ids, sum_logprobs, generated_len):
        score = sum_logprobs / (generated_len ** self.lp)
        if len(self.beams) < self.k or score > self.worst:
            self.beams.append((score, ids))
            if len(self.beams) > self.k:
                order = sorted([(s, i) for i, (s, _) in enumerate(self.beams)])
                del self.beams[order[0][1]]
                self.worst = order[1][0]
            else:
                self.worst = min(score, self.worst)

    def is_done(self, best_sum_logprobs, cur_len):
        if len(self.beams) < self.k:
            return False
        if self.early:
            return True
        return self.worst >= best_sum_logprobs / cur_len ** self.lp


@torch.no_grad()
def beam_search(model, src, k, max_new, lp=1.0, early=False, n_best=1, min_new=0):
    """[(ids without bos/eos, score)] best first, as Hugging Face generate()."""
    c = model.config
    eos = c["eos_id"]
    memory = model.encode(torch.tensor([src])).expand(k, -1, -1)
    seqs = torch.full((k, 1), c["bos_id"], dtype=torch.long)
    beam_scores = torch.zeros(k)
    beam_scores[1:] = -1e9
    hyps = Hyps(k, lp, early)
    done = False
    for t in range(max_new):
        logits = model.decode(memory, seqs)[:, -1].float()
        scores = torch.log_softmax(logits, dim=-1)
        if t < min_new:
            scores[:, eos] = -float("inf")
        scores = scores + beam_scores[:, None]
        V = scores.shape[-1]
        top, idx = torch.topk(scores.view(-1), 2 * k, largest=True, sorted=True)
        last = t + 1 == max_new
        nb_scores, nb_tokens, nb_parents = [], [], []
        for rank in range(2 * k):
            if not torch.isfinite(top[rank]):
                break
            parent, token = int(idx[rank]) // V, int(idx[rank]) % V
            if rank < k and (token == eos or last):  # eos, or out of steps: a finished hypothesis
                hyps.add(seqs[parent, 1:].tolist() + ([] if token == eos else [token]), float(top[rank]), t + 1)
            if token != eos and len(nb_scores) < k:
                nb_scores.append(float(top[rank]))
                nb_tokens.append(token)
                nb_parents.append(parent)
        if last or hyps.is_done(nb_scores[0], t + 1):
            break
        seqs = torch.cat([seqs[nb_parents], torch.tensor(nb_tokens)[:, None]], dim=1)
        beam_scores = torch.tensor(nb_scores, dtype=torch.float32)
    ordered = sorted(hyps.beams, key=lambda x: x[0])
    return [(ids, score) for score, ids in reversed(ordered)][:n_best]


def beam_cli(path, src, k, max_new, lp, early, n_best, min_new):
    args = ["generate", "--model", path, "--src", ",".join(map(str, src)), "--beam", str(k), "--max-new",
            str(max_new), "--length-penalty", repr(lp), "--n-best", str(n_best), "--min-new", str(min_new)]
    if early:
        args.append("--early-stopping")
    rc, out, err = run_vkformer(args)
    if rc != 0:
        return None, "vkformer %s exited %d: %s" % (" ".join(args[3:]), rc, " | ".join(err[-3:]))
    got = []
    for line in out.splitlines():
        ids, _, score = line.partition("\t")
        got.append(([int(x) for x in ids.split(",")] if ids else [], float(score) if score else None))
    return got, None


def check(label, model, path, src, k, max_new, lp=1.0, early=False, min_new=0):
    n_best = k
    what = "%s: src len %d, beam %d, max-new %d, length-penalty %g%s%s" % (
        label, len(src), k, max_new, lp, ", early-stopping" if early else "", ", min-new %d" % min_new if min_new else "")
    eos = model.config["eos_id"]  # generate ends each source with eos, as translate does
    want = beam_search(model, src if src[-1] == eos else src + [eos], k, max_new, lp, early, n_best, min_new)
    got, err = beam_cli(path, src, k, max_new, lp, early, n_best, min_new)
    if err:
        return bad(what, err)
    if len(got) != len(want):
        return bad(what, "%d hypotheses, expected %d" % (len(got), len(want)))
    for j, ((gi, gs), (wi, ws)) in enumerate(zip(got, want)):
        if gi != wi or (gs is not None and abs(gs - ws) > SCORE_ATOL):
            return bad(what, "hypothesis %d: expected %s (%.6f)\ngot      %s (%s)\nall expected: %s\nall got: %s"
                       % (j, wi, ws, gi, gs, want, got))
    ok("%s (best %s, %.4f)" % (what, want[0][0], want[0][1]))


def check_greedy_equal(label, path, src, max_new):
    what = "%s: --beam 1 equals greedy, src len %d" % (label, len(src))
    rc1, g, e1 = run_vkformer(["generate", "--model", path, "--src", ",".join(map(str, src)), "--max-new", str(max_new)])
    rc2, b, e2 = run_vkformer(["generate", "--model", path, "--src", ",".join(map(str, src)), "--max-new", str(max_new),
                               "--beam", "1"])
    if rc1 or rc2:
        return bad(what, "exit %d / %d: %s" % (rc1, rc2, " | ".join(e1[-2:] + e2[-2:])))
    if g != b:
        return bad(what, "greedy %r, beam 1 %r" % (g, b))
    ok(what)


def check_batch(label, path, sources, k, max_new):
    """Several --src decode as one batch of len(sources) x k rows: each source's
    hypotheses as when it is decoded alone."""
    what = "%s: a batch of %d sources, beam %d, equals each alone" % (label, len(sources), k)
    args = ["generate", "--model", path, "--max-new", str(max_new), "--beam", str(k), "--n-best", str(k)]
    rc, out, err = run_vkformer(args + sum((["--src", ",".join(map(str, s))] for s in sources), []))
    if rc:
        return bad(what, "exit %d: %s" % (rc, " | ".join(err[-2:])))
    alone = []
    for s in sources:
        rc, o, err = run_vkformer(args + ["--src", ",".join(map(str, s))])
        if rc:
            return bad(what, "exit %d: %s" % (rc, " | ".join(err[-2:])))
        alone += o.splitlines()
    got = out.splitlines()
    if len(got) != len(alone) or any(g.split("\t")[0] != a.split("\t")[0] or
                                      abs(float(g.split("\t")[1]) - float(a.split("\t")[1])) > SCORE_ATOL
                                      for g, a in zip(got, alone)):
        return bad(what, "batch:\n%s\nalone:\n%s" % ("\n".join(got), "\n".join(alone)))
    ok(what)


def check_sampling(label, path, sources, max_new):
    """Sampling: --top-k 1 equals greedy (any temperature); a seed repeats itself,
    also inside a batch; some seeds differ (at temperature 3, over 8 seeds)."""
    srcs = sum((["--src", ",".join(map(str, s))] for s in sources), [])
    base = ["generate", "--model", path, "--max-new", str(max_new)] + srcs
    rc, greedy, err = run_vkformer(base)
    rc2, topk1, err2 = run_vkformer(base + ["--top-k", "1", "--temperature", "2.5", "--seed", "3"])
    what = "%s: sampling --top-k 1 equals greedy" % label
    if rc or rc2 or greedy != topk1:
        bad(what, "exit %d/%d: greedy %r, top-k 1 %r %s" % (rc, rc2, greedy, topk1, err + err2))
    else:
        ok(what)
    runs = {}
    for seed in range(8):
        rc, out, err = run_vkformer(base + ["--temperature", "3", "--top-p", "0.95", "--top-k", "20", "--seed", str(seed)])
        if rc:
            return bad("%s: sampling seed %d" % (label, seed), "exit %d: %s" % (rc, err))
        runs[seed] = out
    rc, again, err = run_vkformer(base + ["--temperature", "3", "--top-p", "0.95", "--top-k", "20", "--seed", "5"])
    what = "%s: sampling with a fixed seed repeats" % label
    if rc or again != runs[5]:
        bad(what, "seed 5: %r then %r %s" % (runs[5], again, err))
    else:
        ok(what)
    what = "%s: sampling with other seeds differs" % label
    if len(set(runs.values())) < 2:
        bad(what, "8 seeds gave %r" % runs[0])
    else:
        ok(what + " (%d distinct of 8)" % len(set(runs.values())))


def check_errors(path):
    for args, needle, code in ((["--beam", "0"], "--beam", 2), (["--beam", "17"], "--beam", 2),
                               (["--n-best", "0"], "--n-best", 2), (["--beam", "2", "--n-best", "3"], "n_best 3", 1),
                               (["--beam", "2", "--max-new", "3", "--min-new", "4"], "min_new 4", 1),
                               (["--top-p", "1.5"], "top_p 1.5", 1), (["--temperature", "-1"], "temperature -1", 1),
                               (["--top-p", "0"], "top_p 0", 1),
                               (["--temperature", "1", "--beam", "2"], "beam sampling", 1)):
        what = "error: generate %s (exit %d)" % (" ".join(args), code)
        rc, out, err = run_vkformer(["generate", "--model", path, "--src", "3,4"] + args)
        if rc != code or len(err) != 1 or needle not in err[0]:
            bad(what, "exit %d, stderr %r" % (rc, err))
        else:
            ok(what)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    lib.VKFORMER, demo = args
    lib.VERBOSE = "--verbose" in sys.argv
    quick = "--quick" in sys.argv
    rng = random.Random(14)
    tmp = os.environ.get("TMPDIR", "/tmp")
    path = os.path.join(tmp, "vkf_beam_%d.safetensors" % os.getpid())
    try:
        configs = [("post-LN relu", {}, 1), ("pre-LN gelu", {"norm_first": True, "activation": "gelu", "d_model": 40,
                                                              "n_heads": 4, "tgt_vocab_size": 23}, 2)]
        for label, overrides, seed in configs:
            model = export_torch.build_model(export_torch.default_config(**overrides), seed=seed)
            # a raised eos logit makes hypotheses finish at different lengths
            with torch.no_grad():
                model.generator.bias[model.config["eos_id"]] += 1.0
            export_torch.export(model, path)
            cases = [(1, 6, 1.0, False, 0), (2, 8, 1.0, False, 0), (4, 8, 1.0, False, 0), (4, 8, 0.6, True, 0),
                     (3, 10, 2.0, False, 2), (4, 6, -0.5, False, 0)]
            if quick:
                cases = cases[1:4]
            for k, max_new, lp, early, min_new in cases:
                src = [rng.randrange(3, model.config["src_vocab_size"]) for _ in range(rng.randrange(1, 9))]
                check(label, model, path, src, k, max_new, lp, early, min_new)
            check_greedy_equal(label, path, [5, 6, 7, 8], 8)
            check_batch(label, path, [[5, 6, 7], [9], [12, 4, 4, 8, 3]], 3, 7)
            check_sampling(label, path, [[5, 6, 7], [9, 10]], 8)
        check_errors(path)
        model = load_model(demo)
        texts = [[int(x) for x in s.split(",")] for s in ("5,6,7", "9,4,2")]
        c = model.config
        for src in texts:
            src = [x % c["src_vocab_size"] for x in src]
            check("demo", model, demo, src, 4, 12)
            if not quick:
                check("demo", model, demo, src, 5, 12, lp=0.6, early=True)
    finally:
        if os.path.exists(path):
            os.unlink(path)
    print("%d passed, %d failed" % (lib.passed, lib.failed))
    return 1 if lib.failed else 0


if __name__ == "__main__":
    sys.exit(main())
