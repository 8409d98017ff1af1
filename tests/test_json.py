#!/usr/bin/python3
"""Every --json of the vkformer tool against docs/json.md.

Runs each command that takes --json (tiny sizes: SwiftShader is slow) and checks
that stdout is JSON Lines (one object per line, nothing else) and that every line
is one of the records docs/json.md describes: exactly its keys (none missing,
none extra), each of its type. Also checks that without --json the output is
not JSON (human-readable stays the default).

usage: test_json.py /path/to/vkformer MODEL.safetensors [--no-tune]
(the Vulkan driver comes from VK_ICD_FILENAMES; exits 1 after printing every
mismatch)
"""
import json
import os
import subprocess
import sys
import tempfile

# ------------------------------------------------------------------ the schema (docs/json.md)


class Opt:
    """The type, or null."""

    def __init__(self, t):
        self.t = t


class MapOf:
    """An object whose keys are free (names), each value of the type."""

    def __init__(self, t):
        self.t = t


NUM = "number"  # int or float, never bool

COMMON = {"command": str, "device": str, "driver": str, "vkformer_version": str}

MATMUL_TILES = {"kernel": str, "workgroup": int, "bm": int, "bn": int, "bk": int, "tm": int, "tn": int}
ATTENTION_TILES = {"head_dim": int, "workgroup": int, "bq": int, "bk": int, "td": int, "tq": int, "lanes": int}
# a kernel choice (vkf_kernel_choice): what ran, its tiles, and where the choice came from
CHOICE = {"kernel": str, "tiles": [int], "source": str, "table_entry": Opt(str)}

DEVICE = {
    "index": int, "name": str, "type": str, "default": bool, "vendor_id": int, "device_id": int,
    "api_version": str, "driver_version": int, "driver_name": str, "driver_info": str,
    "subgroup_size": int, "subgroup_shuffle": bool, "max_shared_memory": int, "max_workgroup_invocations": int,
    "max_workgroup_size": [int], "max_workgroup_count": [int], "max_push_constants": int,
    "storage_16bit": bool, "float16": bool, "int8": bool, "cooperative_matrix": bool, "timestamps": bool,
    "timestamp_period_ns": NUM, "max_storage_buffer_range": int, "max_memory_allocation_size": int,
    "unified_memory": bool, "heaps": [{"size": int, "device_local": bool}],
    "coopmat_shapes": [{"m": int, "n": int, "k": int, "a": str, "b": str, "c": str, "result": str,
                        "saturating": bool, "scope": str}],
    "cooperative_matrix2": bool, "coopmat2_granularity": [int], "coopmat2_max_dimension": int,
}

TIMING = {"sources": int, "tokens": int, "steps": int, "total_ms": Opt(NUM), "first_token_ms": Opt(NUM),
          "tokens_per_s": Opt(NUM), "plan_bytes": int}
ATTENTION_USED = Opt({"encoder": str, "decoder": str, "cross": str, "decode_self": str, "decode_cross": str,
                      "kernel": str})
DECODE = {"index": int, "src": [int], "ids": [int], "decoding": str, "beams": int, "max_new": int,
          "attention": str, "cross_attention": str, "attention_used": ATTENTION_USED, "activations": str,
          "timing": TIMING}

OPS = MapOf({"ms": NUM, "dispatches": int})
STARTUP_KIND = {"total_ms": NUM, "context_ms": NUM, "load_ms": NUM, "first_forward_ms": NUM, "destroy_ms": NUM}

