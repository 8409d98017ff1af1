"""The vkformer Python package as a user installs it, against the CLI on the same
driver: `pip install ./python` into a fresh virtual environment (with the
system's site packages, for numpy; the build's libvkformer.so copied into the
package), then this script runs again in that environment and imports the
installed package, which finds its library itself (no sys.path edit, no
library= argument, no VKFORMER_LIBRARY). Checked: translations of held-out
lines, generated ids, forward logits (single and batched), the decoding options
(repetition penalty, n-grams, suppressed ids and sequences, end ids, target
prefixes, sorted batches), score() and stream(), the ways of finding the
library, and errors (exceptions carrying the library's message). Run with
Debian's /usr/bin/python3 (numpy; python3-venv).

usage: test_python.py LIBVKFORMER.so VKFORMER MODEL HELDOUT.tsv
"""

import os
import subprocess
import sys
import tempfile

LIB, CLI, MODEL, HELDOUT = sys.argv[1:5]
HERE = os.path.dirname(os.path.abspath(__file__))
VENV = os.environ.get("VKF_TEST_PYTHON_VENV")

if VENV is None:
    # First run: install the package into a fresh venv and run again in it. cwd is
    # the temporary folder, so that no vkformer is importable from the current folder.
    with tempfile.TemporaryDirectory(prefix="vkformer-python-") as tmp:
        venv = os.path.join(tmp, "venv")
        if subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv]).returncode != 0:
            sys.exit("FAIL: %s -m venv failed (Debian: python3-venv, which tools/setup.sh installs)" % sys.executable)
        env = dict(os.environ, VKFORMER_BUILD_DIR=os.path.dirname(os.path.abspath(LIB)))
        env.pop("VKFORMER_LIBRARY", None)
        # --no-index: nothing fetched (the package needs nothing from the network).
        if subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--quiet", "--no-index", "--no-cache-dir",
                           "--disable-pip-version-check", os.path.join(HERE, "..", "python")],
                          cwd=tmp, env=env).returncode != 0:
            sys.exit("FAIL: pip install ./python into a fresh venv failed")
        env["VKF_TEST_PYTHON_VENV"] = venv
        del env["VKFORMER_BUILD_DIR"]
        sys.exit(subprocess.run([os.path.join(venv, "bin", "python"), os.path.abspath(__file__)] + sys.argv[1:],
                                cwd=tmp, env=env).returncode)

import numpy as np  # noqa: E402

import vkformer  # noqa: E402

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL: " + what, file=sys.stderr)


