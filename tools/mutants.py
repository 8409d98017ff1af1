#!/usr/bin/env python3
"""One-line mutants of vkformer's critical lines, each with the tests that must catch it.

usage: tools/mutants.py [--only NAME,...] [--driver lavapipe] [--workdir DIR] [--from-build DIR]
                        [--report FILE.md] [--no-baseline] [--all-tests] [--timeout-multiplier N]
       tools/mutants.py --check [--build DIR]      the list parses, every snippet is found exactly
                                                   once (and, with --build, every test is registered)
       tools/mutants.py --list                     the mutants, one line each

A mutant is a one-line change put into the sources by hand: a snippet of one line (unique in the
sources), its replacement, and the meson tests that must fail with it. Each mutant is located by
its snippet in the files whose NAME matches a pattern, searched under src/, shaders/ and tools/cli/,
so that files may move or split between folders without the list going stale; a snippet found
nowhere or more than once is an error of the list ("LIST ERROR"), never "survived".

A run copies the working tree (build directories and .git left out) to a scratch tree under
--workdir (default /tmp/vkformer-mutants; kept, so a second run rebuilds only what changed),
configures one build directory there with the user options of --from-build (default build) and
builds. Then for each mutant, one at a time: the line is changed in the scratch tree, the build is
brought up to date, the mutant's tests run (--no-rebuild) in the listed order until one fails (the
mutant is caught; --all-tests runs them all), and the line is put back. A mutant whose tests all
pass has SURVIVED: a finding (a test is missing). A mutant that does not compile is an error of the
list. At the end every test that caught a mutant runs once on the unmutated tree (the baseline): a
catch by a test that fails there too says nothing, and the mutant is reported UNTESTABLE. The real
tree is never written to.

Test names may hold {driver} (--driver, default lavapipe: the fastest test driver here).
Exit status: 0 when every mutant was caught; 1 when one survived, was untestable or the list is
wrong; 2 on usage errors. Too slow for CI (a rebuild and a few tests per mutant); CI runs --check.
"""
import argparse
import datetime
import fnmatch
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEARCH_DIRS = ("src", "shaders", "tools/cli")


class Mutant:
    def __init__(self, name, files, snippet, replacement, tests, why):
        self.name = name                # short id, unique
        self.files = files              # fnmatch pattern of the file's name (not its folder)
        self.snippet = snippet          # one line's text (or part of it), found exactly once
        self.replacement = replacement  # what the snippet becomes (may be empty: the code deleted)
        self.tests = tests              # meson test names that must fail; {driver} is substituted
        self.why = why                  # what the bug would do, in a few words


