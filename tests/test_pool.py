"""Device pools through the tool and the Python binding, on two Vulkan devices at
once (lavapipe and SwiftShader, both in VK_ICD_FILENAMES).

  cli:    `translate --input --devices 0,1` and `generate --devices all`, text and
          --json, the balanced dispatch and any-free (where both devices take
          work, and the failures below are certain to meet their batch): every
          line in input order; each record equal to the same batch
          run on the device that ran it alone (same --batch); the records' keys
          those of the one-device command; bad lines, blank lines and scored lines
          as the one-device command gives them. A device failing under a batch
          (VKFORMER_POOL_FAULT: device lost, out of device memory): exit 0, the
          same output, exactly one stderr line naming the device and the failure.
          Both failing: exit 1, nothing printed. --timing. Misuse: one line, exit 2
          (or 4 for a device that is not there).
  python: vkformer.Pool against vkformer.load on each device; a failing device;
          devices(), errors, close.
  transcribe (both modes, the Whisper demo folder models/whisper-numbers and its
          held-out clips): `transcribe --devices` and Pool.transcribe, each
          file's record (ids, segments, text) as the device that ran it gives it
          alone, in the files' order; a device failing under a file (the file runs
          on the other, one stderr line), both failing, an unreadable file among
          good ones, a Whisper pool refusing source ids and a text pool refusing
          audio.

Every run has the validation layer on (VKFORMER_VALIDATE=1: a message fails the run).
usage: test_pool.py cli VKFORMER MODEL TEXTS.tsv
       test_pool.py python LIBVKFORMER.so MODEL TEXTS.tsv
"""
import json
import os
import re
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vkf_testlib as T  # noqa: E402

BATCH = 5


def check(cond, what, detail=""):
    if cond:
        T.ok(what)
    else:
        T.bad(what, detail)
    return cond


def run(args, env=None, timeout=300):
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        return T.run_vkformer(args, timeout)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def records(out):
    return [json.loads(line) for line in out.splitlines()]


