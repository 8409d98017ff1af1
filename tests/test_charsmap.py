#!/usr/bin/python3
"""Hostile SentencePiece models (issue "Untrusted model folders", part 1): the
precompiled charsmap of a model's normalizer_spec or denormalizer_spec, which
libsentencepiece walks without bounds checks (random bytes there segfault it in
Normalizer::NormalizePrefix), must be refused with one line, never a signal.

  1. The parser and lookup (tests/test_charsmap.c over src/tokenizers/charsmap.h) on a
     real nmt_nfkc charsmap (trained here with Debian's python3-sentencepiece)
     against a reference written here: every key enumerated, and for thousands of
     inputs the longest and the shortest key that prefixes them.
  2. Malformed charsmaps refused by the parser, each with one line naming the
     problem: random bytes (with and without a plausible header), truncated, an
     array size that is not whole units or past the end, a child offset past the
     end (and a children block that ends exactly one unit past it), a string offset past the end, an unterminated string, strings that are
     not UTF-8, a loop, walks meeting more than 32 keys (a hand-built chain; 32 is
     fine).
  3. The same charsmaps inside a model file, in normalizer_spec and in
     denormalizer_spec: tests/test_spm refuses the model (exit 1, one line on
     stderr naming the file and the charsmap, no signal), where Python's
     sentencepiece crashes on some of them (reported, not required).

usage: test_charsmap.py /path/to/test_charsmap /path/to/test_spm
Prints "N passed, M failed"; exits 1 on any failure.
"""
import io
import os
import random
import struct
import subprocess
import sys
import tempfile

import sentencepiece as spm

CORPUS = [
    "Hello world, this is a small test corpus.",
    "The quick brown fox jumps over the lazy dog.",
    "Der Bär läuft über die Straße und äßt Äpfel.",
    "Le café est très chaud, n'est-ce pas ?",
    "日本語のテキストです。東京は大きい都市です。",
    "full-width ＡＢＣ１２３ and ligature ﬁ, ① ㍻",
    "Numbers: 1234567890, dates 2024-01-31, prices 9,99 €.",
]

passed = 0
failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL: " + what, file=sys.stderr)
    return cond


# ------------------------------------------------------------------ protobuf

def read_varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7f) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def varint(v):
    out = bytearray()
    while True:
        c = v & 0x7f
        v >>= 7
        out.append(c | (0x80 if v else 0))
        if not v:
            return bytes(out)


def fields(b):
    """(field, wire, raw bytes of the whole field, payload) of a message."""
    i = 0
    out = []
    while i < len(b):
        start = i
        key, i = read_varint(b, i)
        f, w = key >> 3, key & 7
        if w == 0:
            _, i = read_varint(b, i)
            payload = None
        elif w == 1:
            i += 8
            payload = None
        elif w == 5:
            i += 4
            payload = None
        elif w == 2:
            n, i = read_varint(b, i)
            payload = b[i:i + n]
            i += n
        else:
            raise ValueError("wire type %d" % w)
        out.append((f, w, b[start:i], payload))
    return out


def field_bytes(f, payload):
    return varint(f << 3 | 2) + varint(len(payload)) + payload


def with_charsmap(model, blob, spec_field):
    """The model with the charsmap of spec_field (3 normalizer_spec, 5
    denormalizer_spec) replaced by blob (a spec is added when missing)."""
    out = bytearray()
    done = False
    for f, w, raw, payload in fields(model):
        if f == spec_field and w == 2:
            spec = b"".join(raw2 for f2, w2, raw2, _ in fields(payload) if not (f2 == 2 and w2 == 2))
            out += field_bytes(f, spec + field_bytes(2, blob))
            done = True
        else:
            out += raw
    if not done:
        out += field_bytes(spec_field, field_bytes(1, b"custom") + field_bytes(2, blob))
    return bytes(out)


def charsmap_of(model):
    for f, w, _, payload in fields(model):
        if f == 3 and w == 2:
            for f2, w2, _, p2 in fields(payload):
                if f2 == 2 and w2 == 2:
                    return p2
    raise ValueError("no charsmap")


# ------------------------------------------------------------------ reference