# The list. Each entry: where and what, and the tests that catch it (cheap ones first: a mutant is
# caught as soon as one of them fails, but every named test runs).
MUTANTS = [
    # ---- issue 38, part 4: the four bugs that once left every test green
    Mutant("spm-decode-strip", "*.c",
           'while (text[start] && strchr(" \\t\\n\\r\\f\\v", text[start])) start++;', "",
           ["mutant-cases-{driver}"],
           "SentencePiece decode keeps the leading space (Marian: \" child S\" for \"child S\")"),
    Mutant("whisper-begin-suppress", "logits_process.comp",
           "for (uint e = tid; e < pc.n_begin; e += WG) {", "for (uint e = tid; e < 0u; e += WG) {",
           ["mutant-cases-{driver}"],
           "Whisper's begin_suppress_tokens dropped at the first step (the processor kernel)"),
    Mutant("whisper-begin-suppress-load", "whisper.c",
           "else g->begin_suppress[g->n_begin++] = (int32_t)json_integer_value(e);", "else continue;",
           ["mutant-cases-{driver}"],
           "Whisper's begin_suppress_tokens read but dropped (the folder loader)"),
    Mutant("json-u2028", "text.c",
           "cp == 0x7f || cp == 0x2028 || cp == 0x2029", "cp == 0x7f",
           ["json-{driver}"],
           "--json prints U+2028/U+2029 raw instead of \\u2028 \\u2029"),
    Mutant("charsmap-children-bound", "charsmap.c",
           "if ((base_ | 0xffu) >= n) {", "if ((base_ | 0xffu) > n) {",
           ["charsmap"],
           "a children block ending one unit past the array is accepted and read out of bounds"),
    # ---- softmax (shaders/softmax.comp: the unfused attention's and the ops' row softmax)
    Mutant("softmax-max-subtraction", "softmax.comp",
           "m = workgroup_max(m);", "m = min(workgroup_max(m), 0.0);",
           ["mutant-ops-{driver}", "ops-{driver}"],
           "the row max is not subtracted when it is positive: exp overflows for scores past 88"),
    Mutant("softmax-normalisation", "softmax.comp",
           "const float inv = 1.0 / s;", "const float inv = 1.0;",
           ["mutant-ops-{driver}", "ops-{driver}"],
           "probabilities not divided by their sum"),
    Mutant("softmax-causal-limit", "softmax.comp",
           "row % pc.causal_period + pc.causal_offset + 1u", "row % pc.causal_period + pc.causal_offset + 2u",
           ["mutant-ops-{driver}", "ops-{driver}"],
           "the causal mask lets each query see the next key"),
    # ---- fused attention (shaders/attention_fused.comp rows form, attention_pattern.glsl, decode step)
    Mutant("attention-online-rescale", "attention_fused.comp",
           "l[qq] *= alpha;", "l[qq] *= 1.0;",
           ["mutant-ops-{driver}", "attention-{driver}"],
           "online softmax: the running sum is not rescaled when the max grows"),
    Mutant("attention-lanes-rescale", "attention_fused_lanes.comp",
           "l[qq] *= alpha;", "l[qq] *= 1.0;",
           ["mutant-ops-{driver}", "attention-{driver}"],
           "the lanes form (lavapipe's): the running sum is not rescaled when the max grows"),
    Mutant("attention-causal-mask", "attention_pattern.glsl",
           "|| j <= i + pc.causal_offset;", "|| j <= i + pc.causal_offset + 1u;",
           ["mutant-ops-{driver}", "parity-{driver}", "attention-{driver}"],
           "the fused kernel's causal mask lets each query see the next key"),
    Mutant("attention-key-lengths", "attention_pattern.glsl",
           "len = uint(clamp(lengths[b], 0, int(pc.lk)));", "len = uint(clamp(lengths[b] + 1, 0, int(pc.lk)));",
           ["mutant-ops-{driver}", "parity-{driver}", "attention-{driver}"],
           "a padded batch's first padding key is attended"),
    Mutant("decode-attention-rescale", "attention_decode.comp",
           "corr = exp(m - mn)", "corr = 1.0",
           ["generate-{driver}", "beam-{driver}", "attention-{driver}"],
           "decode step's online softmax: the sum is not rescaled when the max grows"),
    # ---- beam search bookkeeping (src/decode/beam.c)
    Mutant("beam-length-penalty", "beam.c",
           "double score = sum_logprobs / pow((double)generated_len, length_penalty);",
           "double score = sum_logprobs;",
           ["beam-{driver}"],
           "finished hypotheses scored without the length penalty"),
    Mutant("beam-eos-rank", "beam.c",
           "if (rank < K && (end || last)) {", "if (rank <= K && (end || last)) {",
           ["beam-{driver}"],
           "an end id ranked past the beams still finishes a hypothesis"),
    Mutant("beam-done-test", "beam.c",
           "return h->worst >= best_sum_logprobs / pow((double)generated_len, o->length_penalty);",
           "return h->worst > best_sum_logprobs / pow((double)generated_len, o->length_penalty) + 1.0;",
           ["beam-{driver}"],
           "a source's search stops later than Hugging Face's (is_done)"),
    # ---- layer norm (shaders/layernorm.comp)
    Mutant("layernorm-eps", "layernorm.comp",
           "inversesqrt(workgroup_sum(sq) / n + pc.eps)", "inversesqrt(workgroup_sum(sq) / n)",
           ["ops-{driver}"],
           "eps left out of the variance: a constant row divides by zero"),
    # ---- logits processors (shaders/logits_process.comp)
    Mutant("repetition-penalty-sign", "logits_process.comp",
           "s < 0.0 ? s * penalty : s / penalty", "s < 0.0 ? s / penalty : s * penalty",
           ["decoding-{driver}"],
           "the repetition penalty rewards repeated ids instead of penalising them"),
    # ---- greedy choice (shaders/argmax.comp): ties to the lowest id, as torch.argmax
    Mutant("argmax-tie", "argmax.comp",
           "(ov == best_value[tid] && oi < best_index[tid])", "(ov == best_value[tid] && oi > best_index[tid])",
           ["mutant-ops-{driver}", "generate-{driver}", "beam-{driver}"],
           "equal logits resolve to the highest id instead of the lowest"),
    # ---- BPE merges (tokenizer.json's BPE model)
    Mutant("bpe-merge-rank", "*.c",
           "return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos;",
           "return a.rank != b.rank ? a.rank > b.rank : a.pos < b.pos;",
           ["hftok-cases", "hftok-bpe"],
           "the worst-ranked merge applied first"),
    Mutant("bpe-merge-tie", "*.c",
           "return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos;",
           "return a.rank != b.rank ? a.rank < b.rank : a.pos > b.pos;",
           ["hftok-cases", "hftok-bpe"],
           "equal-rank merges taken right to left (\"aaa\")"),
    # ---- Unigram (tokenizer.json's Unigram model: T5, mT5, NLLB's ...): Viterbi keeps the best path
    Mutant("unigram-viterbi", "*.c",
           "if (best[key_pos].starts_at < 0 || cand > best[key_pos].score)",
           "if (best[key_pos].starts_at < 0 || cand < best[key_pos].score)",
           ["hftok-cases"],
           "Viterbi keeps the worst segmentation"),
    # ---- T5's relative position buckets (src/arch/spec.c)
    # (n < max_exact -> n <= max_exact is no mutant: distance max_exact lands in bucket max_exact either way)
    Mutant("t5-bucket-log-scale", "spec.c",
           "* (float)(nb - max_exact);", "* (float)(nb - max_exact - 1);",
           ["t5-ops-{driver}", "t5-{driver}"],
           "the logarithmic buckets spread over one bucket fewer"),
    Mutant("t5-bucket-direction", "spec.c",
           "if (rel > 0) base = nb;", "if (rel < 0) base = nb;",
           ["t5-ops-{driver}", "t5-{driver}"],
           "bidirectional buckets: keys before and after the query swapped"),
]