def cli(*args):
    r = subprocess.run([CLI] + list(args), capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("vkformer %s failed (%d): %s" % (" ".join(args), r.returncode, r.stderr.strip()))
    return r.stdout


def expect_error(fn, status_name, *fragments):
    """fn() raises VkformerError with that status and a message holding every fragment."""
    try:
        fn()
    except vkformer.VkformerError as e:
        check(e.status_name == status_name, "status %s, expected %s (%s)" % (e.status_name, status_name, e))
        for f in fragments:
            check(f in str(e), "the message %r does not name %r" % (str(e), f))
        return e
    check(False, "no VkformerError (expected %s naming %s)" % (status_name, fragments))
    return None


# ---------------------------------------------------------------- finding the library
package = os.path.dirname(os.path.abspath(vkformer.__file__))
check(package.startswith(os.path.realpath(VENV) + os.sep) or package.startswith(VENV + os.sep),
      "import vkformer imports the venv's installed package, not %s" % package)
bundled = os.path.join(package, "libvkformer.so")
check(vkformer.library_path() == bundled, "the installed package finds its own library, not %s"
      % vkformer.library_path())
with open(bundled, "rb") as a, open(LIB, "rb") as b:
    check(a.read() == b.read(), "the package's libvkformer.so is the build's %s" % LIB)
check(vkformer.library_path(LIB) == LIB, "library= comes first")
e = None
try:
    vkformer.load(MODEL, library="/nonexistent/libvkformer.so")
except vkformer.VkformerError as err:
    e = err
check(e is not None and e.status is None and "/nonexistent/libvkformer.so" in str(e),
      "a missing library is a VkformerError naming its path: %r" % e)
os.environ["VKFORMER_LIBRARY"] = LIB
check(vkformer.library_path() == LIB and vkformer.library_version() == vkformer.library_version(bundled),
      "VKFORMER_LIBRARY comes before the package's own library")
del os.environ["VKFORMER_LIBRARY"]
# The package with no library beside it, none recorded by meson install, and a
# dynamic linker that finds none (LD_LIBRARY_PATH off): one error naming what to do.
with tempfile.TemporaryDirectory() as tmp:
    os.mkdir(os.path.join(tmp, "vkformer"))
    with open(os.path.join(package, "__init__.py")) as f, open(os.path.join(tmp, "vkformer", "__init__.py"), "w") as g:
        g.write(f.read())
    env = {k: v for k, v in os.environ.items() if k not in ("VKFORMER_LIBRARY", "LD_LIBRARY_PATH")}
    env["PYTHONPATH"] = tmp
    r = subprocess.run([sys.executable, "-c", "import ctypes.util, sys, vkformer\n"
                        "if ctypes.util.find_library('vkformer'): print('installed'); sys.exit(0)\n"
                        "try: vkformer.load(sys.argv[1])\n"
                        "except vkformer.VkformerError as e: print(e)", MODEL],
                       capture_output=True, text=True, cwd=tmp, env=env)
    if r.stdout.strip() == "installed":
        print("NOTE: a libvkformer is installed system-wide: the error for no library at all is not checked")
    else:
        check(r.returncode == 0 and r.stdout.startswith("libvkformer not found") and "VKFORMER_LIBRARY" in r.stdout
              and "docs/python.md" in r.stdout and r.stdout.count("\n") == 1,
              "no library anywhere: one line naming the search and the fix: %r %r" % (r.stdout, r.stderr))

messages = []
ctx = vkformer.Context(log=lambda level, message: messages.append((level, message)))
model = ctx.load(MODEL)
cfg = model.config
print("vkformer %s (%s) on %s; model d_model %d, max_len %d" % (vkformer.library_version(), vkformer.library_path(),
                                                                ctx.device_name, cfg.d_model, cfg.max_len))
check(cfg.has_vocab and cfg.activation in ("relu", "gelu"), "config: %s" % (cfg,))

# ---------------------------------------------------------------- translate vs the CLI
with open(HELDOUT) as f:
    rows = [line.rstrip("\n").split("\t") for line in f][:24]
texts = [r[0] for r in rows]
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "texts.txt")
    with open(path, "w") as f:
        f.write("".join(t + "\n" for t in texts))
    want = cli("translate", "--model", MODEL, "--input", path, "--batch", "8").splitlines()
got = model.translate(texts)
check(got == want, "translate of %d held-out lines differs from the CLI: %s"
      % (len(texts), [(t, g, w) for t, g, w in zip(texts, got, want) if g != w][:5]))
correct = sum(g == r[1] for g, r in zip(got, rows))
check(correct >= len(rows) - 2, "only %d of %d held-out lines right" % (correct, len(rows)))
check(model.translate("three hundred forty two") == "342", "translate of one text")
print("translate: %d lines as the CLI, %d exact" % (len(texts), correct))

# ---------------------------------------------------------------- generate vs the CLI
for text in ["forty one thousand thirty nine", "seven hundred eighty seven", "two"]:
    src = model.encode(text)
    check(src.dtype == np.int32 and src[-1] == cfg.eos_id, "encode gives int32 ids ending in eos: %s" % src)
    ids = model.generate(src)
    want = [int(x) for x in cli("generate", "--model", MODEL, "--src", ",".join(map(str, src))).split(",")]
    check(ids.dtype == np.int32 and ids.tolist() == want, "generate %r: %s, the CLI %s" % (text, ids.tolist(), want))
    short = model.generate(src.tolist(), max_new=2)
    check(short.tolist() == want[:2], "generate with max_new 2: %s" % short.tolist())
batch = model.generate([model.encode(t) for t in texts[:5]])
check([model.decode(b) for b in batch] == got[:5], "generate on a batch of 5 agrees with translate")