def test_cli(model, texts_path, tmp):
    with open(texts_path) as f:
        rows = [line.rstrip("\n") for line in f][:60]
    # a scored file with a blank line, a line the model cannot encode and a NUL byte among the good ones
    lines = rows[:20] + ["", "forty blorp"] + [r.split("\t")[0] for r in rows[20:40]] + ["seven\0two"] + rows[40:60]
    mixed = os.path.join(tmp, "mixed.txt")
    with open(mixed, "w") as f:
        f.write("\n".join(lines) + "\n")
    clean = os.path.join(tmp, "clean.txt")
    with open(clean, "w") as f:
        f.write("\n".join(r.split("\t")[0] for r in rows) + "\n")

    base = ["translate", "--model", model, "--batch", str(BATCH)]
    single = {}
    for dev in (0, 1):
        rc, out, err = run(base + ["--input", mixed, "--device", str(dev)])
        single[dev] = (rc, out, err)
        rc_j, out_j, _ = run(base + ["--input", mixed, "--device", str(dev), "--json"])
        single[dev, "json"] = records(out_j)
        check(rc == 1 and rc_j == 1, "device %d alone: exit 1 for the two bad lines" % dev, "%d %d" % (rc, rc_j))

    rc, out, err = run(base + ["--input", mixed, "--devices", "0,1"])
    check(rc == 1, "pool: exit 1 for the bad lines", "rc %d: %s" % (rc, err))
    want = single[0][1].splitlines()
    other = single[1][1].splitlines()
    got = out.splitlines()
    check(len(got) == len(want) and all(g in (a, b) for g, a, b in zip(got, want, other)),
          "pool: every line as one of the devices alone gives it, in input order",
          "\n".join("%d: %r vs %r / %r" % (i, g, a, b) for i, (g, a, b) in enumerate(zip(got, want, other))
                    if g not in (a, b))[:2000])
    if single[0][1] == single[1][1]:
        check(out == single[0][1], "pool: the output equals each device's alone (they agree here)")
    check(err == single[0][2], "pool: the same stderr lines as alone (the bad lines, the summary)",
          "%s\n---\n%s" % ("\n".join(err), "\n".join(single[0][2])))

    rc, out, err = run(base + ["--input", mixed, "--devices", "0,1", "--json", "--pool-dispatch", "any-free"])
    got = records(out)
    check(rc == 1 and [r["index"] for r in got] == list(range(len(lines))), "pool --json: one record per line, in order",
          "rc %d, indexes %s" % (rc, [r["index"] for r in got]))
    names = {r["device"] for r in single[0, "json"]} | {r["device"] for r in single[1, "json"]}
    by_name = {single[d, "json"][0]["device"]: d for d in (0, 1)}
    check(len(by_name) == 2, "the two devices have different names", str(names))
    devices_used = set()
    for r in got:
        dev = by_name.get(r["device"])
        if not check(dev is not None, "record %d names a device of the pool" % r["index"], r["device"]):
            continue
        devices_used.add(dev)
        alone = single[dev, "json"][r["index"]]
        check(set(r) == set(alone), "record %d has the keys of the one-device record" % r["index"],
              "%s vs %s" % (sorted(r), sorted(alone)))
        for key in ("text", "src", "ids", "translation", "expected", "match", "hypotheses", "error", "record"):
            check(r.get(key) == alone.get(key), "record %d: %s as on device %d alone" % (r["index"], key, dev),
                  "%r vs %r" % (r.get(key), alone.get(key)))
        if "timing" in r:
            check(1 <= r["timing"]["sources"] <= BATCH, "record %d: the timing of its batch" % r["index"])
    check(devices_used == {0, 1}, "both devices ran batches", str(devices_used))

    # a device failing under a batch: the job finishes on the other, one line says so
    for fault, slot, call_result in (("1:2:vkQueueSubmit:device-lost", 1, "VK_ERROR_DEVICE_LOST"),
                                     ("0:1:vkQueueSubmit:out-of-device-memory", 0, "VK_ERROR_OUT_OF_DEVICE_MEMORY")):
        rc, out, err = run(base + ["--input", clean, "--devices", "0,1", "--json", "--pool-dispatch", "any-free"],
                           {"VKFORMER_POOL_FAULT": fault})
        got = records(out) if rc == 0 else []
        check(rc == 0 and [r["index"] for r in got] == list(range(len(rows))),
              "fault %s: exit 0, every line in order" % fault, "rc %d: %s" % (rc, err))
        for r in got:
            dev = by_name[r["device"]]
            alone = single[dev, "json"]
            # the clean file's line i is the mixed file's line at the same text: compare ids by text
            want_ids = next((a["ids"] for a in alone if a.get("text") == r["text"]), None)
            check(want_ids == r["ids"], "fault %s: line %d as on device %d alone" % (fault, r["index"], dev),
                  "%r vs %r" % (r["ids"], want_ids))
        pattern = (r"^vkformer: device %d \(\".*\"\) left the pool after \d+ batch(es)?: vkQueueSubmit failed with %s "
                   r"\(-\d\); its batch went back to the queue, and the job finished on the other device$"
                   % (slot, call_result))
        check(len(err) == 1 and re.match(pattern, err[0]), "fault %s: one stderr line naming the device" % fault,
              "\n".join(err))
        ran = sum(1 for r in got if by_name[r["device"]] == slot)
        check(ran == (BATCH if slot == 1 else 0), "fault %s: the failed device's batches before it failed, no more"
              % fault, "%d lines" % ran)
    rc, out, err = run(base + ["--input", clean, "--devices", "0,1", "--pool-dispatch", "any-free"],
                       {"VKFORMER_POOL_FAULT": "0:1:vkQueueSubmit:device-lost,1:1:vkQueueSubmit:device-lost"})
    check(rc == 1 and out == "" and any("no device of the pool is left" in line for line in err),
          "both devices failing: exit 1, nothing printed, the reason on stderr", "rc %d: %r %s" % (rc, out, err))
    check(len(err) == 3, "both devices failing: the error and one line per device", "\n".join(err))

    # generate: ids, greedy and beam with n-best, in order, as each device alone
    srcs = ["5,6,7", "8", "9,10,11,12", "13,14", "15", "16,17,18", "19,20,21", "22", "4,33"]
    gen = ["generate", "--model", model] + [a for s in srcs for a in ("--src", s)]
    for extra in ([], ["--beam", "3", "--n-best", "2"]):
        alone = [run(gen + extra + ["--device", str(d), "--json"]) for d in (0, 1)]
        check(all(a[0] == 0 for a in alone), "generate %s alone on each device" % extra)
        # one batch alone vs batches of 2 in the pool: compare against the same batches alone
        rc, out, err = run(gen + extra + ["--devices", "all", "--batch", "2", "--json"])
        got = records(out) if rc == 0 else []
        check(rc == 0 and [r["index"] for r in got] == list(range(len(srcs))),
              "generate --devices all %s: every source in order" % extra, "rc %d: %s" % (rc, err))
        for r in got:
            k = r["index"] // 2
            batch = srcs[2 * k:2 * k + 2]
            dev = by_name[r["device"]]
            rc1, out1, _ = run(["generate", "--model", model, "--device", str(dev), "--json"] + extra +
                               [a for s in batch for a in ("--src", s)])
            want = records(out1)[r["index"] % 2] if rc1 == 0 else None
            check(want is not None and r["hypotheses"] == want["hypotheses"] and set(r) == set(want),
                  "generate %s: source %d as its batch on device %d alone" % (extra, r["index"], dev),
                  "%r vs %r" % (r["hypotheses"], want and want["hypotheses"]))
        rc, out, err = run(gen + extra + ["--devices", "all", "--batch", "2"])
        rct, outt, _ = run(gen + extra + ["--device", "1", "--batch", "2", "--devices", "1"])
        check(rct == 2, "generate: --device and --devices together are refused")
        lines = out.splitlines()
        check(rc == 0 and len(lines) == len(srcs) * (2 if extra else 1), "generate text: a line per hypothesis",
              "rc %d: %s" % (rc, out))

    rc, out, err = run(base + ["--input", clean, "--devices", "0,1", "--timing"])
    check(rc == 0 and len([e for e in err if e.startswith("timing: device ")]) == 2 and
          any(re.match(r"^timing: 60 sources in batches of 5 on 2 devices, \d+ tokens in [\d.]+ ms \(wall\)", e)
              for e in err), "--timing: the job's wall time and a line per device", "\n".join(err))

    # misuse: one line each
    for args, code, fragment in (
            (["translate", "--model", model, "two", "--devices", "0,1"], 2, "one TEXT runs on one device"),
            (["translate", "--model", model, "--input", clean, "--devices", "0,1", "--device", "0"], 2,
             "--device or --devices"),
            (["generate", "--model", model, "--src", "5", "--batch", "2"], 2, "--batch applies with --devices"),
            (["generate", "--model", model, "--src", "5", "--pool-dispatch", "any-free"], 2,
             "--pool-dispatch applies with --devices"),
            (["translate", "--model", model, "--input", clean, "--devices", "all", "--pool-dispatch", "fast"], 2,
             "balanced or any-free"),
            (["translate", "--model", model, "--input", clean, "--devices", "0,0"], 1, "named twice"),
            (["translate", "--model", model, "--input", clean, "--devices", "0,"], 1, "empty"),
            (["translate", "--model", model, "--input", clean, "--devices", "0,9"], 4, "device index 9"),
            (["translate", "--model", model, "--input", clean, "--devices", ""], 2, "--devices needs a value"),
            (["translate", "--model", os.path.join(tmp, "missing.safetensors"), "--input", clean, "--devices", "all"],
             1, "missing.safetensors"),
    ):
        rc, out, err = run(args)
        check(rc == code and len(err) == 1 and fragment in err[0] and out == "",
              "%s: exit %d, one line naming %r" % (" ".join(args[3:]), code, fragment), "rc %d: %s" % (rc, err))
    rc, out, err = run(base + ["--input", clean, "--devices", "0,1"], {"VKFORMER_POOL_FAULT": "0:1:vkFoo:device-lost"})
    check(rc == 1 and len(err) == 1 and "vkFoo" in err[0], "a bad VKFORMER_POOL_FAULT is one line", "\n".join(err))


