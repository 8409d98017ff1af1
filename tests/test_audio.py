#!/usr/bin/python3
"""Sound files through vkf_audio_read (the Python package's vkformer.read_audio), no device.

usage: test_audio.py LIBVKFORMER.so OUT_DIR

  - every format and subtype libsndfile writes here (python3-soundfile over the same libsndfile:
    WAV, W64, RF64, AIFF, AU, CAF, FLAC, Ogg Vorbis and Opus, MP3, ... in PCM 8..32, float, double,
    u-law, A-law, ADPCM, GSM, ...), mono at 16 kHz (8 kHz where the codec needs it): the samples read
    at the file's rate equal soundfile's float32 read of the same file (1e-6); the combinations
    libsndfile refuses to write are listed, not tested;
  - channels 1, 2, 3 and 6 (WAV, FLAC, Ogg Vorbis): the mean of the channels, as librosa's to_mono;
  - rates 8000, 11025, 22050, 32000, 44100, 48000 and 96000 Hz (WAV PCM_16, FLAC, Ogg Vorbis) read at
    16 kHz: a band-limited signal (tones below 7 kHz) matches its analytic value at the 16 kHz sample
    times within 2e-3 away from the ends (libsoxr, very high quality; lossy codecs within 3e-2), and
    the length is the file's duration at 16 kHz (+-1 sample); vkformer.resample against the same;
  - malformed files, each refused with VKF_ERROR_IO and one line naming the file and the problem:
    truncated WAV, FLAC, Ogg Vorbis and Opus, a header without data, 0 channels, 2000 channels, rate 0,
    rate 5 MHz, a huge declared length (FLAC STREAMINFO of 2^36 - 1 samples), an unknown codec tag,
    random bytes, an empty file, a directory, a missing file, NaN and inf samples, a name with a
    newline and ESC (quoted, escaped).
Prints "N passed, M failed"; exit 1 on any failure.
"""
import os
import struct
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import numpy as np  # noqa: E402
import soundfile as sf  # noqa: E402

import vkformer  # noqa: E402
from vkf_testlib import bad, ok  # noqa: E402
import vkf_testlib  # noqa: E402


def check(cond, what, detail=""):
    if cond:
        ok(what)
    else:
        bad(what, detail)

LIB, OUT = sys.argv[1], sys.argv[2]
# formats vkf_audio_read refuses: no signature tells them from junk (src/audio/audio_file.c)
NO_SIGNATURE = ("HTK", "MAT4", "SD2")
TONES = ((220.0, 0.3), (1250.0, 0.2), (3100.0, 0.1), (6900.0, 0.05))


def tones(rate, seconds, phase=0.0):
    t = np.arange(int(rate * seconds)) / rate
    return sum(a * np.sin(2 * np.pi * f * t + phase * (i + 1)) for i, (f, a) in enumerate(TONES))


def read(path, rate):
    return vkformer.read_audio(path, rate, library=LIB)


def check_formats():
    tested, refused, unsigned = 0, [], []
    x = tones(16000, 0.5).astype(np.float32)
    for fmt in sorted(sf.available_formats()):
        if fmt == "RAW":
            continue    # headerless: nothing in the file says what it holds
        for sub in sorted(sf.available_subtypes(fmt)):
            rate = 8000 if sub in ("GSM610", "G721_32", "G723_24", "G723_40", "VOX_ADPCM", "NMS_ADPCM_16",
                                   "NMS_ADPCM_24", "NMS_ADPCM_32") else 16000
            if not sf.check_format(fmt, sub):
                refused.append("%s/%s" % (fmt, sub))
                continue
            path = os.path.join(OUT, "fmt_%s_%s.%s" % (fmt, sub, fmt.lower()))
            y = x if rate == 16000 else tones(8000, 0.5).astype(np.float32)
            try:
                sf.write(path, y, rate, format=fmt, subtype=sub)
                want = sf.read(path, dtype="float32", always_2d=True)[0].mean(axis=1)
            except Exception as e:  # noqa: BLE001 (libsndfile's own refusals)
                refused.append("%s/%s (%s)" % (fmt, sub, str(e).splitlines()[0][:60]))
                continue
            label = "%s/%s at %d Hz" % (fmt, sub, rate)
            rate = sf.info(path).samplerate     # VOC rounds its rate; WVE (8 kHz) and XI (44.1 kHz) fix theirs
            try:
                got, file_rate = read(path, 0)
            except vkformer.VkformerError as e:
                if fmt in NO_SIGNATURE and "not a sound file vkformer reads" in str(e) and "\n" not in str(e):
                    ok(label + ": refused, as a format without a signature")
                    unsigned.append(fmt)
                else:
                    bad(label + " read", str(e))
                continue
            tested += 1
            if file_rate != rate or got.shape != want.shape:
                bad(label, "rate %d, %s samples; soundfile: %d, %s" % (file_rate, got.shape, rate, want.shape))
            elif np.abs(got - want).max() > 1e-6:
                bad(label, "worst |vkformer - soundfile| %.3g" % np.abs(got - want).max())
            else:
                ok(label)
    print("formats: %d format/subtype pairs read as soundfile reads them; refused as formats without a signature: "
          "%s; libsndfile writes none of: %s" % (tested, ", ".join(sorted(set(unsigned))),
                                                  ", ".join(refused) if refused else "(none refused)"))
    if tested < 20:
        bad("formats", "only %d pairs written" % tested)