def units_of(blob):
    size = struct.unpack("<I", blob[:4])[0]
    return list(struct.unpack("<%dI" % (size // 4), blob[4:4 + size])), blob[4 + size:]


def offset(u):
    return (u >> 10) << ((u & (1 << 9)) >> 6)


def label(u):
    return u & ((1 << 31) | 0xff)


def has_leaf(u):
    return (u >> 8) & 1


def keys_of(blob):
    """Every key of a (valid) charsmap -> its normalized string (the walks form a
    DAG: darts-clone shares suffixes, so a node may be reached by several keys)."""
    units, strings = units_of(blob)
    keys = {}
    stack = [(0, b"")]
    while stack:
        node, key = stack.pop()
        base = node ^ offset(units[node])
        for c in range(256):
            ch = base ^ c
            u = units[ch]
            if label(u) != c:
                continue
            k = key + bytes([c])
            if has_leaf(u):
                v = units[ch ^ offset(u)] & 0x7fffffff
                keys[k] = strings[v:strings.index(b"\0", v)]
            stack.append((ch, k))
    return keys


def walk(units, key):
    """The unit a key ends at."""
    node = 0
    for c in key:
        node = node ^ offset(units[node]) ^ c
        assert label(units[node]) == c
    return node


def chain_blob(n):
    """A hand-built double array whose keys are "a", "aa", ... (n times "a"), each
    mapping to "x": node i at 256 * i + 0x61 (the root at 0), its children at base
    256 * (i + 1), where the unit at the base itself is the value of node i."""
    size = 256 * (n + 2)
    units = [0] * size
    for i in range(n + 1):
        units[256 * (i + 1)] = 1 << 31   # a value (string offset 0), never a child: bit 31 is in its label
    pos = 0
    for i in range(n + 1):
        base = 256 * (i + 1)
        units[pos] = (0x61 | 1 << 8 if i else 0) | (pos ^ base) << 10
        pos = base ^ 0x61
    return struct.pack("<I", size * 4) + struct.pack("<%dI" % size, *units) + b"x\0"


# ------------------------------------------------------------------ runs

def run(args, stdin=b""):
    p = subprocess.run(args, input=stdin, capture_output=True, timeout=120)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: test_charsmap.py /path/to/test_charsmap /path/to/test_spm")
    tool, test_spm = sys.argv[1], sys.argv[2]
    r = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        m = io.BytesIO()
        spm.SentencePieceTrainer.train(sentence_iterator=iter(CORPUS * 5), model_writer=m, model_type="unigram",
                                       vocab_size=120, normalization_rule_name="nmt_nfkc", hard_vocab_limit=False,
                                       minloglevel=2)
        model = m.getvalue()
        blob = charsmap_of(model)

        def write(name, data):
            path = os.path.join(tmp, name)
            with open(path, "wb") as f:
                f.write(data)
            return path

        # 1. lookups against the reference
        good = write("good.bin", blob)
        rc, out, err = run([tool, "check", good])
        check(rc == 0 and out.strip() == "ok", "the real nmt_nfkc charsmap is refused: %s %s" % (out, err))
        keys = keys_of(blob)
        maxlen = max(len(k) for k in keys)
        check(len(keys) > 1000, "only %d keys in nmt_nfkc" % len(keys))
        sample = r.sample(sorted(keys), 3000)
        inputs = []
        for k in sample:
            inputs += [k, k + bytes([r.randrange(256)]), k[:-1], k + r.choice(sample)]
        inputs += [bytes(r.randrange(256) for _ in range(r.randint(0, 8))) for _ in range(2000)]
        inputs += [b"", b"\0", b"a\0b", "ｚ\u0301".encode(), "①".encode()]
        rc, out, err = run([tool, "lookup", good], b"".join(x.hex().encode() + b"\n" for x in inputs))
        lines = out.splitlines()
        check(rc == 0 and len(lines) == len(inputs), "lookup run: rc %d, %d lines for %d inputs: %s" %
              (rc, len(lines), len(inputs), err))
        bad = 0
        for x, line in zip(inputs, lines):
            hits = [x[:n] for n in range(1, min(len(x), maxlen) + 1) if x[:n] in keys]
            longest = hits[-1] if hits else None
            upto_nul = x.split(b"\0")[0]
            short_hits = [h for h in hits if len(h) <= len(upto_nul)]
            shortest = short_hits[0] if short_hits else None
            want = "%d %s %d %s" % (len(longest) if longest else 0, (keys[longest].hex() or "-") if longest else "-",
                                    len(shortest) if shortest else 0,
                                    (keys[shortest].hex() or "-") if shortest else "-")
            if line != want:
                if bad < 3:
                    print("lookup of %s: expected %s, got %s" % (x.hex(), want, line), file=sys.stderr)
                bad += 1
        check(bad == 0, "%d of %d lookups differ from the reference" % (bad, len(inputs)))

        # 2. malformed charsmaps
        units, strings = units_of(blob)
        size = len(units) * 4

        def pack(us, strs, declared=None):
            return struct.pack("<I", declared if declared is not None else len(us) * 4) + \
                struct.pack("<%dI" % len(us), *us) + strs

        leaf = walk(units, min(keys, key=len))
        root_base = offset(units[0])
        child = next(root_base ^ c for c in range(1, 256) if label(units[root_base ^ c]) == c)
        c_of_child = child ^ root_base
        cases = [
            ("empty", b"", "too short"),
            ("three-bytes", b"\x01\x02\x03", "too short"),
            ("truncated", blob[:len(blob) // 2], "truncated"),
            ("size-past-end", struct.pack("<I", len(blob)) + blob[4:], "truncated"),
            ("size-not-units", pack(units, strings, size - 2), "whole number"),
            ("too-few-units", pack(units[:100], strings), "256"),
            ("strings-not-utf8", pack(units, strings[:-1] + b"\xff\0"), "UTF-8"),
            ("unterminated", pack(units, strings[:-1] + b"x"), "NUL"),
        ]
        us = list(units)
        us[0] = (us[0] & 0x3ff) | ((len(units) + 4096) << 10)   # root's children past the end
        cases.append(("children-past-end", pack(us, strings), "past the end"))
        us = list(units)
        base = leaf ^ offset(us[leaf])
        us[base] = (1 << 31) | (len(strings) + 5)
        cases.append(("value-past-end", pack(us, strings), "past the"))
        us = list(units)
        us[child] = (c_of_child << 10) | (us[child] & 0xff)   # child ^ offset == root's base: byte c loops
        cases.append(("loop", pack(us, strings), "loop"))
        cases.append(("chain-33", chain_blob(33), "more than 32 keys"))
        # a node whose children block ends exactly one unit past the array: the chain "a" whose last
        # unit is cut (its node's children, 512..767, end at unit 767 of a 767-unit array); the
        # bound is (base | 0xff) >= units, and > would read the unit past the end
        one = chain_blob(1)
        cases.append(("children-one-past-end", struct.pack("<I", 767 * 4) + one[4:4 + 767 * 4] + one[4 + 768 * 4:],
                      "past the end"))
        for seed in range(40):
            rr = random.Random(seed)
            n = rr.choice([5, 64, 1500, 8000])
            junk = bytes(rr.randrange(256) for _ in range(n))
            if seed % 2:   # a plausible header, so that the walk is what fails
                k = rr.randint(256, max(256, (n - 8) // 4)) if n > 1100 else 256
                junk = struct.pack("<I", 4 * k) + bytes(rr.randrange(256) for _ in range(4 * k + 64))
            cases.append(("random-%d" % seed, junk, ""))
        for name, data, words in cases:
            rc, out, err = run([tool, "check", write(name + ".bin", data)])
            check(rc == 1 and len(out.splitlines()) == 1 and out.startswith("precompiled charsmap:") and
                  words in out, "%s: expected a refusal mentioning %r, got rc %d: %s%s" % (name, words, rc, out, err))

        # a 32-key chain is fine, and lookups walk it
        chain = write("chain32.bin", chain_blob(32))
        rc, out, _ = run([tool, "lookup", chain], (b"a" * 40).hex().encode() + b"\n" + b"ab".hex().encode() + b"\n")
        check(rc == 0 and out.splitlines() == ["32 78 1 78", "1 78 1 78"], "the 32-key chain: rc %d, %r" % (rc, out))
        # the one-key chain uncut: its last children block ends at the array's last unit, and is fine
        rc, out, _ = run([tool, "lookup", write("chain1.bin", chain_blob(1))], b"aa".hex().encode() + b"\n")
        check(rc == 0 and out.splitlines() == ["1 78 1 78"], "the 1-key chain: rc %d, %r" % (rc, out))

        # 3. inside model files
        crashed = 0
        text = "Hello wörld ① ＡＢＣ\n".encode() * 3
        for name, data, words in cases + [("chain-33", chain_blob(33), "")]:
            for spec, spec_name in ((3, "normalizer_spec"), (5, "denormalizer_spec")):
                path = write("%s-%d.model" % (name, spec), with_charsmap(model, data, spec))
                rc, out, err = run([test_spm, path], text)
                lines = err.strip().splitlines()
                ok = rc == 1 and out == "" and len(lines) == 1 and path in lines[0] and spec_name in lines[0]
                if name == "empty":
                    ok = rc == 0   # an empty charsmap is sentencepiece's identity normalization
                check(ok, "%s in %s: expected exit 1 with one line naming the file and %s, got rc %d, "
                          "stdout %r, stderr %r" % (name, spec_name, spec_name, rc, out[:100], err[:300]))
                if name.startswith("random") and spec == 3 and name.endswith(("1", "3")):
                    p = subprocess.run([sys.executable, "-c", "import sentencepiece as s, sys; "
                                        "p = s.SentencePieceProcessor(model_file=sys.argv[1]); "
                                        "p.encode('Hello world ' * 50)", path], capture_output=True, timeout=60)
                    crashed += p.returncode < 0
        print("Python's sentencepiece died by a signal on %d of the random charsmaps tried" % crashed)

        # a valid charsmap in denormalizer_spec too: loads, encodes as before (its
        # decodes go through that map, so they may differ)
        both = write("both.model", with_charsmap(model, blob, 5))
        plain = write("plain.model", model)
        r1 = run([test_spm, plain], text)
        r2 = run([test_spm, both], text)
        check(r1[0] == 0 and r2[0] == 0 and r1[1] and r1[1].splitlines()[::2] == r2[1].splitlines()[::2],
              "a valid denormalizer charsmap: rc %d/%d, %r vs %r" % (r1[0], r2[0], r1[1][:200], r2[1][:200]))

    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