# ---------------------------------------------------------------- forward vs the CLI
pairs = []
with tempfile.TemporaryDirectory() as tmp:
    for text in ["two hundred", "one hundred ninety two"]:
        src = model.encode(text)
        tgt = np.concatenate([[cfg.bos_id], model.generate(src)]).astype(np.int64)
        logits = model.forward(src, tgt)
        out = os.path.join(tmp, "logits.npy")
        cli("forward", "--model", MODEL, "--src", ",".join(map(str, src)), "--tgt", ",".join(map(str, tgt)),
            "--out", out)
        want = np.load(out)
        check(logits.dtype == np.float32 and logits.shape == (len(tgt), cfg.tgt_vocab_size),
              "forward shape %s dtype %s" % (logits.shape, logits.dtype))
        err = float(np.max(np.abs(logits - want))) if logits.shape == want.shape else float("inf")
        check(err <= 1e-4 * max(1.0, float(np.max(np.abs(want)))), "forward %r: max |python - cli| = %g" % (text, err))
        check(np.argmax(logits[:-1], axis=1).tolist() == tgt[1:].tolist(), "forward's argmax follows generate")
        pairs.append((src, tgt, logits))
b = model.forward([p[0] for p in pairs], [p[1] for p in pairs])
check(b.shape == (2, max(len(p[1]) for p in pairs), cfg.tgt_vocab_size), "batched forward shape %s" % (b.shape,))
for i, (src, tgt, logits) in enumerate(pairs):
    n = len(tgt)
    check(np.allclose(b[i, :n], logits, rtol=1e-4, atol=1e-4), "batched forward row %d equals its single run" % i)
    check(not np.any(b[i, n:]), "batched forward: rows past target %d's length are zero" % i)
print("forward: logits as the CLI's .npy; generate: ids as the CLI's")

# ---------------------------------------------------------------- decoding options, score, stream vs the CLI
text = "seven hundred eighty seven"
src = model.encode(text)
for kw, flags in [({"repetition_penalty": 1.7}, ["--repetition-penalty", "1.7"]),
                  ({"no_repeat_ngram": 1, "beams": 3}, ["--no-repeat-ngram", "1", "--beam", "3"]),
                  ({"suppress": [model.token_id("7")]}, ["--suppress", str(model.token_id("7"))]),
                  ({"bad_sequences": [[model.token_id("8"), model.token_id("7")]]}, ["--suppress-sequence", "8 7"]),
                  ({"end_ids": [cfg.eos_id, model.token_id("8")]},
                   ["--end-token", str(cfg.eos_id), "--end-token", str(model.token_id("8"))])]:
    got = model.translate(text, **kw)
    want = cli("translate", "--model", MODEL, text, *flags).strip()
    check(got == want, "translate(%r, %s): %r, the CLI %r" % (text, kw, got, want))
    ids = model.generate(src, **kw)
    check(model.decode(ids) == got, "generate(%s) agrees with translate: %s" % (kw, ids.tolist()))
got = model.translate(text, target_prefix="9", beams=2)
want = cli("translate", "--model", MODEL, text, "--target-prefix", "9", "--beam", "2").strip()
check(got == want and got.startswith("9"), "translate with target_prefix '9': %r, the CLI %r" % (got, want))
ids = model.generate(src, target_prefix=[model.token_id("9")])
check(ids[0] == model.token_id("9") and model.decode(ids) == model.translate(text, target_prefix="9"),
      "generate with target_prefix returns the prefix first: %s" % ids.tolist())
# sorted batches: the same as one batch
many = texts[:10]
check(model.translate(many, max_batch_tokens=12) == model.translate(many), "translate with max_batch_tokens")
# score
sc = model.score(text, "787")
line = cli("score", "--model", MODEL, "--src", text, "--tgt", "787").split("\t")
check(isinstance(sc, vkformer.Score) and sc.logprobs.dtype == np.float32 and len(sc.logprobs) == 4 and
      abs(sc.sum - float(line[0])) < 1e-4 and abs(sc.normalized - float(line[1])) < 1e-4 and
      np.allclose(sc.logprobs, [float(x) for x in line[2].split()], atol=1e-5),
      "score: %s, the CLI %s" % (sc, line))
