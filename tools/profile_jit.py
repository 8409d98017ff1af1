#!/usr/bin/python3
"""Where a CPU Vulkan driver's JIT-compiled shader spends its time: the profile behind
docs/performance.md's "Software Vulkan as a fast fallback".

    /usr/bin/python3 tools/profile_jit.py [--warmup 5] [--seconds 4] [--annotate FILE] -- COMMAND...

Starts COMMAND (e.g. `build/vkformer bench matmul --size 1024 --repeat 200` with
VK_ICD_FILENAMES naming lavapipe), waits --warmup seconds for it to reach its
steady state, samples every thread's instruction pointer for --seconds with
`perf record -e cpu-clock` (no hardware counters needed, so it works in a VM), then
reads the machine code of the hottest JIT region out of the running process with
gdb (lavapipe's code has no symbols; perf only sees addresses) and stops COMMAND.

It prints where the samples fell (JIT code against the driver and the rest), and,
for the hot JIT region, the share of samples and of instructions per kind:
floating-point arithmetic, buffer loads, stack spills and reloads, lane shuffles,
masked (AVX-512 mask register) operations, integer vector work, and scalar code
(address arithmetic, bounds checks, the branches of per-lane loops). cpu-clock
samples land on the instruction after the one that was executing (skid), so shares
are per block of code rather than per instruction. --annotate writes the region's
disassembly with each instruction's sample count.

Needs perf (linux-perf) and gdb; perf_event_paranoid <= 2 lets a user profile
their own processes. Exit 1 with one line when a tool is missing or the command
ends before the samples are taken.
"""
import argparse
import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

KINDS = ["fp arithmetic", "buffer loads", "stack spills/reloads", "lane shuffles", "mask-register ops",
         "integer vector", "scalar and branches", "other"]


def kind(text):
    """The kind of one AT&T-syntax instruction ("mnemonic operands")."""
    parts = text.split(None, 1)
    mn = parts[0] if parts else ""
    ops = parts[1] if len(parts) > 1 else ""
    mem = "(" in ops
    stack = "(%rsp" in ops or "(%rbp" in ops
    vec = "%ymm" in ops or "%xmm" in ops or "%zmm" in ops
    if re.match(r"v?(fn?m(add|sub)\d*[ps][sd]|mul[ps][sd]|add[ps][sd]|sub[ps][sd]|div[ps][sd]|max[ps][sd]|"
                r"min[ps][sd]|sqrt[ps][sd]|rcp|rsqrt)", mn):
        return "fp arithmetic"
    if stack and vec and re.match(r"v?mov", mn):
        return "stack spills/reloads"
    if re.match(r"v?p?gather", mn):
        return "buffer loads"
    if mem and not stack and vec and re.match(r"v?(mov|p?broadcast|pinsr|insert)", mn) and \
            not re.search(r"%[xyz]mm\d+,\s*\S*\(", ops):
        return "buffer loads"
    if "%k" in ops or mn.startswith("k"):
        return "mask-register ops"
    if re.match(r"v(perm|shuf|pshuf|extract|insert|unpck|punpck|blend|pblend|broadcast|pbroadcast|movsh|movsl|"
                r"alignr|palignr)", mn):
        return "lane shuffles"
    if vec:
        return "integer vector" if mn.startswith("vp") or mn.startswith("vcvt") else "other"
    if re.match(r"(j|cmp|test|inc|dec|add|sub|and|or|xor|shl|shr|sar|lea|mov|imul|cmov|set|nop|push|pop|call|"
                r"ret|bt|neg|not|cs|data16)", mn):
        return "scalar and branches"
    return "other"


