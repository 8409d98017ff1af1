#!/usr/bin/python3
"""Whisper folders against the reference (tests/whisper_ref.py), through the CLI and the Python binding.

usage: test_whisper.py VKFORMER LIBVKFORMER.so [--quick] [--no-device-binding | --no-binding]

On random-weight folders written by tests/gen_whisper.py (hub and save_pretrained layouts):
  - forward --audio FILE --tgt IDS --out F.npy: logits within 1e-3 of the reference fed the samples
    soundfile reads (WAV PCM_16 at 16 kHz, FLAC at 44.1 kHz stereo, Ogg Vorbis at 22.05 kHz: the
    reference resamples nothing, so the 16 kHz file checks the whole path and the others are read
    through vkformer.read_audio for the reference), on folders of 80 and 128 mels, F16 weights, an
    untied proj_out, no encoder positions in the file, stored proj_out, 3 layers;
  - --json: the argmax of every position equals the reference's;
  - every attention variant runs on the encoder (--attention); dense-naive and local:W with W past the
    encoder's length give dense's logits (1e-4); bench attention --model on the folder (its
    teacher-forced agreement records);
  - --precision f16 (where the device has 16-bit storage) and int8 run the stem and stay near f32;
  - with the binding (not for a driver run through a runner's glibc: --no-device-binding; the binding
    still reads audio there, which needs no device; --no-binding, for sanitized builds, not even that):
    audio_features equal the reference
    within 1e-4 (speech from espeak-ng when it is installed, tones, silence, a clip past the window);
    forward_features, forward_audio and encode_audio agree with the reference; a batch of 3 clips;
  - misuse: --audio with --src, --audio on a text model, --src on a Whisper folder (exit 2);
    generate on a Whisper folder (exit 1, one line); malformed audio (exit 1, one line naming it);
  - malformed folders (gen_whisper.MALFORMED): exit 1 and one line naming the problem;
  - transcribe (folders with timestamp ids, gen_whisper --timestamps 100 --timestamp-bias 3): greedy and beam
    search, timestamps on and off, language detected and given, transcribe and translate, clips of 1.5 s and
    2.6 windows (long-form): segments, times, prompt and windows equal whisper_ref.transcribe's, and the runs
    must have cut a window at a timestamp pair, ended a sequence in a lone timestamp, sought over several
    windows, detected and been given a language; the printed forms; Model.transcribe through the binding;
    misuse (unknown language, bad task, no or unreadable files, a folder without timestamp ids, a text
    model): one line, exit 1 or 2.
The device is whatever VK_ICD_FILENAMES selects; the validation layer is on (VKFORMER_VALIDATE=1).
"""
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import numpy as np  # noqa: E402
import soundfile as sf  # noqa: E402

import gen_whisper  # noqa: E402
import whisper_ref  # noqa: E402
from vkf_testlib import bad, ids_arg, ok, run_vkformer  # noqa: E402
import vkf_testlib  # noqa: E402


def check(cond, what, detail=""):
    if cond:
        ok(what)
    else:
        bad(what, detail)

LOGITS_ATOL = 1e-3
FEATURES_ATOL = 1e-4
LIB = None


def tone(seconds, rate=16000, f=440.0, noise=0.05, seed=0):
    r = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * f * t) + noise * r.standard_normal(t.size)).astype(np.float32)


def one_line(err):
    return len(err) == 1 and err[0].startswith("vkformer: ")


def forward_cli(folder, audio, tgt, tmp, extra=()):
    out = os.path.join(tmp, "logits.npy")
    rc, _, err = run_vkformer(["forward", "--model", folder, "--audio", audio, "--tgt", ids_arg(tgt), "--out", out]
                              + list(extra))
    if rc != 0:
        return None, " | ".join(err)
    return np.load(out), ""


def read16k(path):
    import vkformer
    return vkformer.read_audio(path, 16000, library=LIB)[0]