# (command, record or None): the record's own keys, beside COMMON
RECORDS = {
    ("info", None): {"default": int, "devices": [DEVICE],
                     "tuning": {"source": str, "file": Opt(str), "matmul": MATMUL_TILES,
                                "attention": Opt(ATTENTION_TILES)},
                     "coopmat_in_use": bool, "coopmat2_in_use": bool},
    ("tune", None): {"tune_file": str, "matmul": MATMUL_TILES, "attention": ATTENTION_TILES},
    ("bench matmul", None): dict(CHOICE, bench=str, m=int, n=int, k=int, dtype=str, ms=NUM, gflops=NUM, gbps=NUM, repeat=int,
                                 max_rel_err=Opt(NUM)),
    ("bench shaders", None): {"bench": str, "preset": str, "pipeline": str, "spec": [int], "first_use": str,
                              "vgpu": Opt(str), "compile_only": bool, "statistics": bool, "registers": Opt(int),
                              "scalar_registers": Opt(int), "spills": Opt(int), "shared_bytes": Opt(int),
                              "scratch_bytes": Opt(int), "waves": Opt(int), "waves_floor": Opt(int),
                              "instructions": Opt(int), "cycles": Opt(int), "code_bytes": Opt(int),
                              "matrix_instructions": Opt(int), "subgroup_size": Opt(int),
                              "flops_per_byte": Opt(NUM), "driver_statistics": MapOf(NUM)},
    ("bench model", None): {"bench": str, "preset": str, "batch": int, "src_len": int, "tgt_len": int,
                            "forward_ms": NUM, "encode_ms": NUM, "step_ms": NUM, "peak_bytes": int,
                            "model_bytes": int, "forward_ops": OPS, "step_ops": OPS,
                            "choices": {"forward_matmul": dict(CHOICE, m=int, n=int, k=int),
                                        "step_matmul": dict(CHOICE, m=int, n=int, k=int),
                                        "attention": Opt(dict(CHOICE, head_dim=int)),
                                        "decode": dict(CHOICE, what=str)},
                            "greedy": {"step_ms": NUM, "tokens_per_s": NUM, "first_token_ms": NUM, "bytes": int},
                            "beam4": {"encode_ms": NUM, "step_ms": NUM, "tokens_per_s": NUM,
                                      "first_token_ms": NUM, "bytes": int}},
    ("bench startup", None): {"bench": str, "model": str, "repeat": int, "pipeline_cache_bytes": int,
                              "off": STARTUP_KIND, "cold": STARTUP_KIND, "warm": STARTUP_KIND},
    ("bench translate", None): {"bench": str, "model": str, "d_model": int, "layers": [int], "vocab": int,
                                "batch": int, "beams": int, "src_len": int, "max_new": int, "min_new": int,
                                "steps": int, "tokens_returned": int, "runs_ms": [NUM], "median_ms": NUM,
                                "target_tokens_per_s": NUM, "activations": str, "model_bytes": int,
                                "peak_device_bytes": int},
    ("bench attention", "case"): {"bench": str, "record": str, "variant": str, "n": int, "heads": int,
                                  "head_dim": int, "batch": int, "precision": str, "kernel": Opt(str),
                                  "choice": Opt(dict(CHOICE, what=str)),
                                  "ms": Opt(NUM), "bytes": Opt(int), "max_abs_err": Opt(NUM),
                                  "cos_sim": Opt(NUM), "skipped": Opt(str)},
    ("bench attention", "agreement"): {"bench": str, "record": str, "variant": str, "model": str, "sources": int,
                                       "text": bool, "teacher_forced": bool, "greedy_agreement": Opt(NUM),
                                       "skipped": Opt(str)},
    ("forward", None): {"src": [int], "tgt": [int], "argmax": [int], "out": Opt(str), "shape": [int],
                        "forward_ms": NUM, "attention": str, "cross_attention": str,
                        "attention_used": ATTENTION_USED, "activations": str},
    ("generate", None): dict(DECODE, sequence=[int], hypotheses=[{"ids": [int], "score": Opt(NUM)}]),
    ("translate", None): dict(DECODE, text=str, translation=str, expected=Opt(str), match=Opt(bool),
                              hypotheses=[{"ids": [int], "text": str, "score": Opt(NUM)}]),
    ("translate", "error"): {"record": str, "index": int, "text": str, "error": str},
    ("score", None): {"index": int, "src": [int], "tgt": [int], "logprobs": [NUM], "sum": NUM, "normalized": NUM,
                      "length": int},
    ("score", "error"): {"record": str, "index": int, "error": str},
}