# ------------------------------------------------------------------ locating

def source_files(tree):
    for d in SEARCH_DIRS:
        top = os.path.join(tree, d)
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            for f in sorted(filenames):
                yield os.path.join(dirpath, f)


def locate(tree, m):
    """(path, None) where the snippet is found exactly once, or (None, error)."""
    hits = []
    for path in source_files(tree):
        if not fnmatch.fnmatch(os.path.basename(path), m.files):
            continue
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            continue
        n = text.count(m.snippet)
        hits += [path] * n
    if len(hits) == 1:
        return hits[0], None
    where = "/".join(SEARCH_DIRS)
    if not hits:
        return None, "snippet %r not found in any %s under %s" % (m.snippet, m.files, where)
    return None, "snippet %r found %d times (%s): it must be unique" % (
        m.snippet, len(hits), ", ".join(sorted({os.path.relpath(h, tree) for h in hits})))


def check_list(tree, build=None, driver="lavapipe"):
    """Errors of the list: malformed entries, snippets not found exactly once, tests not registered."""
    errors = []
    names = set()
    registered = None
    if build:
        p = os.path.join(build, "meson-info", "intro-tests.json")
        try:
            with open(p) as f:
                registered = {t["name"] for t in json.load(f)}
        except (OSError, ValueError) as e:
            errors.append("cannot read the build's test list %s: %s" % (p, e))
    for m in MUTANTS:
        if m.name in names:
            errors.append("%s: the name is used twice" % m.name)
        names.add(m.name)
        if not m.snippet or "\n" in m.snippet or "\n" in m.replacement:
            errors.append("%s: the snippet and its replacement must be parts of one line" % m.name)
            continue
        if m.snippet == m.replacement:
            errors.append("%s: the replacement equals the snippet" % m.name)
        if not m.tests:
            errors.append("%s: no test is named to catch it" % m.name)
        _, err = locate(tree, m)
        if err:
            errors.append("%s: %s" % (m.name, err))
        if registered is not None:
            for t in m.tests:
                if t.format(driver=driver) not in registered:
                    errors.append("%s: test %s is not registered in %s" % (m.name, t.format(driver=driver), build))
    return errors