HERE = os.path.dirname(os.path.abspath(__file__))
WHISPER = os.path.join(HERE, "..", "models", "whisper-numbers")
CLIPS_DIR = os.path.join(HERE, "data", "whisper_numbers")


def clips():
    names = sorted(f for f in os.listdir(CLIPS_DIR) if f.endswith(".wav"))
    # each clip twice, so that both devices take files
    return [os.path.join(CLIPS_DIR, f) for f in names + names]


def transcript_keys(r):
    return {k: r.get(k) for k in ("ids", "segments", "text", "language", "prompt", "windows")}


def test_transcribe_cli(model, tmp):
    files = clips()
    alone = {}
    for dev in (0, 1):
        rc, out, err = run(["transcribe", "--model", WHISPER, "--json", "--device", str(dev)] + files)
        check(rc == 0 and len(records(out)) == len(files), "transcribe on device %d alone" % dev,
              "rc %d: %s" % (rc, err))
        alone[dev] = records(out) if rc == 0 else [{}] * len(files)
    by_name = {alone[d][0].get("device"): d for d in (0, 1)}
    base = ["transcribe", "--model", WHISPER, "--json", "--devices", "0,1", "--pool-dispatch", "any-free"]
    rc, out, err = run(base + files)
    got = records(out) if rc == 0 else []
    check(rc == 0 and err == [] and [r["file"] for r in got] == files,
          "transcribe --devices: one record per file, in order", "rc %d: %s" % (rc, err))
    used = set()
    for i, r in enumerate(got):
        dev = by_name.get(r["device"])
        used.add(dev)
        check(dev is not None and transcript_keys(r) == transcript_keys(alone[dev][i]) and
              set(r) == set(alone[dev][i]), "transcribe --devices: file %d as on device %s alone" % (i, dev),
              "%r vs %r" % (transcript_keys(r), dev is not None and transcript_keys(alone[dev][i])))
    check(used == {0, 1}, "transcribe --devices: both devices took files", str(used))
    rc, out, err = run(["transcribe", "--model", WHISPER, "--devices", "all"] + files)
    rc1, out1, _ = run(["transcribe", "--model", WHISPER, "--device", "1"] + files)
    check(rc == 0 and rc1 == 0 and out == out1 and out.count(":\n") == len(files),
          "transcribe --devices all: the text output as one device's (the devices agree on these clips)",
          "%s\n---\n%s" % (out, out1))

    rc, out, err = run(base + files, {"VKFORMER_POOL_FAULT": "1:1:vkQueueSubmit:device-lost"})
    got = records(out) if rc == 0 else []
    check(rc == 0 and [r["file"] for r in got] == files and
          all(transcript_keys(r) == transcript_keys(alone[0][i]) for i, r in enumerate(got)) and
          all(by_name.get(r["device"]) == 0 for r in got),
          "transcribe, a device lost under its first file: every file on the other, in order", "rc %d: %s" % (rc, err))
    check(len(err) == 1 and re.match(r"^vkformer: device 1 \(\".*\"\) left the pool after 0 batches: vkQueueSubmit "
                                     r"failed with VK_ERROR_DEVICE_LOST \(-4\); its batch went back to the queue, and "
                                     r"the job finished on the other device$", err[0]),
          "transcribe, a device lost: one stderr line naming it", "\n".join(err))
    rc, out, err = run(base + files, {"VKFORMER_POOL_FAULT": "0:1:vkQueueSubmit:device-lost,1:1:vkQueueSubmit:device-lost"})
    check(rc == 1 and out == "" and len(err) == 3 and "no device of the pool is left" in err[0],
          "transcribe, both devices lost: exit 1, nothing printed, the error and a line per device",
          "rc %d: %r %s" % (rc, out, err))
    bad = os.path.join(tmp, "bad.wav")
    with open(bad, "wb") as f:
        f.write(b"RIFF\x00\x00junk")
    rc, out, err = run(base + [files[0], bad, files[1]])
    got = records(out)
    check(rc == 1 and [r["file"] for r in got] == [files[0], files[1]] and len(err) == 1 and "bad.wav" in err[0],
          "transcribe --devices: an unreadable file named on one line, the others transcribed", "rc %d: %s" % (rc, err))
    for args, code, fragment in (
            (["transcribe", "--model", model, "--devices", "0,1", files[0]], 1, "not a Whisper model"),
            (["transcribe", "--model", WHISPER, "--devices", "0,1", "--device", "0", files[0]], 2,
             "--device or --devices"),
            (["transcribe", "--model", WHISPER, "--devices", "0,1", "--language", "klingon", files[0], files[1]], 1,
             "unknown language"),
            (["generate", "--model", WHISPER, "--devices", "0,1", "--src", "5"], 1, "reads audio"),
    ):
        rc, out, err = run(args)
        check(rc == code and len(err) == 1 and fragment in err[0] and out == "",
              "%s: exit %d, one line naming %r" % (" ".join(args[3:]), code, fragment), "rc %d: %s" % (rc, err))