def check_folder(label, folder, info, tmp, rng, quick):
    ref = whisper_ref.load_folder(folder)
    secs = ref.fe["chunk_length"]
    clips = [("wav 16 kHz", "PCM_16", "WAV", 16000, 1)]
    if not quick:
        clips += [("flac 44.1 kHz stereo", "PCM_16", "FLAC", 44100, 2), ("ogg vorbis 22.05 kHz", "VORBIS", "OGG", 22050, 1)]
    worst = 0.0
    for name, sub, fmt, rate, ch in clips:
        x = tone(secs * 0.7, rate, f=300 + 100 * len(name), seed=len(name))
        if ch == 2:
            x = np.stack([x, tone(secs * 0.7, rate, f=700, seed=3)], axis=1)
        path = os.path.join(tmp, "clip.%s" % fmt.lower())
        sf.write(path, x, rate, format=fmt, subtype=sub)
        if rate == 16000 and ch == 1:
            samples = sf.read(path, dtype="float32")[0]
        elif LIB:
            samples = read16k(path)
        else:
            continue
        for T in (1, 6) if quick else (1, 6, 19):
            tgt = [info["specials"] + 1] + [int(v) for v in rng.integers(0, info["vocab"], T - 1)]
            got, err = forward_cli(folder, path, tgt, tmp)
            if got is None:
                bad("%s %s forward" % (label, name), err)
                return
            want = whisper_ref.forward_audio(ref, samples, tgt)
            worst = max(worst, float(np.abs(got - want).max()))
    check(worst <= LOGITS_ATOL, "%s: forward --audio logits, worst |vkformer - reference| %.3g" % (label, worst))


def check_json_and_attention(folder, info, tmp, rng, quick):
    ref = whisper_ref.load_folder(folder)
    x = tone(1.2)
    path = os.path.join(tmp, "a.wav")
    sf.write(path, x, 16000, subtype="FLOAT")
    tgt = [info["specials"] + 1] + [int(v) for v in rng.integers(0, info["vocab"], 9)]
    want = whisper_ref.forward_audio(ref, x, tgt)
    rc, out, err = run_vkformer(["forward", "--model", folder, "--audio", path, "--tgt", ids_arg(tgt), "--json"])
    if rc != 0:
        bad("forward --audio --json", " | ".join(err))
    else:
        rec = json.loads(out.splitlines()[0])
        same = rec.get("argmax") == [int(v) for v in want.argmax(axis=1)] and rec.get("audio") == path
        check(same, "forward --audio --json: argmax of every position and the audio file",
                              "" if same else out[:300])
    dense, err = forward_cli(folder, path, tgt, tmp)
    for precision, tol in (("f16", 5e-2), ("int8", 0.5)):
        got, err = forward_cli(folder, path, tgt, tmp, ["--precision", precision])
        if got is None and precision == "f16" and "16-bit storage" in err:
            print("note: --precision f16 not checked: %s" % err)
            continue
        if got is None:
            bad("--precision %s" % precision, err)
            continue
        diff = float(np.abs(got - dense).max())
        check(diff <= tol, "--precision %s: logits within %g of f32 (%.3g)" % (precision, tol, diff))
    S = info["frames"] // 2
    variants = ["dense-naive", "local:%d" % S, "local:8", "strided:8:16", "bigbird:8:1:1", "lowrank:32",
                "lsh:2:16"]
    if quick:
        variants = ["dense-naive", "local:%d" % S, "local:8", "bigbird:8:1:1"]
    for v in variants:
        got, err = forward_cli(folder, path, tgt, tmp, ["--attention", v])
        if got is None:
            bad("--attention %s on the encoder" % v, err)
            continue
        diff = float(np.abs(got - dense).max())
        if v in ("dense-naive", "local:%d" % S):
            check(diff <= 1e-4, "--attention %s equals dense (worst %.3g)" % (v, diff))
        else:
            check(np.isfinite(got).all(), "--attention %s runs (max |diff| from dense %.3g)" % (v, diff))


