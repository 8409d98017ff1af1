#!/usr/bin/python3
"""The SentencePiece shim of the library (src/tokenizer.h, through tests/test_spm.c)
against Python's sentencepiece (Debian's python3-sentencepiece, the same 0.1.97 as
libsentencepiece): tiny models are trained here on a built-in corpus (unigram and
BPE, identity and nmt_nfkc normalization, one with user-defined symbols and byte
fallback), and for many sentences (empty, spaces only, unknown characters,
invalid UTF-8, ...) the shim's pieces must equal encode_as_pieces and its decode
decode_pieces. Also: the piece list and kinds (--list), the C interface's edge
cases (--api), encoding on 8 threads at once (--threads), and malformed model
files (garbage, empty, truncated, missing, a directory), each of which must fail
with exit status 1, exactly one line on stderr naming the path, nothing on stdout.

usage: test_spm.py /path/to/test_spm
Prints "N passed, M failed"; exits 1 on any failure.
"""
import os
import random
import subprocess
import sys
import tempfile

import sentencepiece as spm

CORPUS = [
    "Hello world, this is a small test corpus.",
    "The quick brown fox jumps over the lazy dog.",
    "Machine translation with Marian models uses SentencePiece.",
    "Three hundred forty two apples and 17 oranges!",
    "Hallo Welt, schöne Grüße aus Köln.",
    "Der Bär läuft über die Straße und äßt Äpfel.",
    "Größe, Maß und Fußgängerübergänge sind typisch deutsch.",
    "Übermorgen öffnen wir die Tür für die Müllers.",
    "Le café est très chaud, n'est-ce pas ?",
    "日本語のテキストです。東京は大きい都市です。",
    "中文句子也在这里，我们测试分词。",
    "한국어 문장도 조금 있습니다.",
    "Numbers: 1234567890, dates 2024-01-31, prices 9,99 €.",
    "Tabs\tand  double  spaces appear too.",
]
SENTENCES = CORPUS + [
    "",
    " ",
    "     ",
    "  leading and trailing spaces  ",
    "hello",
    "Hello World",
    "Straße Straße Straße",
    "ÄÖÜ äöü ß",
    "東京",
    "unknown characters: 😀 🚀 ∑ ∫ ☃",
    "Кириллица и العربية",
    "full-width ＡＢＣ１２３ and ligature ﬁ, ① ㍻",
    "combining e\u0301 vs é",
    "a\u2581b the meta symbol itself \u2581\u2581",
    "back\\slash and \"quotes\" and 'apostrophes'",
    "control \x01\x02 characters \x7f",
    "zero\u200bwidth space and\u00a0no-break space",
    "x" * 300,
    " ".join(CORPUS),
]
# Lines of raw bytes (not UTF-8): Python encodes them as bytes, the shim as is.
BAD_UTF8 = [b"ab\xffcd", b"\xc3", b"caf\xc3\xa9 \xe2\x82", b"\x80\x80\x80 x"]

MODELS = [
    # name, trainer options
    ("unigram-identity", dict(model_type="unigram", normalization_rule_name="identity", vocab_size=120)),
    ("unigram-nmt_nfkc", dict(model_type="unigram", normalization_rule_name="nmt_nfkc", vocab_size=150)),
    ("bpe-identity", dict(model_type="bpe", normalization_rule_name="identity", vocab_size=120)),
    ("bpe-nmt_nfkc", dict(model_type="bpe", normalization_rule_name="nmt_nfkc", vocab_size=150)),
    ("unigram-nmt_nfkc-user-bytes", dict(model_type="unigram", normalization_rule_name="nmt_nfkc",
                                         vocab_size=400, byte_fallback=True,
                                         user_defined_symbols=["<sep>", "@@", "Köln"],
                                         control_symbols=["<ctrl>"])),
    ("unigram-small-nodummy", dict(model_type="unigram", normalization_rule_name="identity", vocab_size=130,
                                   character_coverage=0.98,
                                   add_dummy_prefix=False, remove_extra_whitespaces=False)),
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


def escape(s, space):
    out = []
    for c in s:
        if c == "\\":
            out.append("\\\\")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif c == "\0":
            out.append("\\0")
        elif c == " " and space:
            out.append("\\s")
        else:
            out.append(c)
    return "".join(out)


def train(name, opts, tmp):
    import io
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(CORPUS * 5), model_writer=model,
                                   hard_vocab_limit=False, minloglevel=2, **opts)
    path = os.path.join(tmp, name + ".model")
    with open(path, "wb") as f:
        f.write(model.getvalue())
    return path


def run(exe, args, stdin=b""):
    return subprocess.run([exe] + args, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=120)


