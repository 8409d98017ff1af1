#!/usr/bin/python3
"""Inputs that expose one-line bugs the rest of the suite once let through (issue 38, part 4).

usage: /usr/bin/python3 tests/test_mutant_cases.py /path/to/vkformer [--verbose]

Each case was found by putting a one-line bug into the sources by hand (tools/mutants.py keeps
them as mutants) and seeing every test stay green. Each case first checks that its input does
expose the bug (the reference's answer with the bug differs from its answer without), then runs
vkformer against the reference:

  marian-leading-piece   `vkformer tokenize --decode` of a Marian folder (tests/gen_marian.py)
                         whose first id is a "▁word" piece of source.spm that target.spm does not
                         know: target.spm gives it back verbatim, so the text starts with a space
                         that MarianTokenizer.convert_tokens_to_string strips ("child S", never
                         " child S"); against tests/marian_ref.py's Tokenizer.decode.
  whisper-begin-suppress `vkformer transcribe --json` without timestamps (greedy and 2 beams) on a
                         Whisper folder (tests/gen_whisper.py) whose begin_suppress_tokens hold the
                         id its first step favours (found with tests/whisper_ref.py on the folder
                         with no begin-suppressed ids), against whisper_ref.transcribe: the first
                         id must not be the suppressed one.

VKFORMER_VALIDATE=1 is set for every run (a validation message fails it). Prints "N passed,
M failed" and exits 1 on any failure.
"""
import json
import os
import sys
import tempfile

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
try:
    import numpy as np
    import torch
    import sentencepiece  # noqa: F401
    import soundfile as sf
except ImportError as e:
    print("test_mutant_cases: %s is missing: apt-get install python3-torch python3-numpy python3-sentencepiece "
          "python3-soundfile (run with /usr/bin/python3)" % e.name, file=sys.stderr)
    sys.exit(1)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_marian  # noqa: E402
import gen_whisper  # noqa: E402
import marian_ref  # noqa: E402
import whisper_ref  # noqa: E402
import vkf_testlib as lib  # noqa: E402
from vkf_testlib import bad, ids_arg, ok, run_vkformer  # noqa: E402

SPACE = "\u2581"


def check(cond, what, detail=""):
    if cond:
        ok(what)
    else:
        bad(what, detail)
    return cond


# ------------------------------------------------------------------ Marian: a leading piece target.spm lacks

def marian_leading_piece(tmp):
    path = os.path.join(tmp, "marian")
    gen_marian.make_folder(path, d_model=16, layers=1, heads=2, ffn=16, seed=7)
    tok = marian_ref.Tokenizer(path)
    tgt_unk = tok.tgt.unk_id()
    # "▁word" pieces of the joint vocabulary that only source.spm has, longest first (a whole word)
    src_only = sorted((p for p in tok.vocab if p.startswith(SPACE) and len(p) > 2 and
                       tok.src.piece_to_id(p) != tok.src.unk_id() and tok.tgt.piece_to_id(p) == tgt_unk),
                      key=lambda p: (-len(p), p))
    tgt_pieces = [p for p in tok.vocab if len(p) > 1 and tok.tgt.piece_to_id(p) != tgt_unk and
                  tok.vocab[p] not in tok.special_ids]
    if not check(src_only and tgt_pieces, "marian: the folder has a \u2581 piece only source.spm knows",
                 "source-only pieces %d, target pieces %d" % (len(src_only), len(tgt_pieces))):
        return
    cases = [[tok.vocab[src_only[0]], tok.vocab[tgt_pieces[0]]],
             [tok.vocab[src_only[0]]],
             [tok.vocab[src_only[1 % len(src_only)]], tok.vocab[src_only[0]], tok.vocab[tgt_pieces[-1]], tok.eos]]
    for ids in cases:
        pieces = [tok.inv[i] for i in ids if i not in tok.special_ids]
        raw = tok.tgt.decode_pieces(pieces).replace(SPACE, " ")
        want = tok.decode(ids)
        what = "marian: tokenize --decode %s (%s)" % (ids_arg(ids), " ".join(pieces))
        # the input exposes a decode that keeps the leading space: target.spm's own text starts with one
        if not check(raw.startswith(" ") and not want.startswith(" "), what + ": the input starts with a space",
                     "target.spm gives %r, the reference %r" % (raw, want)):
            continue
        rc, out, err = run_vkformer(["tokenize", "--model", path, "--decode", ids_arg(ids)])
        got = out[:-1] if out.endswith("\n") else out
        if rc != 0:
            bad(what, "exit %d: %s" % (rc, " | ".join(err[-3:])))
        else:
            check(got == want, "%s -> %r" % (what, want), "expected %r\ngot      %r" % (want, got))