def check_bench_attention(folder):
    rc, out, err = run_vkformer(["bench", "attention", "--model", folder, "--n", "64", "--variants",
                                 "dense,local:8", "--repeat", "1", "--json"], timeout=600)
    recs = [json.loads(l) for l in out.splitlines() if l.startswith("{")] if rc == 0 else []
    agree = {r["variant"]: r for r in recs if r.get("record") == "agreement"}
    good = (rc == 0 and set(agree) == {"dense", "local:8"} and agree["dense"]["greedy_agreement"] == 1.0
            and all(r["teacher_forced"] is True and r["sources"] == 8 for r in agree.values())
            and 0.0 <= agree["local:8"]["greedy_agreement"] <= 1.0)
    check(good, "bench attention --model on a Whisper folder: teacher-forced agreement of dense 1.0, local:8 %s" % (
        agree.get("local:8", {}).get("greedy_agreement")), "exit %d: %s %s" % (rc, out[-400:], " | ".join(err)[-400:]))


def check_binding(folder, info, tmp, rng):
    import vkformer
    ref = whisper_ref.load_folder(folder)
    with vkformer.load(folder, library=LIB) as m:
        c = m.config
        if (c.audio_mels, c.audio_frames, c.sample_rate, c.family) != (info["mels"], info["frames"], 16000, "whisper"):
            bad("config", str(c))
        n = c.audio_samples
        clips = {"tone": tone(1.0), "silence": np.zeros(8000, np.float32), "empty": np.zeros(0, np.float32),
                 "past the window": tone(n / 16000 + 1.3, f=1000), "loud square": np.sign(tone(0.5, noise=0))}
        speech = os.path.join(tmp, "speech.wav")
        if shutil.which("espeak-ng") and subprocess.run(["espeak-ng", "-w", speech, "four hundred and two"],
                                                        capture_output=True).returncode == 0:
            clips["espeak-ng speech"] = m_read(speech)
        else:
            print("note: espeak-ng is not installed: features of synthesized speech not checked")
        for name, x in clips.items():
            got = m.audio_features(x)
            want = whisper_ref.log_mel(x, ref.fe)
            err = float(np.abs(got - want).max())
            check(err <= FEATURES_ATOL, "audio_features %s: worst %.3g" % (name, err))
        tgts = [[info["specials"] + 1] + [int(v) for v in rng.integers(0, info["vocab"], k)] for k in (3, 7, 1)]
        xs = [clips["tone"], clips["silence"], clips["past the window"]]
        got = m.forward_audio(xs, tgts)
        worst = 0.0
        for i, (x, t) in enumerate(zip(xs, tgts)):
            want = whisper_ref.forward_audio(ref, x, t)
            worst = max(worst, float(np.abs(got[i, :len(t)] - want).max()))
            if np.any(got[i, len(t):] != 0):
                bad("forward_audio batch: rows past target %d are not zero" % i)
        check(worst <= LOGITS_ATOL, "forward_audio, a batch of 3 clips: worst %.3g" % worst)
        f = m.audio_features(xs[0])
        same = np.abs(m.forward_features(f, tgts[0]) - got[0, :len(tgts[0])]).max()
        check(same <= 1e-5, "forward_features equals forward_audio (%.3g)" % same)
        enc = m.encode_audio(xs[0])
        want = ref.encode(whisper_ref.log_mel(xs[0], ref.fe)[None])[0].numpy()
        err = float(np.abs(enc - want).max())
        check(err <= LOGITS_ATOL, "encode_audio: (%d, %d), worst %.3g" % (enc.shape + (err,)))
        for what, call in (("NaN samples", lambda: m.audio_features(np.array([0.0, np.nan], np.float32))),
                           ("NaN features", lambda: m.forward_features(np.full((c.audio_mels, c.audio_frames), np.nan,
                                                                               np.float32), tgts[0])),
                           ("ids past the vocabulary", lambda: m.forward_audio(xs[0], [c.tgt_vocab_size])),
                           ("source ids", lambda: m.forward([1, 2], [1, 2]))):
            try:
                call()
                bad("binding refuses %s" % what, "it ran")
            except vkformer.VkformerError as e:
                check("\n" not in str(e), "binding refuses %s: %s" % (what, e))


def m_read(path):
    return read16k(path)