def check_channels():
    for fmt, sub, ext in (("WAV", "PCM_16", "wav"), ("FLAC", "PCM_24", "flac"), ("OGG", "VORBIS", "ogg")):
        for ch in (1, 2, 3, 6):
            data = np.stack([tones(16000, 0.4, phase=c) * (0.3 + 0.1 * c) for c in range(ch)], axis=1)
            data = (data / max(1.0, np.abs(data).max() * 1.01)).astype(np.float32)
            path = os.path.join(OUT, "ch%d.%s" % (ch, ext))
            sf.write(path, data, 16000, format=fmt, subtype=sub)
            want = sf.read(path, dtype="float32", always_2d=True)[0].mean(axis=1)
            got, _ = read(path, 16000)
            err = np.abs(got - want).max() if got.shape == want.shape else float("inf")
            check(err <= 1e-6, "%s %d channels: the mean of the channels (worst %.3g)" % (ext, ch, err))


def check_rates():
    for fmt, sub, ext, tol in (("WAV", "PCM_16", "wav", 2e-3), ("FLAC", "PCM_16", "flac", 2e-3),
                               ("OGG", "VORBIS", "ogg", 3e-2)):
        for rate in (8000, 11025, 22050, 32000, 44100, 48000, 96000):
            if rate == 8000 and ext != "wav":
                continue
            seconds = 0.75
            y = tones(rate, seconds)
            if rate < 16000:     # keep below this rate's Nyquist: a band the file can hold
                y = sum(a * np.sin(2 * np.pi * f * np.arange(int(rate * seconds)) / rate) for f, a in TONES[:2])
            path = os.path.join(OUT, "rate%d.%s" % (rate, ext))
            sf.write(path, (y * 0.9).astype(np.float32), rate, format=fmt, subtype=sub)
            got, file_rate = read(path, 16000)
            n_want = len(y) * 16000 / rate
            t = np.arange(len(got)) / 16000.0
            parts = TONES if rate >= 16000 else TONES[:2]
            want = 0.9 * sum(a * np.sin(2 * np.pi * f * t) for f, a in parts)
            edge = 400
            err = np.abs(got[edge:-edge] - want[edge:-edge]).max() if len(got) > 2 * edge else float("inf")
            label = "%s at %d Hz read at 16 kHz" % (ext, rate)
            if abs(len(got) - n_want) > 1 or file_rate != rate:
                bad(label, "%d samples (%.1f expected), file rate %d" % (len(got), n_want, file_rate))
            elif err > tol:
                bad(label, "worst error against the analytic signal %.3g (bound %g)" % (err, tol))
            else:
                ok("%s: %d samples, worst error %.2g" % (label, len(got), err))
    y = tones(44100, 0.5).astype(np.float32)
    got = vkformer.resample(y, 44100, 16000, library=LIB)
    t = np.arange(len(got)) / 16000.0
    want = sum(a * np.sin(2 * np.pi * f * t) for f, a in TONES)
    err = np.abs(got[400:-400] - want[400:-400]).max()
    check(err < 2e-3 and abs(len(got) - 8000) <= 1, "resample 44100 -> 16000: %d samples, worst %.2g" % (
        len(got), err))
    same = vkformer.resample(y, 16000, 16000, library=LIB)
    check(np.array_equal(same, y), "resample at the same rate copies")
    for args, key in (((np.array([0.0, np.nan], np.float32), 16000, 8000), "not finite"),
                      ((y, 0, 16000), "rates"), ((y, 16000, 2000000), "rates")):
        try:
            vkformer.resample(*args, library=LIB)
            bad("resample refuses %s" % key, "it ran")
        except vkformer.VkformerError as e:
            check(key in str(e) and "\n" not in str(e), "resample refuses: %s" % e)