def check(value, spec, where, errors):
    """Appends to errors every way value departs from spec."""
    if isinstance(spec, Opt):
        if value is not None:
            check(value, spec.t, where, errors)
    elif spec is NUM:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            errors.append("%s: %r is not a number" % (where, value))
    elif spec is int:
        if isinstance(value, bool) or not isinstance(value, int):
            errors.append("%s: %r is not an integer" % (where, value))
    elif spec in (str, bool):
        if not isinstance(value, spec):
            errors.append("%s: %r is not a %s" % (where, value, spec.__name__))
    elif isinstance(spec, list):
        if not isinstance(value, list):
            errors.append("%s: %r is not a list" % (where, value))
        else:
            for i, v in enumerate(value):
                check(v, spec[0], "%s[%d]" % (where, i), errors)
    elif isinstance(spec, MapOf):
        if not isinstance(value, dict):
            errors.append("%s: %r is not an object" % (where, value))
        else:
            for k, v in value.items():
                check(v, spec.t, "%s.%s" % (where, k), errors)
    elif isinstance(spec, dict):
        if not isinstance(value, dict):
            errors.append("%s: %r is not an object" % (where, value))
            return
        for k in spec.keys() - value.keys():
            errors.append("%s: key %r missing" % (where, k))
        for k in value.keys() - spec.keys():
            errors.append("%s: key %r not in docs/json.md" % (where, k))
        for k in spec.keys() & value.keys():
            check(value[k], spec[k], "%s.%s" % (where, k), errors)
    else:
        raise AssertionError("bad spec %r" % (spec,))


def validate(line, where):
    """The errors of one line of output, and the record (or None)."""
    try:
        r = json.loads(line)
    except ValueError as e:
        return ["%s: not JSON (%s): %.200s" % (where, e, line)], None
    if not isinstance(r, dict):
        return ["%s: not an object: %.200s" % (where, line)], None
    key = (r.get("command"), r.get("record"))
    if key not in RECORDS:
        return ["%s: no record (command, record) = %r in docs/json.md" % (where, key)], r
    errors = []
    check(r, dict(COMMON, **RECORDS[key]), where, errors)
    if not errors:
        if not r["device"] or not r["driver"] or not r["vkformer_version"]:
            errors.append("%s: empty device, driver or vkformer_version" % where)
        if "bench" in r and "bench " + r["bench"] != r["command"]:
            errors.append("%s: bench %r under command %r" % (where, r["bench"], r["command"]))
    return errors, r


# ------------------------------------------------------------------ the runs

