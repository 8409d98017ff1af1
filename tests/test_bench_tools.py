#!/usr/bin/python3
"""The measuring tools' own logic (tools/profile_jit.py, tools/openblas_core.py):
the instruction kinds the JIT profile reports, and the choice of OpenBLAS kernels
the matmul peer runs on. Debian's python3 with numpy; no Vulkan."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "tools")
sys.path.insert(0, TOOLS)
import openblas_core  # noqa: E402
import profile_jit  # noqa: E402

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what)


# Lines as gdb prints lavapipe's code (Mesa 22.3 and 26.2, AT&T syntax).
KINDS = [
    ("vmulps %ymm1,%ymm17,%ymm13", "fp arithmetic"),
    ("vfmadd231ps %ymm3,%ymm2,%ymm1", "fp arithmetic"),
    ("vaddps 0x680(%rsp),%ymm4,%ymm4", "fp arithmetic"),
    ("vmovaps %ymm13,0x680(%rsp)", "stack spills/reloads"),
    ("vmovdqa 0x14a0(%rsp),%ymm11", "stack spills/reloads"),
    ("vpbroadcastd (%rsi,%rdx,4),%ymm10{%k1}", "buffer loads"),
    ("vpgatherdd (%rax,%ymm1,4),%ymm2{%k1}", "buffer loads"),
    ("vmovups (%rsi,%rdx,4),%xmm3", "buffer loads"),
    ("vpcmpeqd (%r8),%ymm2,%k1", "mask-register ops"),
    ("vmovdqa32 %ymm10,%ymm10{%k1}{z}", "mask-register ops"),
    ("vpermd %ymm10,%ymm13,%ymm17", "lane shuffles"),
    ("vpbroadcastd %ecx,%ymm2", "lane shuffles"),
    ("vpaddd %ymm31,%ymm4,%ymm0", "integer vector"),
    ("vcvtdq2ps %ymm1,%ymm1", "integer vector"),
    ("jmp    0x7f7d04d0816d", "scalar and branches"),
    ("cmp    %eax,%edi", "scalar and branches"),
    ("testb  $0x1,0x2490(%rsp,%rax,2)", "scalar and branches"),
    ("movslq %edi,%rdx", "scalar and branches"),
]
for text, want in KINDS:
    got = profile_jit.kind(text)
    check(got == want, "kind(%r) = %r, want %r" % (text, got, want))
check(all(k in profile_jit.KINDS for _, k in KINDS), "every kind is listed in KINDS")

# A command that ends before sampling: exit 1 and one line naming the problem (or the
# missing tool), never a traceback.
p = subprocess.run([sys.executable, os.path.join(TOOLS, "profile_jit.py"), "--warmup", "0.5", "--", "true"],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
check(p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1 and p.stderr.startswith("profile_jit: "),
      "profile_jit on a command that ends at once: status %d, stderr %r" % (p.returncode, p.stderr))
p = subprocess.run([sys.executable, os.path.join(TOOLS, "profile_jit.py")], stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, universal_newlines=True)
check(p.returncode == 2 and "no command" in p.stderr, "profile_jit without a command: usage error")

# OpenBLAS's core: a user's OPENBLAS_CORETYPE is kept; a fallback core on a CPU with
# AVX2 or AVX-512 is replaced by that CPU's kernels; a recognised core is kept.
saved_env = os.environ.get("OPENBLAS_CORETYPE")
saved = (openblas_core.corename, openblas_core._cpu_flags)
try:
    cases = [
        ("Prescott", {"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"}, "SkylakeX"),
        ("Prescott", {"avx2", "fma"}, "Haswell"),
        ("Nehalem", {"avx2", "fma", "avx512f"}, "Haswell"),
        ("Prescott", {"sse3"}, None),
        ("Cooperlake", {"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"}, None),
    ]
    for detected, flags, want in cases:
        os.environ.pop("OPENBLAS_CORETYPE", None)
        openblas_core.corename = lambda env=None, d=detected: os.environ.get("OPENBLAS_CORETYPE") or d
        openblas_core._cpu_flags = lambda f=flags: f
        line = openblas_core.choose()
        got = os.environ.get("OPENBLAS_CORETYPE")
        check(got == want, "choose() with %s on %s set %r, want %r (%s)" % (detected, sorted(flags), got, want, line))
        check(line.startswith("OpenBLAS core " + (want or detected)), "choose() says what runs: %r" % line)
    os.environ["OPENBLAS_CORETYPE"] = "Haswell"
    openblas_core.corename = lambda env=None: "Haswell"
    line = openblas_core.choose()
    check(os.environ["OPENBLAS_CORETYPE"] == "Haswell" and "as given" in line, "a given OPENBLAS_CORETYPE is kept")
finally:
    openblas_core.corename, openblas_core._cpu_flags = saved
    if saved_env is None:
        os.environ.pop("OPENBLAS_CORETYPE", None)
    else:
        os.environ["OPENBLAS_CORETYPE"] = saved_env

# The real probe names a core (numpy on Debian's OpenBLAS) or says what it found.
name = openblas_core.corename()
check(bool(name) and "\n" not in name, "corename() gives one name: %r" % name)
print("openblas core here: %s" % openblas_core.choose())

if failures:
    print("%d failure(s)" % len(failures))
    sys.exit(1)
print("bench tools: all checks passed")