# ------------------------------------------------------------------ the scratch tree

def sync_tree(src, dst):
    """Copies src to dst (build directories and .git left out), writing only files whose content
    differs (so that the scratch build sees a fresh mtime exactly where content changed) and
    removing what src no longer has. Returns the number of files written."""
    def skip(rel):
        top = rel.split(os.sep, 1)[0]
        return top == ".git" or top.startswith("build")
    written = 0
    seen = set()
    for dirpath, dirnames, filenames in os.walk(src):
        rel_dir = os.path.relpath(dirpath, src)
        dirnames[:] = [d for d in dirnames if not skip(os.path.normpath(os.path.join(rel_dir, d)))]
        os.makedirs(os.path.join(dst, rel_dir), exist_ok=True)
        seen.add(os.path.normpath(rel_dir))
        for f in filenames:
            rel = os.path.normpath(os.path.join(rel_dir, f))
            seen.add(rel)
            s, d = os.path.join(src, rel), os.path.join(dst, rel)
            if os.path.islink(s):
                if os.path.islink(d) and os.readlink(d) == os.readlink(s):
                    continue
                if os.path.lexists(d):
                    os.remove(d)
                os.symlink(os.readlink(s), d)
                written += 1
                continue
            with open(s, "rb") as fh:
                data = fh.read()
            try:
                with open(d, "rb") as fh:
                    same = fh.read() == data
            except OSError:
                same = False
            if not same:
                with open(d, "wb") as fh:
                    fh.write(data)
                written += 1
            shutil.copymode(s, d)
    for dirpath, dirnames, filenames in os.walk(dst, topdown=False):
        rel_dir = os.path.normpath(os.path.relpath(dirpath, dst))
        for f in filenames:
            rel = os.path.normpath(os.path.join(rel_dir, f))
            if rel not in seen:
                os.remove(os.path.join(dst, rel))
        if rel_dir != "." and rel_dir not in seen:
            shutil.rmtree(dirpath, ignore_errors=True)
    return written


def user_options(build):
    p = os.path.join(build, "meson-info", "intro-buildoptions.json")
    with open(p) as f:
        opts = json.load(f)
    return ["-D%s=%s" % (o["name"], o["value"]) for o in opts if o["section"] == "user"]


def run(cmd, log, cwd=None, timeout=None):
    """Runs cmd with its output appended to log; returns (rc, seconds)."""
    t0 = time.time()
    with open(log, "a") as f:
        f.write("\n$ %s\n" % " ".join(shlex.quote(c) for c in cmd))
        f.flush()
        try:
            p = subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = 124
    return rc, time.time() - t0


def test_results(build):
    """name -> result of the last meson test run (OK, FAIL, TIMEOUT, SKIP, ...)."""
    out = {}
    try:
        with open(os.path.join(build, "meson-logs", "testlog.json")) as f:
            for line in f:
                r = json.loads(line)
                out[r["name"].rsplit(" / ", 1)[-1]] = r["result"]   # "project:suite / name"
    except (OSError, ValueError):
        pass
    return out


def meson_test(build, tests, log, multiplier):
    # testlog.json is rewritten by each run; remove it so that a run that dies leaves no stale results
    try:
        os.remove(os.path.join(build, "meson-logs", "testlog.json"))
    except OSError:
        pass
    cmd = ["meson", "test", "-C", build, "--no-rebuild", "--print-errorlogs", "-t", str(multiplier)] + tests
    rc, secs = run(cmd, log)
    res = test_results(build)
    return {t: res.get(t, "NOT RUN") for t in tests}, secs