def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 2:
        print(__doc__.strip().splitlines()[-3], file=sys.stderr)
        return 2
    vk, model = args
    tune = "--no-tune" not in sys.argv
    tmp = tempfile.mkdtemp(prefix="test_json.")
    failures = []

    def run(argv, stdin=None, rc=0):
        """stdout of vkformer argv (str: stdin given as str; bytes: stdout strictly
        decoded as UTF-8)."""
        text = not isinstance(stdin, bytes)
        p = subprocess.run([vk] + argv, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=text)
        if not text:
            try:
                p.stdout, p.stderr = p.stdout.decode("utf-8"), p.stderr.decode("utf-8", "replace")
            except UnicodeDecodeError as e:
                failures.append("vkformer %s: stdout is not UTF-8: %s" % (" ".join(argv), e))
                return None
        if p.returncode != rc:
            failures.append("vkformer %s: exit %d: %s" % (" ".join(argv), p.returncode, p.stderr.strip()[-400:]))
            return None
        return p.stdout

    def records(argv, expect, stdin=None, rc=0):
        """Runs argv (with --json); every line valid; expect: (command, record) of each line, in order."""
        out = run(argv + ["--json"], stdin, rc)
        if out is None:
            return []
        lines = out.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        else:
            failures.append("vkformer %s --json: the output does not end with a newline" % " ".join(argv))
        if len(lines) != len(expect):
            failures.append("vkformer %s --json: %d lines, expected %d:\n    %s" % (" ".join(argv), len(lines),
                                                                               len(expect), "\n    ".join(lines)))
        got = []
        for i, line in enumerate(lines):
            errors, r = validate(line, "vkformer %s --json, line %d" % (" ".join(argv), i + 1))
            failures.extend(errors)
            if r is not None:
                got.append(r)
                if i < len(expect) and (r.get("command"), r.get("record")) != expect[i]:
                    failures.append("vkformer %s --json, line %d: %r, expected %r" % (
                        " ".join(argv), i + 1, (r.get("command"), r.get("record")), expect[i]))
        return got

    info = records(["info"], [("info", None)])
    name = info[0]["device"] if info else None
    if info and info[0]["devices"][info[0]["default"]]["name"] != name:
        failures.append("info --json: \"device\" is not the default device's name")
    if tune:
        records(["tune", "--quick", "--out", os.path.join(tmp, "tune.json")], [("tune", None)])
    records(["bench", "matmul", "--size", "8,16", "--repeat", "1"], [("bench matmul", None)] * 2)
    records(["bench", "model", "--preset", "small", "--batch", "1", "--src-len", "3", "--tgt-len", "2",
             "--repeat", "1"], [("bench model", None)])
    records(["bench", "startup", "--preset", "small", "--repeat", "1"], [("bench startup", None)])
    records(["bench", "translate", "--model", model, "--batch", "2", "--src-len", "3", "--max-new", "2",
             "--repeat", "1"], [("bench translate", None)])
    att = records(["bench", "attention", "--n", "8,16", "--variants", "dense,local:2,lsh:1:4", "--heads", "1",
                   "--head-dim", "4", "--repeat", "1", "--model", model],
                  [("bench attention", "case")] * 6 + [("bench attention", "agreement")] * 3)
    # bench shaders: one record per pipeline built (how many depends on the driver's rules)
    shaders = run(["bench", "shaders", "--preset", "base", "--batch", "2", "--src-len", "8", "--tgt-len", "4",
                   "--json"], None, 0) or ""
    for i, line in enumerate(shaders.splitlines()):
        errors, r = validate(line, "vkformer bench shaders --json, line %d" % (i + 1))
        failures.extend(errors)
    if not shaders.strip():
        failures.append("vkformer bench shaders --json: no record")
    # the default batch (8) of Whisper-small's 1500 frames passes one binding on
    # lavapipe 22.3 (128 MiB): bench shaders halves it there instead of failing
    whisper = run(["bench", "shaders", "--preset", "whisper-small", "--tgt-len", "4", "--json"], None, 0) or ""
    for i, line in enumerate(whisper.splitlines()):
        failures.extend(validate(line, "vkformer bench shaders --preset whisper-small --json, line %d" % (i + 1))[0])
    if not whisper.strip():
        failures.append("vkformer bench shaders --preset whisper-small --json: no record")
    for r in att:
        if r.get("record") == "case" and (r["ms"] is None) != (r["skipped"] is not None):
            failures.append("bench attention: \"skipped\" is not null exactly when \"ms\" is: %r" % r)
    fwd = records(["forward", "--model", model, "--src", "5,6,7", "--tgt", "1,8", "--out",
                   os.path.join(tmp, "l.npy")], [("forward", None)])
    if fwd and (fwd[0]["src"] != [5, 6, 7] or fwd[0]["tgt"] != [1, 8] or len(fwd[0]["argmax"]) != 2):
        failures.append("forward --json: ids %r" % fwd[0])
    loc = records(["forward", "--model", model, "--src", "5", "--tgt", "1", "--attention", "local:2"],
                  [("forward", None)])
    want = {"encoder": "local:2", "decoder": "local:2", "cross": "dense", "decode_self": "local:2",
            "decode_cross": "dense"}
    if loc and any(loc[0]["attention_used"][k] != v for k, v in want.items()):
        failures.append("forward --attention local:2 --json: attention_used %r" % loc[0]["attention_used"])
    # where a variant does not apply, attention_used names what runs instead
    for asked, used in ((["--attention", "lowrank:4", "--cross-attention", "dense-naive"],
                         {"encoder": "lowrank:4", "decoder": "dense", "cross": "dense-naive", "decode_self": "dense",
                          "decode_cross": "dense"}),
                        (["--attention", "lsh:1:4", "--cross-attention", "lowrank:3"],
                         {"encoder": "lsh:1:4", "decoder": "lsh:1:4", "cross": "lowrank:3", "decode_self": "dense",
                          "decode_cross": "lowrank:3"})):
        g = records(["generate", "--model", model, "--src", "5,6", "--max-new", "2", "--precision", "f32"] + asked,
                    [("generate", None)])
        if g and (g[0]["attention_used"] is None or
                  any(g[0]["attention_used"][k] != v for k, v in used.items()) or
                  g[0]["attention_used"]["kernel"] not in ("fused", "fused-coopmat")):
            failures.append("generate %s --json: attention_used %r, expected %r" % (" ".join(asked),
                            g and g[0]["attention_used"], used))
    gen = records(["generate", "--model", model, "--src", "5,6", "--src", "7", "--max-new", "4"],
                  [("generate", None)] * 2)
    plain = run(["generate", "--model", model, "--src", "5,6", "--src", "7", "--max-new", "4"])
    if gen and plain is not None and [",".join(map(str, r["ids"])) for r in gen] != plain.split("\n")[:2]:
        failures.append("generate --json ids %r differ from the text output %r" % ([r["ids"] for r in gen], plain))
    if gen and (gen[0]["src"][-1] != 2 or gen[0]["index"] != 0 or gen[1]["index"] != 1):
        failures.append("generate --json: src or index %r" % gen)
    beam = records(["generate", "--model", model, "--src", "5,6", "--beam", "2", "--n-best", "2", "--max-new", "4"],
                   [("generate", None)])
    if beam and (len(beam[0]["hypotheses"]) != 2 or beam[0]["decoding"] != "beam" or beam[0]["beams"] != 2 or
                 beam[0]["hypotheses"][0]["score"] is None):
        failures.append("generate --beam 2 --n-best 2 --json: %r" % beam[0])
    records(["generate", "--model", model, "-", "--temperature", "0.8", "--seed", "3", "--max-new", "3",
             "--cross-attention", "lowrank:4"], [("generate", None)] * 2, stdin="5,6\n7,8\n")
    tr = records(["translate", "--model", model, "forty two"], [("translate", None)])
    plain = run(["translate", "--model", model, "forty two"])
    if tr and plain is not None:
        try:
            if isinstance(json.loads(plain), dict):
                failures.append("translate without --json printed a JSON record: %r" % plain)
        except ValueError:
            pass
        if tr[0]["translation"] != plain.strip() or tr[0]["text"] != "forty two":
            failures.append("translate --json: %r, the text output %r" % (tr[0], plain))
    tsv = "forty two\t42\nseven\t8\nthree\n"
    trf = records(["translate", "--model", model, "--input", "-", "--batch", "2"], [("translate", None)] * 3,
                  stdin=tsv)
    if len(trf) == 3:
        if [r["index"] for r in trf] != [0, 1, 2] or [r["expected"] for r in trf] != ["42", "8", None]:
            failures.append("translate --input --json: index or expected %r" % trf)
        if trf[2]["match"] is not None or trf[0]["match"] is not (trf[0]["translation"] == "42"):
            failures.append("translate --input --json: match %r" % trf)
        if trf[0]["timing"]["sources"] != 2 or trf[2]["timing"]["sources"] != 1:
            failures.append("translate --input --batch 2 --json: timing.sources %r" % [r["timing"] for r in trf])

    # lines that do not translate: an error record in their place; a blank line: a
    # record of nothing; bytes that are not UTF-8 come back as U+FFFD, control
    # characters escaped (the output is valid UTF-8 JSON whatever the input held)
    bad = b"forty two\nse\xffven \x1b[2J\x00\n\nzillion\nseven\n"
    trb = records(["translate", "--model", model, "-"], [("translate", None), ("translate", "error"),
                                                         ("translate", None), ("translate", "error"),
                                                         ("translate", None)], stdin=bad, rc=1)
    if len(trb) == 5:
        if trb[1]["text"] != "se\ufffdven \x1b[2J\x00" or not trb[1]["error"].startswith("line 2: invalid UTF-8"):
            failures.append("translate --json, invalid UTF-8: %r" % trb[1])
        if trb[2]["text"] != "" or trb[2]["translation"] != "" or trb[2]["src"] or trb[2]["hypotheses"]:
            failures.append("translate --json, a blank line: %r" % trb[2])
        if [r["index"] for r in trb] != [0, 1, 2, 3, 4] or trb[4]["translation"] != "7":
            failures.append("translate --json around failed lines: %r" % trb)

    # sorted batches: records in input order, a failed line's error record in its place
    trs = records(["translate", "--model", model, "-", "--max-batch-tokens", "6"],
                  [("translate", None), ("translate", "error"), ("translate", None), ("translate", "error"),
                   ("translate", None)], stdin=bad, rc=1)
    if len(trs) == 5 and [r.get("translation") for r in trs] != [r.get("translation") for r in trb]:
        failures.append("translate --json --max-batch-tokens differs from input-order batches: %r" % trs)

    # score: one record per pair, an error record for a line that cannot be scored
    sc = records(["score", "--model", model, "--src", "forty two", "--tgt", "42"], [("score", None)])
    if len(sc) == 1 and (sc[0]["length"] != 3 or len(sc[0]["logprobs"]) != 3 or
                         abs(sum(sc[0]["logprobs"]) - sc[0]["sum"]) > 1e-4 or
                         abs(sc[0]["sum"] / 3 - sc[0]["normalized"]) > 1e-4):
        failures.append("score --json: %r" % sc[0])
    scf = records(["score", "--model", model, "--input", "-"], [("score", None), ("score", "error"), ("score", None)],
                  stdin=b"forty two\t42\nzillion\t4\nseven\t7\n", rc=1)
    if len(scf) == 3 and ([r["index"] for r in scf] != [0, 1, 2] or "zillion" not in scf[1]["error"]):
        failures.append("score --input --json: %r" % scf)

    # U+2028 and U+2029 are valid inside JSON strings, but JavaScript (before ES2019) and
    # line-splitting readers take them for line ends: docs/json.md promises them escaped as
    # \u2028 \u2029, so the raw bytes must never reach stdout (json.loads would accept them:
    # the check is on the bytes). Lines holding them: error records that echo the text.
    seps = "forty\u2028two\nse\u2029ven\n\u2028\u2029\n".encode("utf-8")
    p = subprocess.run([vk, "translate", "--model", model, "-", "--json"], input=seps, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    raw = p.stdout
    if p.returncode != 1:
        failures.append("translate --json of lines holding U+2028/U+2029: exit %d, expected 1: %s" % (
            p.returncode, p.stderr.decode("utf-8", "replace").strip()[-400:]))
    for cp, esc in ((b"\xe2\x80\xa8", b"\\u2028"), (b"\xe2\x80\xa9", b"\\u2029")):
        if cp in raw:
            failures.append("translate --json: stdout carries the raw bytes of %s, not the escape: %r" % (
                esc.decode(), raw[:300]))
        if esc not in raw:
            failures.append("translate --json: stdout lacks %s: %r" % (esc.decode(), raw[:300]))
    sep_lines = raw.split(b"\n")
    texts = []
    for line in sep_lines[:-1]:
        try:
            texts.append(json.loads(line.decode("utf-8")).get("text"))
        except ValueError as e:
            failures.append("translate --json with U+2028/U+2029: a line that is not JSON (%s): %r" % (e, line[:200]))
    if texts != ["forty\u2028two", "se\u2029ven", "\u2028\u2029"] or sep_lines[-1] != b"":
        failures.append("translate --json with U+2028/U+2029: texts %r, expected the three lines" % texts)

    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    print("%d failures" % len(failures), file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