def die(msg):
    print("profile_jit: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--warmup", type=float, default=5.0, help="seconds before sampling (default 5)")
    p.add_argument("--seconds", type=float, default=4.0, help="seconds of samples (default 4)")
    p.add_argument("--span", type=int, default=65536, help="largest hot region read, in bytes (default 65536)")
    p.add_argument("--annotate", help="write the hot region's disassembly with sample counts here")
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        p.error("no command given (put it after --)")
    for tool in ("perf", "gdb"):
        if not shutil.which(tool):
            die("%s is missing (apt-get install %s)" % (tool, "linux-perf" if tool == "perf" else tool))

    tmp = tempfile.mkdtemp(prefix="profile_jit.")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(a.warmup)
        if proc.poll() is not None:
            die("the command ended (status %d) before sampling began; give it more work" % proc.returncode)
        data = os.path.join(tmp, "perf.data")
        r = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", "1999", "-p", str(proc.pid), "-o", data,
                            "--", "sleep", str(a.seconds)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
        if r.returncode or not os.path.exists(data):
            die("perf record failed: " + r.stderr.strip()[-300:])
        if proc.poll() is not None:
            die("the command ended while it was sampled; give it more work")
        r = subprocess.run(["perf", "script", "-i", data, "-F", "ip,dso"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, universal_newlines=True)
        by_dso = collections.Counter()
        jit = collections.Counter()
        for line in r.stdout.splitlines():
            f = line.split(None, 1)
            if not f:
                continue
            dso = f[1].strip("() ") if len(f) > 1 else "?"
            if ("perf-" in dso and dso.endswith(".map")) or dso in ("[unknown]", "?"):
                jit[int(f[0], 16)] += 1
                by_dso["JIT code (no symbols)"] += 1
            else:
                by_dso[os.path.basename(dso)] += 1
        total = sum(by_dso.values())
        if not total:
            die("no samples")
        print("samples: %d in %.1f s (%s)" % (total, a.seconds, " ".join(cmd)))
        for name, n in by_dso.most_common(6):
            print("  %5.1f%%  %s" % (100.0 * n / total, name))
        if not jit:
            return 0

        # The hot region: the densest --span window of JIT samples.
        ips = sorted(jit)
        best, lo = (0, ips[0], ips[0]), 0
        running = 0
        for hi in range(len(ips)):
            running += jit[ips[hi]]
            while ips[hi] - ips[lo] > a.span:
                running -= jit[ips[lo]]
                lo += 1
            if running > best[0]:
                best = (running, ips[lo], ips[hi])
        in_region, start, end = best
        r = subprocess.run(["gdb", "-p", str(proc.pid), "-batch", "-ex", "disassemble 0x%x,0x%x" % (start, end + 16)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        insns = []
        for line in r.stdout.splitlines():
            m = re.match(r"\s*(?:=>\s*)?0x([0-9a-f]+)(?:\s+<[^>]*>)?:\s+(.*)", line)
            if m:
                insns.append((int(m.group(1), 16), m.group(2).strip()))
        if not insns:
            die("gdb read no code at 0x%x (ptrace refused?): %s" % (start, r.stderr.strip()[-300:]))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)

    print("hot JIT region 0x%x-0x%x (%d bytes, %d instructions): %.1f%% of all samples" % (
        start, end, end - start, len(insns), 100.0 * in_region / total))
    samples_of = collections.Counter()
    count_of = collections.Counter()
    for addr, text in insns:
        k = kind(text)
        count_of[k] += 1
        samples_of[k] += jit.get(addr, 0)
    print("| kind | share of the region's samples | instructions in the region |")
    print("|---|---|---|")
    for k in KINDS:
        if count_of[k]:
            print("| %s | %.1f%% | %d (%.1f%%) |" % (k, 100.0 * samples_of[k] / in_region, count_of[k],
                                                 100.0 * count_of[k] / len(insns)))
    print("hottest instructions (samples land after the instruction that ran):")
    text_at = dict(insns)
    for addr, n in jit.most_common(10):
        if addr in text_at:
            print("  %5.1f%%  0x%x  %s" % (100.0 * n / in_region, addr, text_at[addr]))
    if a.annotate:
        with open(a.annotate, "w") as f:
            for addr, text in insns:
                f.write("%6d  0x%x  %-22s %s\n" % (jit.get(addr, 0), addr, kind(text), text))
        print("annotated disassembly: " + a.annotate)
    return 0


if __name__ == "__main__":
    sys.exit(main())