# ------------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only check the list against the current tree")
    ap.add_argument("--list", action="store_true", help="print the mutants")
    ap.add_argument("--build", help="with --check: a build directory whose registered tests are checked")
    ap.add_argument("--source", default=ROOT, help="the tree to mutate a copy of (default: this checkout)")
    ap.add_argument("--only", help="comma-separated mutant names (default: all)")
    ap.add_argument("--driver", default="lavapipe", help="substituted for {driver} in test names")
    ap.add_argument("--workdir", default="/tmp/vkformer-mutants", help="scratch tree and build directory")
    ap.add_argument("--from-build", default=None, help="build directory whose user options the scratch build "
                    "takes (default: SOURCE/build)")
    ap.add_argument("--report", help="write the report (markdown) here too")
    ap.add_argument("--no-baseline", action="store_true", help="skip the unmutated run of the catching tests")
    ap.add_argument("--all-tests", action="store_true", help="run every named test of a mutant, not only up to "
                    "the first that fails")
    ap.add_argument("--timeout-multiplier", type=float, default=1.0)
    a = ap.parse_args()
    src = os.path.abspath(a.source)
    # killed: unwind (SystemExit), so that the mutated line is put back in the scratch tree
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    if a.list:
        for m in MUTANTS:
            print("%-26s %-22s %s -> %s   [%s]" % (m.name, m.files, m.snippet, m.replacement or "(deleted)",
                                                  ", ".join(m.tests)))
        return 0
    if a.check:
        errors = check_list(src, a.build, a.driver)
        for e in errors:
            print("mutants: LIST ERROR: %s" % e)
        print("mutants: %d mutants, %d list errors" % (len(MUTANTS), len(errors)))
        return 1 if errors else 0

    chosen = MUTANTS
    if a.only:
        want = a.only.split(",")
        unknown = [n for n in want if n not in {m.name for m in MUTANTS}]
        if unknown:
            print("mutants: unknown mutant(s) %s (--list names them)" % ", ".join(unknown), file=sys.stderr)
            return 2
        chosen = [m for m in MUTANTS if m.name in want]

    work = os.path.abspath(a.workdir)
    tree, build, log = os.path.join(work, "tree"), os.path.join(work, "build"), os.path.join(work, "log.txt")
    if src == tree or tree.startswith(src + os.sep):
        print("mutants: --workdir must be outside the source tree", file=sys.stderr)
        return 2
    os.makedirs(work, exist_ok=True)
    open(log, "w").close()
    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.time()
    say = lambda s: (print(s), sys.stdout.flush())
    say("mutants: %d mutants; scratch tree %s, log %s" % (len(chosen), tree, log))
    n = sync_tree(src, tree)
    say("mutants: copied the tree (%d files written)" % n)
    if not os.path.exists(os.path.join(build, "build.ninja")):
        from_build = os.path.abspath(a.from_build or os.path.join(src, "build"))
        try:
            opts = user_options(from_build)
        except (OSError, ValueError) as e:
            print("mutants: cannot read the options of %s (%s): --from-build names a configured build directory"
                  % (from_build, e), file=sys.stderr)
            return 2
        rc, _ = run(["meson", "setup", build, tree] + opts, log)
        if rc != 0:
            say("mutants: meson setup failed (see %s)" % log)
            return 1
    rc, secs = run(["ninja", "-C", build], log)
    if rc != 0:
        say("mutants: the unmutated scratch tree does not build (see %s)" % log)
        return 1
    say("mutants: built the unmutated tree (%.0f s)" % secs)

    results = []   # (mutant, status, detail, seconds)
    located = {}
    for m in chosen:
        path, err = locate(tree, m)
        if err:
            results.append((m, "LIST ERROR", err, 0.0))
        else:
            located[m.name] = path
    catchers = {}   # mutant name -> [(test, result)] of the tests that failed under it
    for m in chosen:
        if m.name not in located:
            say("mutants: %-26s LIST ERROR: %s" % (m.name, [r for r in results if r[0] is m][0][2]))
            continue
        tests = [t.format(driver=a.driver) for t in m.tests]
        path = located[m.name]
        with open(path, encoding="utf-8") as f:
            original = f.read()
        t1 = time.time()
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(original.replace(m.snippet, m.replacement, 1))
            rc, _ = run(["ninja", "-C", build], log)
            if rc != 0:
                status, detail = "LIST ERROR", "the mutant does not compile"
            else:
                # in the listed order; the first failing test catches the mutant (--all-tests: run every one)
                failing = []
                for t in tests:
                    res, _ = meson_test(build, [t], log, a.timeout_multiplier)
                    if res[t] != "OK":
                        failing.append((t, res[t]))
                        if not a.all_tests:
                            break
                if failing:
                    status, detail = "caught", ", ".join("%s (%s)" % f for f in failing)
                    catchers[m.name] = failing
                else:
                    status, detail = "SURVIVED", "passed: " + ", ".join(tests)
        finally:
            with open(path, "w", encoding="utf-8") as f:
                f.write(original)
        results.append((m, status, detail, time.time() - t1))
        say("mutants: %-26s %s: %s (%.0f s)" % (m.name, status, detail, time.time() - t1))
    # the scratch build back to the unmutated tree, so that the next run starts from it
    rc, _ = run(["ninja", "-C", build], log)
    # the baseline: every test that caught a mutant must pass on the unmutated tree, or the catch
    # says nothing (the mutant is then untestable by that test)
    needed = sorted({t for f in catchers.values() for t, _ in f})
    if needed and not a.no_baseline:
        if rc != 0:
            bad_base = {t: "NOT BUILT" for t in needed}
        else:
            res, secs = meson_test(build, needed, log, a.timeout_multiplier)
            bad_base = {t: r for t, r in res.items() if r != "OK"}
            say("mutants: baseline: %d catching tests on the unmutated tree (%.0f s): %s" % (
                len(needed), secs, "all pass" if not bad_base else
                "FAILING " + ", ".join("%s (%s)" % kv for kv in sorted(bad_base.items()))))
        for i, (m, status, detail, secs) in enumerate(results):
            if status == "caught" and all(t in bad_base for t, _ in catchers[m.name]):
                results[i] = (m, "UNTESTABLE", "its catching tests fail unmutated too: " +
                              ", ".join("%s (%s)" % (t, bad_base[t]) for t, _ in catchers[m.name]), secs)

    order = {m.name: i for i, m in enumerate(chosen)}
    results.sort(key=lambda r: order[r[0].name])
    counts = {}
    for _, s, _, _ in results:
        counts[s] = counts.get(s, 0) + 1
    summary = ", ".join("%d %s" % (counts[k], k) for k in ("caught", "SURVIVED", "UNTESTABLE", "LIST ERROR")
                        if counts.get(k))
    say("mutants: %s (%.0f s in all)" % (summary, time.time() - t0))
    if a.report:
        rel = lambda p: os.path.relpath(p, tree)
        lines = ["Run %s UTC, `%s`, driver %s, %.0f minutes (scratch tree of the working tree, %s)." % (
                     started.strftime("%Y-%m-%d %H:%M"), " ".join(["tools/mutants.py"] + sys.argv[1:]), a.driver,
                     (time.time() - t0) / 60, describe(src)),
                 "", "| mutant | file | change | tests | result |", "|---|---|---|---|---|"]
        for m, s, d, secs in results:
            f = rel(located[m.name]) if m.name in located else m.files
            lines.append("| %s | %s | `%s` → `%s` | %s | %s: %s |" % (
                m.name, f, m.snippet.replace("|", "\\|"), (m.replacement or "(deleted)").replace("|", "\\|"),
                ", ".join(t.format(driver=a.driver) for t in m.tests), s, d.replace("|", "\\|")))
        lines += ["", "Summary: %s." % summary]
        with open(a.report, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0 if counts.get("caught", 0) == len(results) else 1


def describe(src):
    try:
        head = subprocess.run(["git", "-C", src, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", src, "status", "--porcelain"], capture_output=True,
                               text=True).stdout.strip()
        return "HEAD %s%s" % (head, " with uncommitted changes" if dirty else "")
    except OSError:
        return "not a git checkout"


if __name__ == "__main__":
    sys.exit(main())