def wav_bytes(tag=1, ch=1, rate=16000, bits=16, data=b"\0" * 3200, datalen=None, cb=False):
    fmt = struct.pack("<HHIIHH", tag, ch, rate, rate * max(ch, 1) * bits // 8, max(ch, 1) * bits // 8, bits)
    if cb:
        fmt += struct.pack("<H", 0)
    dl = len(data) if datalen is None else datalen
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", dl) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def check_malformed():
    x = tones(16000, 1.0).astype(np.float32) * 0.5
    cases = []

    def write(name, data):
        path = os.path.join(OUT, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def encoded(fmt, sub, ext):
        path = os.path.join(OUT, "good." + ext)
        sf.write(path, x, 16000, format=fmt, subtype=sub)
        with open(path, "rb") as f:
            return f.read()

    wav = encoded("WAV", "PCM_16", "wav")
    flac = encoded("FLAC", "PCM_16", "flac")
    ogg = encoded("OGG", "VORBIS", "ogg")
    opus = encoded("OGG", "OPUS", "opus")
    cases += [(write("cut.wav", wav[:len(wav) // 2]), ["truncated"]),
              (write("header-only.wav", wav[:44]), ["truncated"]),
              (write("cut.flac", flac[:int(len(flac) * 0.9)]), ["truncated"]),
              (write("cut.ogg", ogg[:len(ogg) // 2]), ["truncated", "malformed"]),
              (write("cut90.ogg", ogg[:int(len(ogg) * 0.9)]), ["truncated"]),
              (write("cut.opus", opus[:int(len(opus) * 0.8)]), ["truncated", "malformed"])]
    # STREAMINFO's 36-bit total of samples set to 2^36 - 1: 1193 hours at 16 kHz
    huge = bytearray(flac)
    assert huge[:4] == b"fLaC"
    info = 8    # after "fLaC" and the block header
    word = int.from_bytes(huge[info + 10:info + 18], "big") | ((1 << 36) - 1)
    huge[info + 10:info + 18] = word.to_bytes(8, "big")
    cases.append((write("huge-length.flac", bytes(huge)), ["declares", "hours"]))
    cases += [(write("zero-channels.wav", wav_bytes(ch=0)), ["channel"]),
              (write("2000-channels.wav", wav_bytes(ch=2000, data=b"\0" * 16000)), ["channels"]),
              (write("rate0.wav", wav_bytes(rate=0)), ["audio", "rate"]),
              (write("rate5M.wav", wav_bytes(rate=5000000)), ["sample rate 5000000"]),
              (write("codec.wav", wav_bytes(tag=0x161, cb=True)), ["codec", "0x161"]),
              (write("random.bin", np.random.default_rng(7).integers(0, 256, 4000, dtype=np.uint8).tobytes()),
               ["not a sound file"]),
              (write("empty.wav", b""), ["empty"]),
              (write("nan.wav", wav_bytes(tag=3, bits=32, data=np.array([0.1, np.nan] * 50, "<f4").tobytes())),
               ["not finite", "frame 1"]),
              (write("inf.wav", wav_bytes(tag=3, bits=32, data=np.array([0.1, 0.2, np.inf] * 50, "<f4").tobytes())),
               ["not finite", "frame 2"]),
              (write("evil\nname\x1b[31m.wav", wav[:100]), ["\\n", "\\x1b", "truncated"]),
              (os.path.join(OUT, "missing.wav"), ["no such file"])]
    os.makedirs(os.path.join(OUT, "a-directory.wav"), exist_ok=True)
    cases.append((os.path.join(OUT, "a-directory.wav"), ["not a regular file"]))
    for path, keys in cases:
        label = "refused: %r" % os.path.basename(path)
        try:
            got, _ = read(path, 16000)
            bad(label, "read %d samples" % len(got))
            continue
        except vkformer.VkformerError as e:
            msg = str(e)
            problems = []
            if "\n" in msg or "\x1b" in msg or "\r" in msg:
                problems.append("not one printable line")
            if e.status_name != "VKF_ERROR_IO":
                problems.append("status %s" % e.status_name)
            if not any(k in msg for k in keys):
                problems.append("none of %s named" % keys)
            if os.path.basename(path).split("\n")[0] not in msg:
                problems.append("the file is not named")
            check(not problems, "%s: %s" % (label, msg), "; ".join(problems))


def main():
    vkf_testlib.VERBOSE = "-v" in sys.argv
    os.makedirs(OUT, exist_ok=True)
    check_formats()
    check_channels()
    check_rates()
    check_malformed()
    print("%d passed, %d failed" % (vkf_testlib.passed, vkf_testlib.failed))
    sys.exit(1 if vkf_testlib.failed else 0)


if __name__ == "__main__":
    main()
