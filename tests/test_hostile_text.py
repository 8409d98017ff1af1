#!/usr/bin/python3
"""Text nobody checked, through the vkformer tool: every case ends with a one-line
error or a correct result, never a signal, a hang, a split or cut line, a forged
line on stderr, or output that is not valid UTF-8 JSON.

Lines (one file: every case is a line of it, good and bad mixed):
  translate --input FILE (batches of 4), translate - (stdin) --json, and
  tokenize --input FILE each give exactly one line (one JSON record) per line of
  input, in order: the line's correct result, or an empty line (an error record)
  and exactly one line on stderr naming its line number (and, for NUL bytes and
  invalid UTF-8, the byte); then one summary line and exit status 1. A correct
  result is what the same command gives for the clean text the line stands for
  ("forty" + 1 MiB of spaces + "two" stands for "forty two"), so that nothing
  was split or cut.
Classes: NUL bytes; invalid UTF-8 (stray continuation bytes, overlongs,
  surrogates, past U+10FFFF, F5..FF, cut sequences); long lines (4 KiB, 64 KiB and
  1 MiB, around the old 4,096- and 65,536-byte buffers); line ends (CRLF, a lone
  CR, no final newline); empty and blank lines; control characters, C1 controls
  and bidi overrides in TEXT, --src and option values (one-line, escaped errors);
  id lists (generate, tokenize --decode) of any length against max_len.
Every stdout of --json is decoded as strict UTF-8 and parsed line by line with
json.loads; every stderr is decoded as strict UTF-8 and must hold no control
character (but the line ends), no DEL, no C1 control and no bidi override, and
only lines that start "vkformer: " (or "bench ": a benchmark's progress).

usage: test_hostile_text.py /path/to/vkformer MODEL.safetensors
(the Vulkan driver from VK_ICD_FILENAMES; exits 1 after printing every failure)
"""
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

TIMEOUT = 180  # seconds per run: a hang fails the case, it does not hang the suite

failures = []
counts = collections.Counter()  # cases per class
VK = MODEL = TMP = None


def fail(msg):
    failures.append(msg)


def run(argv, stdin=b"", label=None):
    """(rc, stdout bytes, stderr lines) of vkformer argv; a signal or a hang fails."""
    label = label or " ".join(a if len(a) < 60 else a[:57] + "..." for a in argv)
    try:
        p = subprocess.run([VK] + argv, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        fail("%s: no answer after %d s (a hang)" % (label, TIMEOUT))
        return None, b"", []
    if p.returncode < 0:
        fail("%s: killed by signal %d" % (label, -p.returncode))
    elif p.returncode not in (0, 1, 2):
        fail("%s: exit status %d (6: validation messages)" % (label, p.returncode))
    return p.returncode, p.stdout, stderr_lines(p.stderr, label)


FORBIDDEN = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff]")


def stderr_lines(raw, label):
    """stderr as lines, after checking it is printable one-line messages."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        fail("%s: stderr is not UTF-8 (%s): %r" % (label, e, raw[:200]))
        return []
    lines = [l for l in text.split("\n") if "WARNING: UNSUPPORTED" not in l]  # SwiftShader's own
    if lines and lines[-1] == "":
        lines.pop()
    for l in lines:
        m = FORBIDDEN.search(l)
        if m:
            fail("%s: stderr holds U+%04X: %r" % (label, ord(m.group()), l[:200]))
        if not l.startswith("vkformer: ") and not l.startswith("bench "):  # messages, a benchmark's progress
            fail("%s: a stderr line that is not a vkformer message: %r" % (label, l[:200]))
        if len(l) > 4096:
            fail("%s: a stderr line of %d characters" % (label, len(l)))
    return lines


def json_records(raw, label):
    """stdout of --json: strict UTF-8, one JSON object per line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        fail("%s: stdout is not UTF-8 (%s)" % (label, e))
        return []
    if text and not text.endswith("\n"):
        fail("%s: --json output does not end with a newline" % label)
    out = []
    for i, line in enumerate(text.split("\n")[:-1]):
        try:
            r = json.loads(line)
        except ValueError as e:
            fail("%s: line %d is not JSON (%s): %r" % (label, i + 1, e, line[:200]))
            continue
        if not isinstance(r, dict):
            fail("%s: line %d is not an object" % (label, i + 1))
            continue
        out.append(r)
    return out