def test_model(exe, name, path, user_defined):
    sp = spm.SentencePieceProcessor(model_file=path)

    # pieces and kinds
    r = run(exe, ["--list", path])
    if check(r.returncode == 0 and not r.stderr, "%s: --list exit %d: %s" % (name, r.returncode, r.stderr)):
        rows = r.stdout.decode("utf-8").split("\n")
        check(rows[-1] == "" and len(rows) - 1 == sp.get_piece_size(),
              "%s: --list has %d rows, sentencepiece %d pieces" % (name, len(rows) - 1, sp.get_piece_size()))
        for i, row in enumerate(rows[:-1]):
            piece = sp.id_to_piece(i)
            if sp.is_unknown(i):
                kind = 1
            elif sp.is_control(i):
                kind = 2
            elif sp.is_byte(i):
                kind = 4
            elif sp.is_unused(i):
                kind = 5
            elif piece in user_defined:
                kind = 3
            else:
                kind = 0
            want = "%d\t%d\t%s" % (i, kind, escape(piece, True))
            if not check(row == want, "%s: --list row %d is %r, want %r" % (name, i, row, want)):
                break

    # encode / decode of every sentence, in one run
    lines = SENTENCES + [s.lower() for s in CORPUS] + [s.upper() for s in CORPUS]
    rng = random.Random(name)
    alphabet = "".join(sorted(set("".join(CORPUS)))) + "😀∑Жح\u2581"
    for _ in range(100):
        lines.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))))
    want = []
    for s in lines:
        pieces = sp.encode_as_pieces(s)
        want.append(" ".join(escape(p, True) for p in pieces))
        want.append(escape(sp.decode_pieces(pieces), False))
    raw = b"".join(s.encode("utf-8") + b"\n" for s in lines)
    for b in BAD_UTF8:
        pieces = [p.decode("utf-8") for p in sp.encode(b, out_type=str)]
        want.append(" ".join(escape(p, True) for p in pieces))
        want.append(escape(sp.decode_pieces(pieces), False))
        raw += b + b"\n"
    r = run(exe, [path], raw)
    if not check(r.returncode == 0 and not r.stderr, "%s: encode exit %d: %s" % (name, r.returncode, r.stderr)):
        return
    got = r.stdout.decode("utf-8").split("\n")
    check(got[-1] == "" and len(got) - 1 == len(want),
          "%s: %d output lines for %d inputs" % (name, len(got) - 1, len(want) // 2))
    shown = 0
    for i in range(0, min(len(got) - 1, len(want)), 2):
        src = lines[i // 2] if i // 2 < len(lines) else BAD_UTF8[i // 2 - len(lines)]
        ok = check(got[i] == want[i], "%s: pieces of %r: shim %r, python %r" % (name, src, got[i], want[i]))
        ok = check(got[i + 1] == want[i + 1],
                   "%s: decode of %r: shim %r, python %r" % (name, src, got[i + 1], want[i + 1])) and ok
        if not ok:
            shown += 1
            if shown >= 5:
                break

    # the C interface's edge cases, and several threads on one vkf_spm
    r = run(exe, ["--api", path])
    check(r.returncode == 0 and not r.stderr, "%s: --api exit %d: %s" % (name, r.returncode, r.stderr.decode()))
    r = run(exe, ["--threads", "8", path], raw)
    check(r.returncode == 0 and not r.stderr, "%s: --threads exit %d: %s" % (name, r.returncode, r.stderr.decode()))


def test_bad_files(exe, good, tmp):
    data = open(good, "rb").read()
    rng = random.Random(7)
    cases = {}

    def write(name, content):
        p = os.path.join(tmp, name)
        with open(p, "wb") as f:
            f.write(content)
        cases[name] = p

    write("garbage.model", bytes(rng.randrange(256) for _ in range(4096)))
    write("garbage-small.model", b"\xff\xff\xff\xff")
    write("text.model", b"this is not a model\n" * 10)
    write("empty.model", b"")
    for n in (1, 2, 10, len(data) // 3, len(data) // 2, len(data) - 1):
        write("truncated-%d.model" % n, data[:n])
    # cut at the end of the pieces: a valid protobuf, but no trainer/normalizer spec
    write("pieces-only.model", pieces_prefix(data))
    # a piece with a NUL byte, and an empty piece
    write("nul-piece.model", b"\x0a\x05\x0a\x03a\x00b" + data)
    write("empty-piece.model", b"\x0a\x02\x0a\x00" + data)
    # protobufs that parse, refused by sentencepiece itself: a piece defined twice;
    # a failing self test (which sentencepiece reports through LOG(INFO) on stderr,
    # unless the shim has silenced it)
    write("duplicate-piece.model", b"\x0a\x05\x0a\x03\xe2\x96\x81" + data)
    sample = b"\x0a\x05hello" + b"\x12\x0cnot-the-same"
    self_test = b"\x0a" + bytes([len(sample)]) + sample
    write("self-test.model", data + b"\x22" + bytes([len(self_test)]) + self_test)
    cases["missing.model"] = os.path.join(tmp, "no-such-dir", "missing.model")
    os.mkdir(os.path.join(tmp, "a-directory.model"))
    cases["directory"] = os.path.join(tmp, "a-directory.model")
    cases["/dev/null"] = "/dev/null"

    for name, path in sorted(cases.items()):
        for args in ([path], ["--list", path], ["--api", path]):
            r = run(exe, args, b"hello world\n")
            err = r.stderr.decode("utf-8", "replace")
            check(r.returncode == 1, "%s %s: exit %d, want 1" % (name, args[0], r.returncode))
            check(r.stdout == b"", "%s %s: stdout %r" % (name, args[0], r.stdout[:200]))
            check(err.count("\n") == 1 and err.endswith("\n") and path in err,
                  "%s %s: stderr must be one line naming %s: %r" % (name, args[0], path, err))


def pieces_prefix(data):
    """The bytes of data up to the end of the last field 1 (the pieces)."""
    p, end = 0, 0

    def varint(p):
        v, shift = 0, 0
        while True:
            b = data[p]
            p += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return v, p

    while p < len(data):
        key, p = varint(p)
        wire = key & 7
        if wire == 2:
            n, p = varint(p)
            p += n
        elif wire == 0:
            _, p = varint(p)
        elif wire == 5:
            p += 4
        elif wire == 1:
            p += 8
        if key >> 3 == 1:
            end = p
    return data[:end]


def main():
    if len(sys.argv) != 2:
        print("usage: test_spm.py /path/to/test_spm", file=sys.stderr)
        return 2
    exe = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="vkformer-spm.") as tmp:
        paths = {}
        for name, opts in MODELS:
            paths[name] = train(name, opts, tmp)
            test_model(exe, name, paths[name], set(opts.get("user_defined_symbols", [])))
        test_bad_files(exe, paths["unigram-nmt_nfkc"], tmp)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