# ------------------------------------------------------------------ Whisper: begin-suppressed first id

def set_begin_suppress(folder, ids):
    for name in ("config.json", "generation_config.json"):
        p = os.path.join(folder, name)
        with open(p) as f:
            j = json.load(f)
        j["begin_suppress_tokens"] = ids
        with open(p, "w") as f:
            json.dump(j, f, indent=2)


def first_ids(result):
    return [s[2] if isinstance(s, tuple) else s["ids"] for s in result["segments"]]


def whisper_begin_suppress(tmp):
    folder = os.path.join(tmp, "whisper")
    info = gen_whisper.make_folder(folder, layout="hub", timestamps=100, seed=31, layers=1, ffn=48)
    eos = info["specials"]
    t = np.arange(16000) / 16000.0
    x = (0.3 * np.sin(2 * np.pi * (220 + 80 * np.sin(2 * np.pi * 0.7 * t)) * t) +
         0.05 * np.random.default_rng(3).standard_normal(t.size)).astype(np.float32)
    wav = os.path.join(tmp, "clip.wav")
    sf.write(wav, x, 16000, subtype="FLOAT")
    ref = whisper_ref.load_folder(folder)
    for beams in (1, 2):
        # what the first step picks with nothing begin-suppressed: that id becomes the suppressed one
        set_begin_suppress(folder, [])
        free = whisper_ref.transcribe(ref, folder, x, language="en", beams=beams)
        seq = [i for s in first_ids(free) for i in s]
        favoured = seq[0] if seq else eos
        set_begin_suppress(folder, [favoured, eos] if favoured != eos else [eos])
        want = whisper_ref.transcribe(ref, folder, x, language="en", beams=beams)
        wseq = [i for s in first_ids(want) for i in s]
        what = "whisper: transcribe --beam %d, begin_suppress_tokens [%d, %d]" % (beams, favoured, eos)
        if not check(seq != wseq and (not wseq or wseq[0] != favoured),
                     what + ": the suppressed id is the first step's favourite",
                     "without suppression %s, with %s" % (seq[:8], wseq[:8])):
            continue
        rc, out, err = run_vkformer(["transcribe", "--model", folder, "--json", "--language", "en",
                                     "--beam", str(beams), wav])
        lines = out.splitlines()
        if rc != 0 or len(lines) != 1:
            bad(what, "exit %d, %d stdout lines: %s" % (rc, len(lines), " | ".join(err[-3:])))
            continue
        got = json.loads(lines[0])
        gseq = [i for s in first_ids(got) for i in s]
        check(gseq == wseq and got["prompt"] == want["prompt"],
              "%s: ids %s as the reference" % (what, wseq[:6]),
              "got prompt %s ids %s\nreference prompt %s ids %s (without suppression %s)" % (
                  got["prompt"], gseq[:12], want["prompt"], wseq[:12], seq[:12]))


CASES = {"marian-leading-piece": marian_leading_piece, "whisper-begin-suppress": whisper_begin_suppress}


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = [a for a in sys.argv[1:] if a.startswith("--")]
    if len(args) < 1 or any(f != "--verbose" for f in flags) or any(a not in CASES for a in args[1:]):
        print("usage: %s /path/to/vkformer [--verbose] [CASE...] (cases: %s)" % (sys.argv[0], ", ".join(CASES)),
              file=sys.stderr)
        return 2
    lib.VERBOSE = "--verbose" in flags
    lib.VKFORMER = os.path.abspath(args[0])
    if not os.access(lib.VKFORMER, os.X_OK):
        print("test_mutant_cases: %s is not an executable" % lib.VKFORMER, file=sys.stderr)
        return 1
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    with tempfile.TemporaryDirectory(prefix="vkf-mutant-cases-") as tmp:
        for name in args[1:] or CASES:
            CASES[name](tmp)
    print("test_mutant_cases: %d passed, %d failed" % (lib.passed, lib.failed))
    return 1 if lib.failed else 0


if __name__ == "__main__":
    sys.exit(main())