def text_lines(raw, label):
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        fail("%s: stdout is not UTF-8 (%s)" % (label, e))
        return []
    lines = text.split("\n")
    if lines[-1] != "":
        fail("%s: stdout does not end with a newline" % label)
    return lines[:-1]


# ------------------------------------------------------------------ the lines

def line_cases():
    """(class, name, line bytes, clean text or None: an error, error substring)."""
    c = []
    ok = lambda cls, name, line, clean: c.append((cls, name, line, clean, None))
    bad = lambda cls, name, line, why: c.append((cls, name, line, None, why))
    # NUL bytes: never the part before it
    bad("nul", "NUL inside a word", b"for\x00ty two", "a NUL byte at byte 4")
    bad("nul", "NUL alone", b"\x00", "a NUL byte at byte 1")
    bad("nul", "NUL at the end", b"forty two\x00", "a NUL byte at byte 10")
    bad("nul", "NUL after the TAB", b"forty two\t4\x002", "a NUL byte at byte 12")
    # invalid UTF-8
    for name, seq in [("stray continuation 0x80", b"\x80"), ("stray continuation 0xbf", b"\xbf"),
                      ("overlong 2-byte /", b"\xc0\xaf"), ("overlong 2-byte C1", b"\xc1\xbf"),
                      ("overlong 3-byte", b"\xe0\x80\xaf"), ("overlong 4-byte", b"\xf0\x80\x80\xaf"),
                      ("surrogate U+D800", b"\xed\xa0\x80"), ("surrogate U+DFFF", b"\xed\xbf\xbf"),
                      ("past U+10FFFF", b"\xf4\x90\x80\x80"), ("F5 lead", b"\xf5\x80\x80\x80"),
                      ("FE", b"\xfe"), ("FF", b"\xff"), ("cut 3-byte at the end", b"\xe2\x82"),
                      ("cut 3-byte before a space", b"\xe2\x82 "), ("cut 4-byte", b"\xf0\x9f\x98"),
                      ("lone lead byte", b"\xc3")]:
        bad("utf8", name, b"forty " + seq + b" two", "invalid UTF-8 at byte 7")
    bad("utf8", "Latin-1 text", b"forty two caf\xe9", "invalid UTF-8 at byte 14")
    # well-formed but unusual UTF-8 passes the check; the model decides
    bad("utf8", "valid UTF-8 the model does not know", "forty \u20ac two".encode(), "not in the model")
    # long lines around the old buffers (4,096 in translate, 65,536 in id lines) and 1 MiB
    for size in (4095, 4096, 4097, 65535, 65536, 65537, 1 << 20):
        pad = size - len(b"forty") - len(b"two")
        ok("long", "forty + spaces + two, %d bytes" % size, b"forty" + b" " * pad + b"two", "forty two")
    for size in (4096, 65536, 1 << 20):
        bad("long", "%d bytes of one word" % size, b"x" * size, '"xxxxxxxx')
        words = b" ".join([b"one"] * (size // 4))
        bad("long", "%d bytes of words (too many tokens)" % size, words, "tokens")
    # line ends (the file's own end: see file_cases)
    ok("line ends", "CRLF", b"forty two\r", "forty two")
    ok("line ends", "CR inside a line (whitespace to the model)", b"forty\rtwo", "forty two")
    # empty and blank lines: an empty line out
    ok("empty", "empty line", b"", "")
    ok("empty", "spaces", b"   ", "")
    ok("empty", "spaces, VT and FF", b" \x0b \x0c ", "")
    # control characters inside a line: escaped in the message, never on the terminal
    bad("control", "ESC sequence", b"forty \x1b[2J two", "\\x1b[2J")
    bad("control", "BEL", b"forty\x07 two", "\\x07")
    bad("control", "forged message after a form feed", b"forty\x0cvkformer: all good", "not in the model")
    bad("control", "C1 CSI", "forty \u009b31m two".encode(), "\\u009b")
    bad("control", "bidi override", "forty \u202eowt".encode(), "\\u202e")
    bad("control", "DEL", b"forty \x7f two", "\\x7f")
    # good lines between them keep their places
    for text in ("forty two", "seven", "three hundred forty two", "nine"):
        ok("good", text, text.encode(), text)
    return c


def check_lines():
    cases = line_cases()
    for cls, *_ in cases:
        counts[cls] += 1
    # the file: good lines first, last and between the bad ones
    order = []
    good = [k for k in cases if k[0] == "good"]
    rest = [k for k in cases if k[0] != "good"]
    for i, k in enumerate(rest):
        if i % 7 == 0:
            order.append(good[(i // 7) % len(good)])
        order.append(k)
    order.append(good[0])
    path = os.path.join(TMP, "lines.txt")
    with open(path, "wb") as f:
        f.write(b"\n".join(k[2] for k in order) + b"\n")
    # the clean texts, once, for what a correct result is
    clean = sorted({k[3] for k in order if k[3]})
    cpath = os.path.join(TMP, "clean.txt")
    with open(cpath, "w") as f:
        f.write("".join(t + "\n" for t in clean))
    rc, out, err = run(["translate", "--model", MODEL, "--input", cpath])
    want_tr = dict(zip(clean, text_lines(out, "translate clean")))
    rc2, out2, _ = run(["tokenize", "--model", MODEL, "--input", cpath])
    want_tok = dict(zip(clean, text_lines(out2, "tokenize clean")))
    if rc != 0 or rc2 != 0 or len(want_tr) != len(clean) or len(want_tok) != len(clean):
        fail("the clean texts do not translate and tokenize: %r %r" % (err, want_tr))
        return
    want_tr[""] = want_tok[""] = ""

    # lines of too many tokens fail in translate (the model's positions) but tokenize in full (a
    # tokenizer has no length limit): one id per word, then eos
    rc3, out3, _ = run(["tokenize", "--model", MODEL, "one"])
    one = out3.decode().strip().split(",") if rc3 == 0 else None
    if not one or len(one) != 2:
        fail("tokenize \"one\": %r, expected one id and eos" % out3)
        return
    long_ids = {k[2]: ",".join([one[0]] * len(k[2].split(b" ")) + [one[1]]) for k in order if "too many tokens" in k[1]}

    def expect_lines(label, got, err, rc, want, full=None):
        full = full or {}
        bad_numbers = [i + 1 for i, k in enumerate(order) if k[3] is None and k[2] not in full]
        if rc != 1:
            fail("%s: exit status %s, expected 1 (some lines fail)" % (label, rc))
        if len(got) != len(order):
            fail("%s: %d lines out for %d lines in (a line split, cut or lost)" % (label, len(got), len(order)))
        for i, k in enumerate(order):
            g = got[i] if i < len(got) else None
            w = full[k[2]] if k[2] in full else "" if k[3] is None else want[k[3]]
            if g != w:
                fail("%s: line %d (%s: %s): %r, expected %r" % (label, i + 1, k[0], k[1], g if g is None else g[:80], w))
        named = {}
        for l in err:
            m = re.match(r"vkformer: \S+ line (\d+): (.*)$", l)
            if m:
                named.setdefault(int(m.group(1)), []).append(m.group(2))
            elif not re.match(r"vkformer: \d+ of \d+ lines of \S+ (were not translated|failed)", l):
                fail("%s: unexpected stderr line %r" % (label, l[:200]))
        for n in bad_numbers:
            k = order[n - 1]
            msgs = named.get(n, [])
            if len(msgs) != 1:
                fail("%s: line %d (%s: %s) named %d times on stderr, expected once" % (label, n, k[0], k[1], len(msgs)))
            elif k[4] not in msgs[0]:
                fail("%s: line %d (%s: %s): %r does not say %r" % (label, n, k[0], k[1], msgs[0][:200], k[4]))
        extra = sorted(set(named) - set(bad_numbers))
        if extra:
            fail("%s: stderr names good lines %s" % (label, extra))
        summaries = [l for l in err if re.match(r"vkformer: \d+ of \d+ lines", l)]
        if len(summaries) != 1 or not summaries[0].startswith("vkformer: %d of %d lines" % (len(bad_numbers), len(order))):
            fail("%s: summary %r, expected one line '%d of %d lines'" % (label, summaries, len(bad_numbers), len(order)))

    label = "translate --input lines.txt --batch 4"
    rc, out, err = run(["translate", "--model", MODEL, "--input", path, "--batch", "4"], label=label)
    expect_lines(label, text_lines(out, label), err, rc, want_tr)

    label = "tokenize --input lines.txt"
    rc, out, err = run(["tokenize", "--model", MODEL, "--input", path], label=label)
    expect_lines(label, text_lines(out, label), err, rc, want_tok, long_ids)

    label = "translate - --json (lines.txt on stdin)"
    with open(path, "rb") as f:
        data = f.read()
    rc, out, err = run(["translate", "--model", MODEL, "-", "--json", "--batch", "5"], stdin=data, label=label)
    recs = json_records(out, label)
    if rc != 1 or len(recs) != len(order):
        fail("%s: exit %s, %d records for %d lines" % (label, rc, len(recs), len(order)))
    for i, (k, r) in enumerate(zip(order, recs)):
        if r.get("index") != i:
            fail("%s: record %d has index %r" % (label, i, r.get("index")))
        if k[3] is None:
            if r.get("record") != "error" or not isinstance(r.get("error"), str) or k[4] not in r["error"] \
                    or not r["error"].startswith("line %d: " % (i + 1)):
                fail("%s: line %d (%s: %s): %r, expected an error record saying %r" % (label, i + 1, k[0], k[1],
                     {x: r.get(x) for x in ("record", "error")}, k[4]))
            # the text as read, invalid UTF-8 replaced by U+FFFD (NUL escaped), the TAB part kept
            want_text = k[2].decode("utf-8", "replace")
            if k[4] and "NUL" not in k[4] and "UTF-8" not in k[4]:
                want_text = want_text.split("\t")[0]
            if r.get("text") != want_text:
                fail("%s: line %d (%s): text %r, expected %r" % (label, i + 1, k[1], (r.get("text") or "")[:80],
                                                                 want_text[:80]))
        else:
            if "record" in r or r.get("translation") != want_tr[k[3]]:
                fail("%s: line %d (%s: %s): %r, expected translation %r" % (label, i + 1, k[0], k[1],
                     {x: r.get(x) for x in ("record", "translation", "error")}, want_tr[k[3]]))
    counts["json"] += len(recs)


# ------------------------------------------------------------------ whole files

def check_files():
    """Line ends and file edges: (name, bytes, the lines out)."""
    files = [("no final newline", b"forty two\nseven", ["42", "7"]),
             ("CRLF throughout", b"forty two\r\nseven\r\n", ["42", "7"]),
             ("CRLF, no final newline", b"forty two\r\nseven\r", ["42", "7"]),
             ("mixed LF and CRLF", b"forty two\nseven\r\nnine\n", ["42", "7", "9"]),
             ("blank lines only", b"\n\n \n", ["", "", ""]),
             ("blank lines between", b"forty two\n\n\nseven\n", ["42", "", "", "7"]),
             ("empty file", b"", []),
             ("one newline", b"\n", [""]),
             ("CRLF after a scored TAB field", b"seven\t7\r\n", ["7", "accuracy: 1 of 1 (100.00%) exact matches"])]
    for name, data, want in files:
        counts["files"] += 1
        for fmt in ("text", "json"):
            label = "translate - (%s, %s)" % (name, fmt)
            rc, out, err = run(["translate", "--model", MODEL, "-"] + (["--json"] if fmt == "json" else []),
                               stdin=data, label=label)
            got = text_lines(out, label) if fmt == "text" else [r.get("translation") for r in json_records(out, label)]
            if fmt == "json":
                want = [w for w in want if not w.startswith("accuracy: ")]
            if rc != 0 or got != want or err:
                fail("%s: exit %s, %r, expected %r; stderr %r" % (label, rc, got, want, err))
    # a directory as the input: one line, exit 1
    counts["files"] += 1
    rc, out, err = run(["translate", "--model", MODEL, "--input", TMP], label="translate --input DIRECTORY")
    if rc != 1 or len(err) != 1 or "cannot read" not in err[0] or out:
        fail("translate --input DIRECTORY: exit %s, stderr %r, stdout %r" % (rc, err, out[:100]))


# ------------------------------------------------------------------ arguments

def check_arguments():
    """TEXT, --src and option values: one line on stderr, escaped, or the result."""
    def one_error(cls, argv, substring, rc_want=None, json_too=False):
        counts[cls] += 1
        for extra in ([[], ["--json"]] if json_too else [[]]):
            label = " ".join(repr(a) if any(ord(ch) < 32 or ord(ch) > 126 for ch in a) else a
                             for a in argv + extra)[:160]
            rc, out, err = run(argv + extra, label=label)
            if rc not in ((1, 2) if rc_want is None else (rc_want,)) or len(err) != 1 or substring not in err[0] or out:
                fail("%s: exit %s, stderr %r (expected one line saying %r), stdout %r" % (label, rc, err, substring,
                                                                                           out[:100]))

    def result(cls, argv, want, json_key=None):
        counts[cls] += 1
        rc, out, err = run(argv)
        got = text_lines(out, " ".join(argv))
        if rc != 0 or got != want or err:
            fail("%s: exit %s, %r, expected %r; stderr %r" % (" ".join(map(repr, argv)), rc, got, want, err))
        if json_key:
            rc, out, err = run(argv + ["--json"])
            recs = json_records(out, " ".join(argv) + " --json")
            if rc != 0 or [r.get(json_key) for r in recs] != want:
                fail("%s --json: exit %s, %r" % (" ".join(map(repr, argv)), rc, recs[:2]))

    tr = ["translate", "--model", MODEL]
    one_error("utf8", tr + [b"forty \xff two".decode("utf-8", "surrogateescape")], "invalid UTF-8 at byte 7",
              rc_want=1, json_too=True)
    one_error("utf8", tr + [b"\xed\xa0\x80".decode("utf-8", "surrogateescape")], "invalid UTF-8 at byte 1", rc_want=1)
    one_error("control", tr + ["forty \x1b[31m two"], "\\x1b[31m", rc_want=1, json_too=True)
    one_error("control", tr + ["forty\nvkformer: translation done\n two"], "", rc_want=None)
    one_error("control", tr + ["forty \u009b2J two"], "\\u009b", rc_want=1)
    result("control", tr + ["forty two\r"], ["42"], json_key="translation")
    result("control", tr + ["\tforty\ttwo\t"], ["42"], json_key="translation")
    one_error("control", ["tokenize", "--model", MODEL, "forty \x07 two"], "\\x07", rc_want=1)
    one_error("control", ["generate", "--model", MODEL, "--src", "5,\x1b[2J"], "\\x1b[2J", rc_want=2)
    one_error("control", ["generate", "--model", MODEL, "--src", "5,6\nvkformer: ok"], "\\n", rc_want=2)
    one_error("control", ["generate", "--model", MODEL, "--src", "5,6", "--src", "7\r"], "--src 2", rc_want=2)
    one_error("control", tr + ["--precision", "f32\x1b]0;owned\x07", "two"], "\\x1b]0;owned\\x07", rc_want=2)
    one_error("control", tr + ["--attention", "local:2\x1b[2J", "two"], "\\x1b[2J", rc_want=2)
    one_error("control", tr + ["--attention", "lsh\n:2", "two"], "\\n", rc_want=2)
    one_error("control", tr + ["--max-new", "3\x1b[A", "two"], "\\x1b[A", rc_want=2)
    one_error("control", ["\x1b[2Jtranslate"], "\\x1b[2J", rc_want=2)
    one_error("control", tr + ["--no-such-\u202eoption", "two"], "\\u202e", rc_want=2)
    one_error("control", tr + ["forty", "tw\x1bo"], "\\x1b", rc_want=2)
    # id lists: any length, checked against max_len (with a clear error), never cut
    long_ids = ",".join(["5"] * 40000)  # 80 KB: past the old 64 KiB line buffer
    one_error("ids", ["generate", "--model", MODEL, "--src", long_ids], "more than the model's", rc_want=1,
              json_too=True)
    one_error("ids", ["generate", "--model", MODEL, "--src", "5," * 31 + "5"], "more than the model's", rc_want=1)
    counts["ids"] += 1
    rc, out, err = run(["generate", "--model", MODEL, "--src", "5," * 30 + "5", "--max-new", "2"])
    got = text_lines(out, "generate --src (31 ids)")
    if rc != 0 or err or len(got) != 1 or not re.match(r"^(\d+(,\d+)*)?$", got[0]):
        fail("generate --src of 31 ids (32 with eos: max_len): exit %s, %r, stderr %r" % (rc, got, err))
    gen_in = ["generate", "--model", MODEL, "-", "--max-new", "3"]
    for name, data, substring in [("64 KiB id line", (long_ids + "\n").encode(), "stdin line 1: 40001 ids"),
                                  ("NUL in an id line", b"5,6\n5,\x006\n", "stdin line 2: a NUL byte at byte 3"),
                                  ("invalid UTF-8 in an id line", b"\n5,6\n5,\xff\n", "stdin line 3: invalid UTF-8"),
                                  ("an id past the vocabulary", b"5,6\n99999999\n", "outside"),
                                  ("an id past int32", b"5,99999999999\n", "stdin line 1"),
                                  ("ESC in an id line", b"5,\x1b[2J\n", "\\x1b[2J")]:
        counts["ids"] += 1
        rc, out, err = run(gen_in, stdin=data, label="generate - (%s)" % name)
        if rc not in (1, 2) or len(err) != 1 or substring not in err[0] or out:
            fail("generate - (%s): exit %s, stderr %r (expected one line saying %r)" % (name, rc, err, substring))
    # the benchmarks' inputs: the same reader, the same one-line errors naming the line
    counts["ids"] += 1
    rc, out, err = run(["bench", "translate", "--model", MODEL, "--input", "-", "--max-new", "2", "--repeat", "1"],
                       stdin=b"5,6\r\n\n5,\x1b[2J\n", label="bench translate --input - (ESC on line 3)")
    if rc != 2 or len(err) != 1 or "stdin line 3" not in err[0] or "\\x1b[2J" not in err[0]:
        fail("bench translate --input - (ESC on line 3): exit %s, stderr %r" % (rc, err))
    counts["utf8"] += 1
    rc, out, err = run(["bench", "attention", "--model", MODEL, "--text", "-", "--n", "8", "--variants", "dense",
                        "--heads", "1", "--head-dim", "4", "--repeat", "1"], stdin=b"forty two\n\nse\xffven\n",
                       label="bench attention --text - (invalid UTF-8 on line 3)")
    err = [l for l in err if not l.startswith("bench ")]
    if rc != 1 or len(err) != 1 or "stdin line 3: invalid UTF-8 at byte 3" not in err[0]:
        fail("bench attention --text - (invalid UTF-8 on line 3): exit %s, stderr %r" % (rc, err))
    # id lines past the old 64 KiB buffer, whole: tokenize --decode gives one line each
    counts["ids"] += 1
    ids = ",".join(["7"] * 30000)  # 60 KB
    data = (ids + "\n" + ids + ",7,7,7\n").encode()
    rc, out, err = run(["tokenize", "--model", MODEL, "--decode", "-"], stdin=data, label="tokenize --decode - (long)")
    got = text_lines(out, "tokenize --decode")
    one = text_lines(run(["tokenize", "--model", MODEL, "--decode", "7"])[1], "tokenize --decode 7")
    if rc != 0 or err or len(got) != 2 or not one or got[0] != one[0] * 30000 or got[1] != one[0] * 30003:
        fail("tokenize --decode - of 60 KB id lines: exit %s, %d lines (%s), stderr %r" %
             (rc, len(got), [len(g) for g in got], err))
    # generate --input with blank lines, CRLF and a long line: the line numbers named are the file's
    counts["ids"] += 1
    data = b"5,6\r\n\n \n" + ("5," * 40).encode() + b"5\r\n"
    rc, out, err = run(gen_in, stdin=data, label="generate - (CRLF, blank, long)")
    if rc != 1 or len(err) != 1 or "stdin line 4: 42 ids with eos" not in err[0]:
        fail("generate - (CRLF, blank lines, then 41 ids on line 4): exit %s, stderr %r" % (rc, err))


def main():
    global VK, MODEL, TMP
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    VK, MODEL = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="test_hostile_text.") as TMP:
        check_lines()
        check_files()
        check_arguments()
    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    print("test_hostile_text: %d cases (%s), %d failures" % (
        sum(v for k, v in counts.items() if k != "json"),
        ", ".join("%s %d" % kv for kv in sorted(counts.items())), len(failures)),
        file=sys.stderr if failures else sys.stdout)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