def test_transcribe_python(vkformer, lib, model):
    files = clips()
    alone = {}
    for dev in (0, 1):
        with vkformer.load(WHISPER, device=dev, library=lib, validation=True) as m:
            alone[dev] = [m.transcribe(f) for f in files]
    with vkformer.Pool(WHISPER, devices=[0, 1], library=lib, validation=True, dispatch="any-free") as pool:
        got = pool.transcribe(files)
        one = pool.transcribe(files[0])
        devs = pool.devices()
        check(len(got) == len(files) and all(g in (alone[0][i], alone[1][i]) for i, g in enumerate(got)),
              "Pool.transcribe: every recording as a device alone transcribes it, in order",
              "%s\n%s" % ([g["text"] for g in got], [a["text"] for a in alone[0]]))
        check(one in (alone[0][0], alone[1][0]), "Pool.transcribe of one recording: its dict")
        check(sum(d["sources"] for d in devs) == len(files) + 1 and all(d["batches"] > 0 for d in devs),
              "Pool.transcribe: both devices took recordings, one window each", str(devs))
        check(pool.validation_counts() == (0, 0), "Pool.transcribe: no validation message")
        try:
            pool.generate([[5, 6]])
            check(False, "a Whisper pool refuses source ids")
        except vkformer.VkformerError as e:
            check(e.status_name == "VKF_ERROR_STATE" and "reads audio" in str(e),
                  "a Whisper pool refuses source ids with VKF_ERROR_STATE", str(e))
        try:
            pool.transcribe(files[:1], language="klingon")
            check(False, "Pool.transcribe(language='klingon') raises")
        except vkformer.VkformerError as e:
            check(e.status_name == "VKF_ERROR_INVALID_ARGUMENT" and "klingon" in str(e),
                  "Pool.transcribe(language='klingon'): VKF_ERROR_INVALID_ARGUMENT naming it", str(e))
        check(all(d["active"] for d in pool.devices()), "a bad language leaves both devices in the pool")
    os.environ["VKFORMER_POOL_FAULT"] = "0:1:vkQueueSubmit:out-of-device-memory"
    try:
        with vkformer.Pool(WHISPER, devices="0,1", library=lib, validation=True, dispatch="any-free") as pool:
            got = pool.transcribe(files)
            devs = pool.devices()
    finally:
        del os.environ["VKFORMER_POOL_FAULT"]
    check(got == alone[1] and not devs[0]["active"] and devs[0]["failure"] == "VKF_ERROR_OUT_OF_DEVICE_MEMORY",
          "Pool.transcribe, a device out of memory under its first recording: all on the other, devices() says why",
          str(devs))
    with vkformer.Pool(model, devices="0,1", library=lib, validation=True) as pool:
        try:
            pool.transcribe(files[0])
            check(False, "a text pool refuses audio")
        except vkformer.VkformerError as e:
            check(e.status_name == "VKF_ERROR_STATE" and "does not read audio" in str(e),
                  "a text pool refuses audio with VKF_ERROR_STATE", str(e))