def check_misuse(folder, text_model, tmp):
    wav = os.path.join(tmp, "m.wav")
    sf.write(wav, tone(0.5), 16000)
    cases = [
        (["forward", "--model", folder, "--audio", wav, "--src", "1", "--tgt", "1", "--out", "-"], 2, "one of them"),
        (["forward", "--model", folder, "--src", "1,2", "--tgt", "1", "--out", os.path.join(tmp, "x.npy")], 2,
         "reads audio"),
        (["generate", "--model", folder, "--src", "1,2"], 1, "audio"),
    ]
    if text_model:
        cases.append((["forward", "--model", text_model, "--audio", wav, "--tgt", "1", "--out",
                       os.path.join(tmp, "x.npy")], 2, "reads text"))
    bad_files = {"cut.wav": None, "random.wav": b"\x00\x01junk" * 100, "empty.wav": b""}
    with open(wav, "rb") as f:
        bad_files["cut.wav"] = f.read()[:300]
    for name, data in bad_files.items():
        p = os.path.join(tmp, name)
        with open(p, "wb") as f:
            f.write(data)
        cases.append((["forward", "--model", folder, "--audio", p, "--tgt", "1", "--out", os.path.join(tmp, "x.npy")],
                      1, name))
    cases.append((["forward", "--model", folder, "--audio", os.path.join(tmp, "nope.wav"), "--tgt", "1", "--out",
                   os.path.join(tmp, "x.npy")], 1, "no such file"))
    for args, code, key in cases:
        rc, _, err = run_vkformer(args)
        good = rc == code and one_line(err) and key in err[0]
        check(good, "%s exits %d naming %r" % (" ".join(a for a in args[:1] + args[3:5]), code, key),
                              "" if good else "exit %d: %s" % (rc, " | ".join(err)))


# ------------------------------------------------------------------ transcription (vkformer transcribe)

def transcribe_cli(folder, wav, extra=()):
    rc, out, err = run_vkformer(["transcribe", "--model", folder, "--json"] + list(extra) + [wav])
    out = out.splitlines()
    if rc != 0 or len(out) != 1:
        return None, "exit %d: %s" % (rc, " | ".join(err))
    return json.loads(out[0]), ""


def same_segments(got, want):
    """vkformer's segments (dicts) against whisper_ref's (start, end, ids) or other dicts: ids equal, times within
    1e-6 (JSON records carry 9 significant digits)."""
    if len(got) != len(want):
        return False
    want = [(w["start"], w["end"], w["ids"]) if isinstance(w, dict) else w for w in want]
    return all(g["ids"] == list(w[2]) and abs(g["start"] - w[0]) < 1e-6 and abs(g["end"] - w[1]) < 1e-6
               for g, w in zip(got, want))


