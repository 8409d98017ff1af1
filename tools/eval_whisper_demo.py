#!/usr/bin/python3
"""The Whisper demo model's held-out accuracy, in PyTorch (tests/whisper_ref.py) and through vkformer.

    /usr/bin/python3 tools/eval_whisper_demo.py [--model models/whisper-numbers]
        [--heldout tests/data/whisper_numbers_heldout.tsv] [--audio /tmp/whisper-numbers-heldout]
        [--library build/libvkformer.so] [--device N] [--out transcripts.tsv]

The held-out clips are the 16 kHz WAV files tools/train_whisper_demo.py wrote under --audio; a missing
one is made again from its line of the TSV with espeak-ng (read and resampled by vkformer.read_audio,
16-bit, as in training). Both sides read the same WAV files.

  reference  tests/whisper_ref.py on the folder: features as WhisperFeatureExtractor, batched greedy
             decoding after <|startoftranscript|> <|en|> <|transcribe|> <|notimestamps|>;
  vkformer   the Python binding: greedy decoding by teacher-forced passes (Model.forward_audio on the
             WAV files as vkformer.read_audio reads them, the whole held-out set as one batch per step,
             each step's argmax appended), so the features, encoder and decoder are vkformer's;
  agreement  the teacher-forced argmax of vkformer against the reference's at every position of each
             clip's reference transcript (prompt, text, <|endoftext|>), and the largest logit gap.
A transcript is right when it equals " " + the number's digits. Prints the accuracy of each side and
how often they agree; --out writes id, number, reference transcript, vkformer transcript per line.
Exit 1 if the two sides disagree on any transcript or argmax.
"""
import argparse
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
import train_whisper_demo as demo  # noqa: E402
import whisper_ref  # noqa: E402  (tests/, on the path through train_whisper_demo)


def read_specs(path):
    specs = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            i, n, words, voice, speed, pitch = line.rstrip("\n").split("\t")
            specs.append((i, int(n), words, voice, int(speed), int(pitch)))
    return specs


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=os.path.join(ROOT, "models", "whisper-numbers"))
    p.add_argument("--heldout", default=os.path.join(ROOT, "tests", "data", "whisper_numbers_heldout.tsv"))
    p.add_argument("--audio", default="/tmp/whisper-numbers-heldout")
    p.add_argument("--library", default=os.environ.get("VKFORMER_LIBRARY") or os.path.join(ROOT, "build",
                                                                                             "libvkformer.so"))
    p.add_argument("--device", default=None)
    p.add_argument("--precision", default="auto")
    p.add_argument("--out")
    a = p.parse_args()
    torch.set_num_threads(1)
    import vkformer

    specs = read_specs(a.heldout)
    os.makedirs(a.audio, exist_ok=True)
    paths = [os.path.join(a.audio, s[0] + ".wav") for s in specs]
    missing = [i for i, q in enumerate(paths) if not os.path.exists(q)]
    if missing:
        speaker = demo.Speaker(a.library)
        try:
            for i in missing:
                demo.write_wav(paths[i], speaker.say(*specs[i][2:]))
        finally:
            speaker.close()
        print("made %d missing clips with espeak-ng" % len(missing))
    expected = [" %d" % s[1] for s in specs]

    t0 = time.time()
    ref = whisper_ref.load_folder(a.model)
    feats = torch.from_numpy(np.stack([whisper_ref.log_mel(demo.read_wav(q), ref.fe) for q in paths]))
    ref_text, ref_ids = demo.transcripts(ref.encode, ref.decode, feats)
    ref_right = sum(t == e for t, e in zip(ref_text, expected))
    print("reference (tests/whisper_ref.py, PyTorch %s): %d of %d held-out transcripts right (%.1f%%), %.0f s" % (
        torch.__version__, ref_right, len(specs), 100.0 * ref_right / len(specs), time.time() - t0), flush=True)

    t0 = time.time()
    m = vkformer.load(a.model, device=a.device, precision=a.precision, library=a.library)
    device = m.context.device_name
    # (a list of paths reads as one clip in the binding's _is_clip_batch: the samples go in instead)
    clips = [vkformer.read_audio(q, demo.RATE, library=a.library)[0] for q in paths]
    ids = [list(demo.PROMPT) for _ in specs]
    done = [False] * len(specs)
    for _ in range(8):
        logits = m.forward_audio(clips, ids)
        for i, row in enumerate(ids):
            nxt = demo.EOT if done[i] else int(logits[i, len(row) - 1].argmax())
            row.append(nxt)
            done[i] = done[i] or nxt == demo.EOT
        if all(done):
            break
    vk_ids = [row[len(demo.PROMPT):] for row in ids]
    vk_text = [demo.ids_text(r[:r.index(demo.EOT)] if demo.EOT in r else r) for r in vk_ids]
    vk_right = sum(t == e for t, e in zip(vk_text, expected))
    print("vkformer (%s, precision %s, greedy by teacher-forced passes): %d of %d right (%.1f%%), %.0f s" % (
        device, a.precision, vk_right, len(specs), 100.0 * vk_right / len(specs), time.time() - t0), flush=True)
    same = sum(r == v for r, v in zip(ref_text, vk_text))
    print("transcripts equal to the reference's: %d of %d" % (same, len(specs)))

    # teacher-forced argmax on the reference's transcripts
    tgts = [list(demo.PROMPT) + r + [demo.EOT] for r in ref_ids]
    positions = agree = 0
    gap = 0.0
    for lo in range(0, len(specs), 100):
        chunk = range(lo, min(lo + 100, len(specs)))
        vk = m.forward_audio([clips[i] for i in chunk], [tgts[i] for i in chunk])
        for k, i in enumerate(chunk):
            r = whisper_ref.forward_logits(ref, feats[i].numpy(), tgts[i])
            v = vk[k, :len(tgts[i])]
            positions += len(tgts[i])
            agree += int((r.argmax(1) == v.argmax(1)).sum())
            gap = max(gap, float(np.abs(r - v).max()))
    print("teacher-forced argmax equal to the reference's at %d of %d positions; largest logit gap %.2e" % (
        agree, positions, gap))
    for i, s in enumerate(specs):
        if ref_text[i] != vk_text[i]:
            print("  differ: %s %r: reference %r, vkformer %r" % (s[0], s[2], ref_text[i], vk_text[i]))
    if a.out:
        with open(a.out, "w") as f:
            f.write("# id\tnumber\treference\tvkformer\n")
            for s, r, v in zip(specs, ref_text, vk_text):
                f.write("%s\t%d\t%s\t%s\n" % (s[0], s[1], r, v))
    m.close()
    return 0 if same == len(specs) and agree == positions else 1


if __name__ == "__main__":
    sys.exit(main())