def test_python(lib, model, texts_path):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import vkformer
    with open(texts_path) as f:
        texts = [line.split("\t")[0] for line in f][:40]
    alone = {}
    for dev in (0, 1):
        with vkformer.load(model, device=dev, library=lib, validation=True) as m:
            alone[dev] = [t for k in range(0, len(texts), BATCH) for t in m.translate(texts[k:k + BATCH])]
    messages = []
    with vkformer.Pool(model, devices=[0, 1], library=lib, validation=True, batch_size=BATCH,
                       log=lambda level, message: messages.append(message)) as pool:
        got = pool.translate(texts)
        check(len(got) == len(texts) and all(g in (a, b) for g, a, b in zip(got, alone[0], alone[1])),
              "Pool.translate: every text as a device alone gives it, in order", str(got))
        if alone[0] == alone[1]:
            check(got == alone[0], "Pool.translate equals each device alone (they agree here)")
        devs = pool.devices()
        check([d["index"] for d in devs] == [0, 1] and all(d["active"] and d["failure"] is None for d in devs) and
              sum(d["sources"] for d in devs) == len(texts) and sum(d["batches"] for d in devs) == 8,
              "Pool.devices(): both active, the batches and sources add up", str(devs))
        ids = pool.generate([pool.encode(t) for t in texts[:7]], max_new=8, batch_size=2)
        with vkformer.load(model, device=1, library=lib, validation=True) as m:
            want = m.generate([m.encode(t) for t in texts[:7]], max_new=8)
        check(len(ids) == 7 and all(list(a) == list(b) for a, b in zip(ids, want)),
              "Pool.generate in input order (greedy ids as lavapipe's)")
        check(pool.config.max_len == 32 and pool.encode("two").tolist() == [6, 2] and pool.decode([6, 7]) == "34",
              "Pool: config and text as the model's")
        check(pool.validation_counts() == (0, 0) and not messages, "Pool: no validation message", str(messages))
    try:
        pool.translate("two")
        check(False, "a closed pool raises")
    except vkformer.VkformerError as e:
        check(e.status_name == "VKF_ERROR_STATE", "a closed pool raises VKF_ERROR_STATE", str(e))

    os.environ["VKFORMER_POOL_FAULT"] = "1:2:vkQueueSubmit:device-lost"
    try:
        with vkformer.Pool(model, devices="0,1", library=lib, validation=True, batch_size=BATCH) as pool:
            got = pool.translate(texts)
            devs = pool.devices()
    finally:
        del os.environ["VKFORMER_POOL_FAULT"]
    check(got == alone[0] or all(g in (a, b) for g, a, b in zip(got, alone[0], alone[1])),
          "a failing device: every text still translated, in order")
    check(not devs[1]["active"] and devs[1]["failure"] == "VKF_ERROR_DEVICE_LOST" and
          "vkQueueSubmit" in devs[1]["failure_message"] and devs[1]["batches"] == 1 and devs[0]["active"] and
          devs[0]["batches"] + devs[1]["batches"] == 8, "a failing device: devices() says which and why", str(devs))

    with vkformer.Pool(model, devices="all", library=lib, validation=True, batch_size=BATCH,
                       dispatch="any-free") as pool:
        got = pool.translate(texts)
        check(all(g in (a, b) for g, a, b in zip(got, alone[0], alone[1])) and len(got) == len(texts),
              "Pool(dispatch='any-free'): every text in order")
    try:
        vkformer.Pool(model, library=lib, dispatch="fastest")
        check(False, "Pool(dispatch='fastest') raises")
    except ValueError as e:
        check("balanced" in str(e), "Pool(dispatch='fastest') raises ValueError listing the choices", str(e))
    for devices, status, fragment in (("0,0", "VKF_ERROR_INVALID_ARGUMENT", "named twice"),
                                      ([0, 7], "VKF_ERROR_NO_DEVICE", "device index 7")):
        try:
            vkformer.Pool(model, devices=devices, library=lib)
            check(False, "Pool(devices=%r) raises" % (devices,))
        except vkformer.VkformerError as e:
            check(e.status_name == status and fragment in str(e), "Pool(devices=%r): %s naming %r" %
                  (devices, status, fragment), str(e))
    test_transcribe_python(vkformer, lib, model)


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ("cli", "python"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, program, model, texts = sys.argv[1:]
    if mode == "cli":
        T.VKFORMER = program
        with tempfile.TemporaryDirectory() as tmp:
            test_cli(model, texts, tmp)
            test_transcribe_cli(model, tmp)
    else:
        test_python(program, model, texts)
    print("%d passed, %d failed" % (T.passed, T.failed))
    return 1 if T.failed else 0


if __name__ == "__main__":
    sys.exit(main())