def check_transcribe(tmp, quick, binding):
    """Greedy and beam search, with and without timestamps, language detected and given, both tasks, clips
    shorter than a window and 2.6 windows long (long-form seeking), on folders whose timestamp ids exist (and,
    with --timestamp-bias 3, come out often): the segments' ids and times, the prompt and the windows equal
    whisper_ref.transcribe's. The runs must exercise every path: a window split at a timestamp pair before
    its end (seek by the last pair), a sequence ending in a lone timestamp, a segment of more than one window,
    language detection and a given language."""
    folders = [("hub", dict(layout="hub", timestamps=100, timestamp_bias=3.0, seed=21)),
               ("save_pretrained", dict(layout="save_pretrained", timestamps=100, timestamp_bias=3.0, seed=22))]
    if not quick:
        folders.append(("hub unbiased", dict(layout="hub", timestamps=100, seed=23)))
    rng = np.random.default_rng(9)
    clips = []
    for seconds in ((1.5, 5.3) if quick else (1.5, 5.3, 7.9)):
        t = np.arange(int(seconds * 16000)) / 16000.0
        f = 200 + 150 * np.sin(2 * np.pi * 0.3 * t)
        x = (0.3 * np.sin(2 * np.pi * np.cumsum(f) / 16000) + 0.05 * rng.standard_normal(t.size)).astype(np.float32)
        wav = os.path.join(tmp, "speech%.1f.wav" % seconds)
        sf.write(wav, x, 16000, subtype="FLOAT")
        clips.append((seconds, wav, x))
    modes = [((), {}), (("--timestamps",), {"timestamps": True}), (("--beam", "3", "--timestamps"),
                                                                    {"beams": 3, "timestamps": True}),
             (("--language", "de", "--task", "translate", "--timestamps"),
              {"language": "de", "task": "translate", "timestamps": True})]
    if not quick:
        modes += [(("--beam", "2"), {"beams": 2}), (("--task", "translate"), {"task": "translate"}),
                  (("--language", "German"), {"language": "German"})]
    seen = {"pair cut": 0, "lone ending": 0, "windows > 1": 0, "detected": 0, "given": 0}
    for label, kw in folders:
        folder = os.path.join(tmp, "ts-" + label.replace(" ", "_"))
        info = gen_whisper.make_folder(folder, **kw)
        ref = whisper_ref.load_folder(folder)
        tb = info["timestamp_begin"]
        for seconds, wav, x in clips:
            for args, rkw in modes:
                what = "transcribe %s %.1f s %s" % (label, seconds, " ".join(args) or "(defaults)")
                got, why = transcribe_cli(folder, wav, args)
                if got is None:
                    bad(what, why)
                    continue
                want = whisper_ref.transcribe(ref, folder, x, **rkw)
                good = (same_segments(got["segments"], want["segments"]) and got["prompt"] == want["prompt"] and
                        got["windows"] == want["windows"])
                check(good, "%s: %d segments, %d windows, prompt %s as the reference" % (
                    what, len(got["segments"]), got["windows"], got["prompt"]),
                    "" if good else "got %s %s, reference %s %s" % (
                        got["prompt"], [(s["start"], s["end"], s["ids"]) for s in got["segments"]][:4],
                        want["prompt"], want["segments"][:4]))
                if got["timestamps"]:
                    for s in got["segments"]:
                        ids = s["ids"]
                        if len(ids) >= 2 and ids[-1] >= tb and ids[-2] >= tb and s["end"] % 2 > 1e-9:
                            seen["pair cut"] += 1
                        if len(ids) >= 2 and ids[-1] >= tb and ids[-2] < tb:
                            seen["lone ending"] += 1
                seen["windows > 1"] += got["windows"] > 1
                seen["detected"] += got["language_detected"]
                seen["given"] += "--language" in args
    for k, n in seen.items():
        check(n > 0, "transcription exercised: %s (%d runs)" % (k, n))
    # the printed forms: whisper.cpp's segment lines, and the text line
    folder = os.path.join(tmp, "ts-hub")
    rc, out, err = run_vkformer(["transcribe", "--model", folder, "--timestamps", clips[1][1]])
    out = out.splitlines()
    lines_ok = rc == 0 and out and all(len(l) > 34 and l[0] == "[" and l[13:18] == " --> " and l[30:33] == "]  "
                                       for l in out)
    check(lines_ok, "transcribe --timestamps prints [hh:mm:ss.mmm --> hh:mm:ss.mmm]  ... lines (%d)" % len(out),
          "exit %d: %s %s" % (rc, out[:2], err))
    rc, out, err = run_vkformer(["transcribe", "--model", folder, clips[0][1], clips[1][1]])
    out = out.splitlines()
    check(rc == 0 and len(out) == 4 and out[0] == clips[0][1] + ":" and out[2] == clips[1][1] + ":",
          "transcribe of two files: a FILE: line before each output", "exit %d: %s %s" % (rc, out, err))
    if binding:
        import vkformer
        with vkformer.load(folder, library=LIB) as m:
            r = m.transcribe(clips[1][2], timestamps=True)
            want, _ = transcribe_cli(folder, clips[1][1], ("--timestamps",))
            same = want is not None and same_segments(r["segments"], want["segments"])
            check(same, "binding: Model.transcribe(array) equals the CLI (%d segments)" % len(r["segments"]))
            # one window at a time: Model.transcribe_windows (vkf_transcription_*) and the
            # on_window callback of vkf_model_transcribe
            steps = list(m.transcribe_windows(clips[1][2], timestamps=True))
            whole = m.transcribe(clips[1][2], timestamps=True)
            check(len(steps) == whole["windows"] > 1 and steps[-1] == whole and
                  all(s["text"] is None and s["windows"] == i + 1 for i, s in enumerate(steps[:-1])) and
                  all(a["segments"] == b["segments"][:len(a["segments"])] for a, b in zip(steps, steps[1:])),
                  "binding: transcribe_windows yields the transcript after each of %d windows, the last equal to "
                  "transcribe" % whole["windows"], "%d yields: %s" % (len(steps), [s["windows"] for s in steps]))
            seen = []
            cb = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(vkformer._Transcript))(
                lambda user, t: seen.append(vkformer._transcript_dict(t.contents)))
            o = vkformer._transcribe_options(m._lib, None, None, True, None)
            o.on_window = ctypes.cast(cb, ctypes.c_void_p)
            a = np.ascontiguousarray(clips[1][2], dtype=np.float32)
            t = ctypes.POINTER(vkformer._Transcript)()
            st = m._lib.vkf_model_transcribe(m._live(), a.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), a.size,
                                             ctypes.byref(o), ctypes.byref(t))
            got = vkformer._transcript(m._lib, t) if st == 0 else None
            check(got == whole and len(seen) == whole["windows"] and seen[-1]["segments"] == whole["segments"] and
                  all(s["windows"] == i + 1 and s["text"] is None for i, s in enumerate(seen)),
                  "vkf_model_transcribe's on_window is called once per window with the segments so far (%d calls)" %
                  len(seen))
            x, done, t = ctypes.c_void_p(), ctypes.c_bool(False), ctypes.POINTER(vkformer._Transcript)()
            st1 = m._lib.vkf_transcription_begin(m._live(), a.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), a.size,
                                                 ctypes.byref(o), ctypes.byref(x))
            st2 = m._lib.vkf_transcription_next(x, ctypes.byref(done)) if st1 == 0 else -1
            st3 = m._lib.vkf_transcription_finish(x, ctypes.byref(t)) if st2 == 0 else -1
            message = m._lib.vkf_last_error().decode()
            check(st1 == 0 and st2 == 0 and not done.value and st3 != 0 and "not done" in message and not t,
                  "vkf_transcription_finish before the last window fails: %s" % message)
            r2 = m.transcribe(clips[0][1], language="de", beams=2)
            w2 = whisper_ref.transcribe(whisper_ref.load_folder(folder), folder, clips[0][2], language="de", beams=2)
            check(r2["prompt"] == w2["prompt"] and same_segments(r2["segments"], w2["segments"]) and
                  r2["language"] == "de" and not r2["language_detected"],
                  "binding: Model.transcribe(path, language, beams) equals the reference")
            for what, call in (("an unknown language", lambda: m.transcribe(clips[0][2], language="klingon")),
                               ("a bad task", lambda: m.transcribe(clips[0][2], task="summarize")),
                               ("NaN samples", lambda: m.transcribe(np.array([0.0, np.nan], np.float32)))):
                try:
                    call()
                    bad("binding refuses %s" % what, "it ran")
                except vkformer.VkformerError as e:
                    check("\n" not in str(e), "binding refuses %s: %s" % (what, e))
    return folder