tgt = model.generate(src)
logits = model.forward(src, np.concatenate([[cfg.bos_id], tgt]))
lsm = logits.astype(np.float64) - np.log(np.exp(logits.astype(np.float64) - logits.max(1, keepdims=True)).sum(
    1, keepdims=True)) - logits.max(1, keepdims=True)
want = [lsm[t, x] for t, x in enumerate(list(tgt) + [cfg.eos_id])]
sc = model.score([src, src], [tgt, []])
check(np.allclose(sc[0].logprobs, want, atol=1e-4) and len(sc[1].logprobs) == 1,
      "score of ids against the forward pass's log_softmax: %s vs %s" % (sc[0].logprobs, want))
# stream: the pieces join to translate()'s text
for kw in [{}, {"beams": 3}, {"target_prefix": "7"}, {"repetition_penalty": 1.5}]:
    pieces = list(model.stream(text, **kw))
    check("".join(pieces) == model.translate(text, **kw) and all(pieces),
          "stream(%s): %r joins to translate's %r" % (kw, pieces, model.translate(text, **kw)))
first = model.stream(text)
check(next(first) == "7", "stream's first piece")
first.close()
check(model.translate(text) == "787", "the model after a stream closed early")
expect_error(lambda: model.translate(text, repetition_penalty=0), "VKF_ERROR_INVALID_ARGUMENT", "repetition_penalty")
expect_error(lambda: model.token_id("seventy"), "VKF_ERROR_INVALID_ARGUMENT", "seventy")
print("decoding options, score and stream as the CLI's")

# ---------------------------------------------------------------- errors
missing = os.path.join(tempfile.gettempdir(), "no-such-vkformer-model.safetensors")
expect_error(lambda: ctx.load(missing), "VKF_ERROR_IO", missing)
expect_error(lambda: vkformer.load(missing), "VKF_ERROR_IO", missing)
expect_error(lambda: model.translate("three zillion"), "VKF_ERROR_INVALID_ARGUMENT", "zillion")
expect_error(lambda: model.generate([1, cfg.src_vocab_size + 5]), "VKF_ERROR_INVALID_ARGUMENT",
             str(cfg.src_vocab_size + 5))
expect_error(lambda: model.generate([1] * (cfg.max_len + 1)), "VKF_ERROR_INVALID_ARGUMENT", "max_len")
expect_error(lambda: model.set_attention("sparse"), "VKF_ERROR_INVALID_ARGUMENT", "sparse")
model.set_attention("lowrank:4")
used = model.attention_used()
check(used["encoder"] == "lowrank:4" and used["decoder"] == "dense" and used["decode_self"] == "dense" and
      used["kernel"] in ("fused", "fused-coopmat"), "attention_used after lowrank:4: %r" % used)
model.set_attention("dense")
check(model.attention_used()["encoder"] == "dense", "attention_used after dense: %r" % model.attention_used())
# text C cannot take whole: never a silent cut at the NUL
for bad in ["forty\0two", "forty \ud800 two"]:
    try:
        model.encode(bad)
        check(False, "encode(%r) raised nothing" % bad)
    except ValueError:
        pass
expect_error(lambda: model.encode("forty \x1b[2J two"), "VKF_ERROR_INVALID_ARGUMENT", "\\x1b")
for bad, kind in [([], ValueError), ([1.5, 2.0], TypeError)]:
    try:
        model.generate(bad)
        check(False, "generate(%r) raised nothing" % (bad,))
    except kind:
        pass

# ---------------------------------------------------------------- validation, closing
errors, warnings, on = ctx.validation_counts()
check(errors == 0 and warnings == 0, "validation messages: %d errors, %d warnings: %s" % (errors, warnings, messages))
if os.environ.get("VKFORMER_VALIDATE") == "1":
    check(on, "VKFORMER_VALIDATE=1 but the validation layer is off")
ctx.close()
expect_error(lambda: model.translate("two"), "VKF_ERROR_STATE", "closed")
with vkformer.load(MODEL, attention="local:2", seed=3) as m2:
    check(m2.translate("two") == "2", "load() with attention and seed")

if failures:
    print("%d check(s) failed" % len(failures), file=sys.stderr)
    sys.exit(1)
print("all python binding checks passed")