def check_transcribe_misuse(folder, plain_folder, text_model, tmp):
    wav = os.path.join(tmp, "m.wav")
    sf.write(wav, tone(0.5), 16000)
    bad_wav = os.path.join(tmp, "bad.wav")
    with open(bad_wav, "wb") as f:
        f.write(b"RIFF\x00\x00junk" * 20)
    cases = [
        (["transcribe", "--model", folder, "--language", "klingon", wav], 1, "unknown language"),
        (["transcribe", "--model", folder, "--language", "ja", wav], 1, "not one of this model's"),
        (["transcribe", "--model", folder, "--task", "summarize", wav], 2, "--task"),
        (["transcribe", "--model", folder], 2, "sound files"),
        (["transcribe", "--model", folder, os.path.join(tmp, "nope.wav")], 1, "nope.wav"),
        (["transcribe", "--model", folder, bad_wav], 1, "bad.wav"),
        (["transcribe", "--model", plain_folder, "--timestamps", wav], 1, "no_timestamps_token_id"),
        (["transcribe", "--model", folder, "--bogus", wav], 2, "--bogus"),
    ]
    if text_model:
        cases.append((["transcribe", "--model", text_model, wav], 1, "not a Whisper model"))
    for args, code, key in cases:
        rc, _, err = run_vkformer(args)
        good = rc == code and one_line(err) and key in err[0]
        check(good, "transcribe misuse (%s) exits %d naming %r" % (" ".join(args[3:]), code, key),
              "" if good else "exit %d: %s" % (rc, " | ".join(err)))


def check_malformed(tmp):
    for kind, (what, keys) in sorted(gen_whisper.MALFORMED.items()):
        folder = os.path.join(tmp, "bad-" + kind)
        gen_whisper.make_malformed(folder, kind)
        wav = os.path.join(tmp, "m.wav")
        sf.write(wav, tone(0.5), 16000)
        rc, _, err = run_vkformer(["forward", "--model", folder, "--audio", wav, "--tgt", "1", "--out",
                                   os.path.join(tmp, "x.npy")])
        good = rc == 1 and one_line(err) and any(k in err[0] for k in keys) and "\x1b" not in err[0]
        check(good, "malformed folder (%s) refused" % what, "" if good else "exit %d: %s" % (rc, err))


def main():
    global LIB
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    quick = "--quick" in sys.argv
    binding = "--no-device-binding" not in sys.argv and "--no-binding" not in sys.argv
    vkf_testlib.VKFORMER = args[0]
    LIB = None if "--no-binding" in sys.argv else args[1]
    if not binding:
        print("note: %s: the binding's device checks are left to the drivers that run in this process" % (
            "--no-binding (a sanitized library cannot be loaded into python3; only 16 kHz WAV clips, read "
            "by soundfile)" if LIB is None else "--no-device-binding"))
    vkf_testlib.VERBOSE = "-v" in sys.argv
    rng = np.random.default_rng(4)
    tmp = tempfile.mkdtemp(prefix="test-whisper-")
    try:
        folders = [("hub 80 mels", dict(layout="hub")),
                   ("save_pretrained 128 mels", dict(layout="save_pretrained", mels=128, seed=3))]
        if not quick:
            folders += [("hub F16 weights", dict(layout="hub", dtype="f16", seed=4)),
                        ("hub, no encoder positions", dict(layout="hub", positions=False, seed=5)),
                        ("hub, proj_out stored", dict(layout="hub", proj_out=True, seed=2)),
                        ("save_pretrained, untied proj_out", dict(layout="save_pretrained", untied=True, seed=6)),
                        ("hub, 3 layers, d 48, 2 heads", dict(layout="hub", d_model=48, heads=2, layers=3, ffn=80,
                                                               seed=7))]
        made = {}
        for label, kw in folders:
            folder = os.path.join(tmp, label.replace(" ", "_").replace(",", ""))
            made[label] = (folder, gen_whisper.make_folder(folder, **kw))
            check_folder(label, folder, made[label][1], tmp, rng, quick)
        folder, info = made["hub 80 mels"]
        check_json_and_attention(folder, info, tmp, rng, quick)
        check_bench_attention(folder)
        if binding:
            check_binding(folder, info, tmp, rng)
            check_binding(*made["save_pretrained 128 mels"], tmp, rng)
        demo = os.path.join(HERE, "..", "models", "demo.safetensors")
        check_misuse(folder, demo if os.path.exists(demo) else None, tmp)
        ts_folder = check_transcribe(tmp, quick, binding)
        check_transcribe_misuse(ts_folder, made["save_pretrained 128 mels"][0], demo if os.path.exists(demo) else None,
                                tmp)
        check_malformed(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (vkf_testlib.passed, vkf_testlib.failed))
    sys.exit(1 if vkf_testlib.failed else 0)


if __name__ == "__main__":
    main()
