#!/usr/bin/python3
"""Writes the safetensors test files for tests/test_safetensors.c.

Usage: gen_safetensors.py DIR

Writes into DIR good files (F32, F16, BF16, I32, I64 and the other dtypes with
known values, metadata holding a JSON string, zero-size tensors, offsets listed
out of order, gaps in the data section, unaligned data, rank 0 and rank 8), one
bad file per validation rule of src/safetensors.c, and DIR/expect.txt, which
says what the reader must make of each. Standard library only.

expect.txt, one statement a line, each starting with a file name (relative to
DIR); the first statement about a file is its ok/error line, and the statements
after it are about the file as opened:
    FILE ok
    FILE error STATUS SUBSTRING...    STATUS as vkf_status_string; the message
                                      must contain SUBSTRING (the rest of the line)
    FILE count N                      number of tensors
    FILE order NAME,NAME,...          tensor names in vkf_st_at order ("-": none)
    FILE tensor NAME DTYPE SHAPE RAW [F32]
        SHAPE: dimensions joined by "x", "-" for rank 0
        RAW:   the tensor's bytes in hex, "-" when empty
        F32:   for F32/F16/BF16, the float32 bit patterns vkf_st_read_f32 must
               give, comma-separated hex, "nan" where any NaN will do
    FILE meta KEY VALUE...            metadata KEY is VALUE (the rest of the line)
    FILE nometa KEY                   metadata has no KEY
Lines starting with "#" are comments.
"""
import json
import os
import struct
import sys

DTYPE_SIZE = {"F32": 4, "F16": 2, "BF16": 2, "I32": 4, "I64": 8, "F64": 8, "I16": 2, "I8": 1, "U8": 1,
              "U16": 2, "U32": 4, "U64": 8, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}

out_dir = None
expect = []


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def f32_word(bits):
    """The expectation word for one float32 bit pattern."""
    if (bits & 0x7f800000) == 0x7f800000 and (bits & 0x7fffff):
        return "nan"
    return "0x%08x" % bits


def container(header_bytes, data, pad=True):
    """8-byte length + header (space-padded to 8 like the reference writer) + data."""
    if pad:
        header_bytes += b" " * (-len(header_bytes) % 8)
    return struct.pack("<Q", len(header_bytes)) + header_bytes + data


def write(name, blob):
    with open(os.path.join(out_dir, name), "wb") as f:
        f.write(blob)


class Tensor:
    """One tensor: name, dtype, shape, raw bytes, and expected float32 bits."""

    def __init__(self, name, dtype, shape, raw, f32=None):
        self.name, self.dtype, self.shape, self.raw, self.f32 = name, dtype, shape, raw, f32
        n = 1
        for d in shape:
            n *= d
        assert len(raw) == n * DTYPE_SIZE[dtype], name


def t_f32(name, shape, values):
    raw = b"".join(struct.pack("<f", v) for v in values)
    return Tensor(name, "F32", shape, raw, [f32_bits(struct.unpack("<f", raw[i:i + 4])[0])
                                            for i in range(0, len(raw), 4)])


def t_f16(name, shape, halves):
    """halves: raw 16-bit patterns; the expected floats come from struct.unpack('<e')."""
    raw = b"".join(struct.pack("<H", h) for h in halves)
    return Tensor(name, "F16", shape, raw, [f32_bits(struct.unpack("<e", raw[i:i + 2])[0])
                                            for i in range(0, len(raw), 2)])


def t_bf16(name, shape, patterns):
    """patterns: raw bfloat16 bit patterns, the top half of a float32."""
    raw = b"".join(struct.pack("<H", p) for p in patterns)
    return Tensor(name, "BF16", shape, raw, [p << 16 for p in patterns])


def t_int(name, dtype, fmt, shape, values):
    return Tensor(name, dtype, shape, b"".join(struct.pack(fmt, v) for v in values))


def good(fname, tensors, layout, metadata=None, header_order=None, data_size=None, pad=True, absent_meta=()):
    """Writes a good file. layout: {name: begin}, tensors placed at those offsets
    of the data section (gaps are zero bytes); header_order: names in the order
    the header lists them."""
    by_name = {t.name: t for t in tensors}
    end = max([layout[t.name] + len(t.raw) for t in tensors] + [0])
    data = bytearray(data_size if data_size is not None else end)
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    for name in header_order or [t.name for t in tensors]:
        t = by_name[name]
        b = layout[name]
        data[b:b + len(t.raw)] = t.raw
        header[name] = {"dtype": t.dtype, "shape": t.shape, "data_offsets": [b, b + len(t.raw)]}
    # ensure_ascii (the default) writes non-ASCII names as \u escapes.
    write(fname, container(json.dumps(header).encode("utf-8"), bytes(data), pad))

    expect.append("%s ok" % fname)
    expect.append("%s count %d" % (fname, len(tensors)))
    order = sorted(tensors, key=lambda t: (layout[t.name], len(t.raw), t.name.encode("utf-8")))
    expect.append("%s order %s" % (fname, ",".join(t.name for t in order) or "-"))
    for t in tensors:
        line = "%s tensor %s %s %s %s" % (fname, t.name, t.dtype, "x".join(map(str, t.shape)) or "-",
                                          t.raw.hex() or "-")
        if t.dtype in ("F32", "F16", "BF16"):
            line += " " + (",".join(f32_word(b) for b in t.f32) or "-")
        expect.append(line)
    for k, v in (metadata or {}).items():
        assert " " not in k and "\n" not in v, "expect.txt holds one statement a line"
        expect.append("%s meta %s %s" % (fname, k, v))
    for k in absent_meta:
        expect.append("%s nometa %s" % (fname, k))


def bad(fname, blob, substring, status="VKF_ERROR_BAD_MODEL"):
    write(fname, blob)
    expect.append("%s error %s %s" % (fname, status, substring))


def bad_header(fname, header, substring, data=b""):
    """A bad file from header text (str: written as is; dict: json.dumps)."""
    text = header if isinstance(header, (str, bytes)) else json.dumps(header)
    if isinstance(text, str):
        text = text.encode("utf-8")
    bad(fname, container(text, data), substring)


def entry(dtype="F32", shape=(2,), offsets=(0, 8)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


def good_files():
    # F16 specials: 0, -0, 1, 65504 (max), 2^-24 (smallest subnormal), inf, -inf,
    # NaN, and -2, 0.1 (rounded), 2^-14 (smallest normal), the largest subnormal,
    # 1/3, a NaN with another payload and a negative NaN.
    halves = [struct.unpack("<H", struct.pack("<e", v))[0]
              for v in (0.0, -0.0, 1.0, 65504.0, 2.0 ** -24, float("inf"), float("-inf"))]
    halves += [0x7e00]
    halves += [struct.unpack("<H", struct.pack("<e", v))[0]
               for v in (-2.0, 0.1, 2.0 ** -14, 1023 * 2.0 ** -24, 1.0 / 3.0)]
    halves += [0x7c01, 0xfe00, 0x0003]
    assert halves[4] == 0x0001 and halves[3] == 0x7bff
    # BF16: 1, -2.5, 3.140625, +-0, inf, -inf, NaN, the smallest subnormal (2^-133),
    # the largest finite value.
    bf = [0x3f80, 0xc020, 0x4049, 0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x0001, 0x7f7f]
    config = json.dumps({"d_model": 48, "activation": "gelu", "name": "say \"hi\"\\n", "vocab": ["a", "b"]})
    tensors = [
        t_f32("weight.f32", [2, 3], [1.5, -2.25, 0.003, 1e30, -0.0, 1e-45]),
        t_f16("half", [2, 2, 4], halves),
        t_bf16("brain", [10], bf),
        t_int("ids", "I64", "<q", [4], [0, -1, 2 ** 63 - 1, -2 ** 63]),
        t_int("small", "I32", "<i", [2, 2], [0, -1, 2 ** 31 - 1, -2 ** 31]),
        t_f32("scalar", [], [42.0]),
        t_f32("empty", [0, 4], []),
        t_f32("empty_end", [3, 0], []),
        t_f32("caf\u00e9.\u00fc", [1], [-7.0]),      # non-ASCII name, \u-escaped in the header
    ]
    layout, off = {}, 0
    for t in tensors:
        layout[t.name] = off
        off += len(t.raw)
    layout["empty"] = layout["ids"]                  # begin == end at another tensor's begin
    layout["empty_end"] = off                        # begin == end == the data section's size
    header_order = ["small", "empty_end", "caf\u00e9.\u00fc", "half", "scalar", "weight.f32", "ids", "empty",
                    "brain"]                         # not the data order
    good("good_basic.safetensors", tensors, layout, header_order=header_order,
         metadata={"format": "pt", "vkformer.config": config, "empty": "", "\u00e9t\u00e9": "\u00e7a va"},
         absent_meta=("missing", "FORMAT", "weight.f32"))

    # Gaps before, between and after tensors; data at odd offsets (unaligned);
    # rank 8; every other dtype.
    others = [t_f32("odd", [3], [1.0, 2.0, 3.0]),
              t_f32("rank8", [1, 1, 1, 1, 1, 1, 2, 1], [5.0, 6.0]),
              t_f16("odd16", [1], [0x3c00]),
              t_int("f64", "F64", "<d", [2], [0.5, -1e300]),
              t_int("i16", "I16", "<h", [2], [-32768, 32767]),
              t_int("i8", "I8", "<b", [2], [-128, 127]),
              t_int("u8", "U8", "<B", [3], [0, 128, 255]),
              t_int("u16", "U16", "<H", [1], [65535]),
              t_int("u32", "U32", "<I", [1], [4294967295]),
              t_int("u64", "U64", "<Q", [1], [2 ** 64 - 1]),
              t_int("flags", "BOOL", "<B", [2], [0, 1]),
              t_int("e4m3", "F8_E4M3", "<B", [1], [0x38]),
              t_int("e5m2", "F8_E5M2", "<B", [1], [0x3c])]
    layout, off = {}, 5
    for t in others:
        layout[t.name] = off
        off += len(t.raw) + 3
    good("good_gaps.safetensors", others, layout, data_size=off + 10, absent_meta=("format",))

    good("good_empty.safetensors", [], {}, absent_meta=("format",))
    good("good_meta_only.safetensors", [], {}, metadata={"a": "b", "json": "{\"x\": [1, 2]}"})
    good("good_unpadded.safetensors", [t_f32("x", [2], [1.0, 2.0])], {"x": 0}, pad=False)


def bad_files():
    bad("bad_empty.safetensors", b"", "shorter than 8 bytes")
    bad("bad_short.safetensors", b"\x02\x00\x00\x00\x00", "shorter than 8 bytes")
    bad("bad_header_past_end.safetensors", struct.pack("<Q", 1000) + b"{}" + b" " * 20,
        "header length 1000 (file bytes 0..8) runs past the end of the file")
    bad("bad_header_past_end_by_one.safetensors", struct.pack("<Q", 9) + b"{}      ", "runs past the end")
    bad("bad_header_limit.safetensors", struct.pack("<Q", 100000000) + b"{}      ", "runs past the end")
    bad("bad_header_limit_plus_one.safetensors", struct.pack("<Q", 100000001) + b"{}      ",
        "header length 100000001 (file bytes 0..8) exceeds the limit of 100000000 bytes")
    bad("bad_header_absurd.safetensors", struct.pack("<Q", 1 << 40) + b"{}      ", "exceeds the limit")
    bad("bad_header_absurd_max.safetensors", struct.pack("<Q", 2 ** 64 - 1) + b"{}      ", "exceeds the limit")
    bad("bad_header_zero.safetensors", struct.pack("<Q", 0) + b"{}", "not valid JSON")

    bad_header("bad_json_truncated.safetensors", '{"a": {"dtype"', "header is not valid JSON")
    bad_header("bad_json_trailing.safetensors", "{} x", "header is not valid JSON")
    bad_header("bad_json_comma.safetensors", '{"a": 1,}', "not valid JSON")
    bad_header("bad_json_utf8.safetensors", b'{"a\xff": 1}', "not valid JSON")
    bad_header("bad_json_nul_escape.safetensors", '{"a\\u0000b": {}}', "not valid JSON")
    bad("bad_json_raw_nul.safetensors", container(b"{}\x00", b"", pad=False), "not valid JSON")
    bad_header("bad_json_bigint.safetensors",
               '{"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 99999999999999999999]}}', "not valid JSON")
    bad_header("bad_json_deep.safetensors", "[" * 100000 + "]" * 100000, "not valid JSON")

    bad_header("bad_not_object.safetensors", "[1, 2]", "header is an array, not a JSON object")
    bad_header("bad_not_object_string.safetensors", '"abc"', "header is a string, not a JSON object")
    bad_header("bad_not_object_null.safetensors", "null", "header is null, not a JSON object")

    data8 = b"\0" * 8
    bad_header("bad_entry_not_object.safetensors", {"t": [1, 2]}, "tensor \"t\": entry is an array, not an object", data8)
    bad_header("bad_entry_string.safetensors", {"t": "F32"}, "tensor \"t\": entry is a string, not an object", data8)
    for field in ("dtype", "shape", "data_offsets"):
        e = entry()
        del e[field]
        bad_header("bad_missing_%s.safetensors" % field, {"t": e}, "tensor \"t\": missing \"%s\"" % field, data8)
    bad_header("bad_dtype_type.safetensors", {"t": entry(dtype=4)}, "tensor \"t\": \"dtype\" is an integer, not a string", data8)
    bad_header("bad_dtype_unknown.safetensors", {"t": entry(dtype="F33")}, "tensor \"t\": unknown dtype \"F33\"", data8)
    bad_header("bad_dtype_lowercase.safetensors", {"t": entry(dtype="f32")}, "unknown dtype \"f32\"", data8)
    bad_header("bad_dtype_empty.safetensors", {"t": entry(dtype="")}, "unknown dtype \"\"", data8)

    e = entry()
    e["shape"] = "2"
    bad_header("bad_shape_type.safetensors", {"t": e}, "tensor \"t\": \"shape\" is a string, not an array", data8)
    bad_header("bad_shape_elem_string.safetensors", {"t": entry(shape=(1, "2"))}, "tensor \"t\": shape[1] is a string", data8)
    bad_header("bad_shape_negative.safetensors", {"t": entry(shape=(-2,))}, "tensor \"t\": shape[0] is negative (-2)", data8)
    bad_header("bad_shape_real.safetensors", {"t": entry(shape=(2.0,))}, "shape[0] is a non-integer number", data8)
    bad_header("bad_shape_bool.safetensors", {"t": entry(shape=(True,))}, "shape[0] is true", data8)
    bad_header("bad_shape_null.safetensors", {"t": entry(shape=(None,))}, "shape[0] is null", data8)
    bad_header("bad_rank9.safetensors", {"t": entry(shape=[1] * 7 + [2, 1])}, "tensor \"t\": rank 9 exceeds the maximum of 8", data8)
    bad_header("bad_shape_overflow.safetensors", {"t": entry(shape=(2 ** 32, 2 ** 32))},
               "tensor \"t\": shape (4294967296, 4294967296) overflows", data8)
    bad_header("bad_shape_overflow_zero.safetensors", {"t": entry(shape=(2 ** 32, 2 ** 32, 0), offsets=(0, 0))},
               "overflows: the product of its non-zero dimensions", data8)
    bad_header("bad_shape_overflow_bytes.safetensors", {"t": entry(shape=(2 ** 61, 4))},
               "shape (2305843009213693952, 4) of F32 overflows: more than 2^64-1 bytes", data8)

    e = entry()
    e["data_offsets"] = {"begin": 0}
    bad_header("bad_offsets_type.safetensors", {"t": e}, "\"data_offsets\" is an object, not an array", data8)
    bad_header("bad_offsets_one.safetensors", {"t": entry(offsets=(0,))}, "\"data_offsets\" has 1 entries, not 2", data8)
    bad_header("bad_offsets_three.safetensors", {"t": entry(offsets=(0, 4, 8))}, "has 3 entries, not 2", data8)
    bad_header("bad_offsets_negative.safetensors", {"t": entry(offsets=(-8, 0))}, "data_offsets[0] is negative (-8)", data8)
    bad_header("bad_offsets_real.safetensors", {"t": entry(offsets=(0, 8.0))}, "data_offsets[1] is a non-integer number", data8)
    bad_header("bad_offsets_string.safetensors", {"t": entry(offsets=(0, "8"))}, "data_offsets[1] is a string", data8)
    bad_header("bad_offsets_reversed.safetensors", {"t": entry(offsets=(8, 0))}, "data_offsets [8, 0] end is before begin", data8)
    bad_header("bad_offsets_past_end.safetensors", {"t": entry(offsets=(1, 9))},
               "tensor \"t\": data_offsets [1, 9] end is past the data section (8 bytes", data8)
    bad_header("bad_offsets_huge.safetensors", {"t": entry(shape=(2 ** 60,), offsets=(0, 2 ** 62))},
               "end is past the data section", data8)
    bad_header("bad_size_mismatch.safetensors", {"t": entry(shape=(2, 2), offsets=(0, 12))},
               "tensor \"t\": data_offsets [0, 12] hold 12 bytes, but shape (2, 2) of F32 needs 16", b"\0" * 16)
    bad_header("bad_size_mismatch_dtype.safetensors", {"t": entry(dtype="F16", shape=(4,), offsets=(0, 16))},
               "hold 16 bytes, but shape (4) of F16 needs 8", b"\0" * 16)
    bad_header("bad_size_mismatch_empty.safetensors", {"t": entry(shape=(0,), offsets=(0, 4))},
               "hold 4 bytes, but shape (0) of F32 needs 0", b"\0" * 16)

    bad_header("bad_overlap.safetensors", {"b": entry(shape=(4,), offsets=(8, 24)), "a": entry(shape=(4,), offsets=(0, 16))},
               "tensors \"a\" (data_offsets [0, 16]) and \"b\" (data_offsets [8, 24]) overlap", b"\0" * 24)
    bad_header("bad_overlap_same.safetensors", {"y": entry(), "x": entry()},
               "tensors \"x\" (data_offsets [0, 8]) and \"y\" (data_offsets [0, 8]) overlap", data8)
    bad_header("bad_overlap_inside.safetensors",
               {"big": entry(shape=(8,), offsets=(0, 32)), "c": entry(offsets=(20, 28)), "d": entry(offsets=(8, 16))},
               "tensors \"big\" (data_offsets [0, 32]) and \"d\" (data_offsets [8, 16]) overlap", b"\0" * 32)
    bad_header("bad_overlap_later.safetensors",
               {"a": entry(), "b": entry(shape=(4,), offsets=(8, 24)), "c": entry(offsets=(20, 28))},
               "tensors \"b\" (data_offsets [8, 24]) and \"c\" (data_offsets [20, 28]) overlap", b"\0" * 32)

    bad_header("bad_duplicate.safetensors",
               '{"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
               '"t": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}', "duplicate key", data8)
    bad_header("bad_duplicate_field.safetensors",
               '{"t": {"dtype": "F32", "dtype": "F16", "shape": [2], "data_offsets": [0, 8]}}', "duplicate key", data8)
    bad_header("bad_duplicate_meta.safetensors", '{"__metadata__": {"a": "1", "a": "2"}}', "duplicate key")
    bad_header("bad_meta_not_object.safetensors", {"__metadata__": "x"}, "\"__metadata__\" is a string, not an object")
    bad_header("bad_meta_null.safetensors", {"__metadata__": None}, "\"__metadata__\" is null, not an object")
    bad_header("bad_meta_array.safetensors", {"__metadata__": ["a", "b"]}, "\"__metadata__\" is an array")
    bad_header("bad_meta_value.safetensors", {"__metadata__": {"a": "1", "n": 1}},
               "\"__metadata__\" key \"n\": value is an integer, not a string")
    bad_header("bad_meta_nested.safetensors", {"__metadata__": {"cfg": {"d": 1}}},
               "\"__metadata__\" key \"cfg\": value is an object, not a string")

    # Names, dtypes and keys from the file appear quoted (vkf_quote): control
    # characters escaped, never a second line or a terminal escape; long ones cut.
    forged = "a\nvkformer: model loaded\u001b[2J\u0007\r"
    bad_header("bad_name_control.safetensors", {forged: "F32"},
               'tensor "a\\nvkformer: model loaded\\x1b[2J\\x07\\r": entry is a string', data8)
    bad_header("bad_dtype_control.safetensors", {"t": entry(dtype="F32\u001b]0;owned\u0007")},
               'unknown dtype "F32\\x1b]0;owned\\x07"', data8)
    bad_header("bad_meta_key_control.safetensors", {"__metadata__": {"k\r\u202e\u0085\"\\": 1}},
               'key "k\\r\\u202e\\u0085\\\"\\\\": value is an integer')
    bad_header("bad_name_long.safetensors", {"n" * 300: "F32"}, 'tensor "' + "n" * 90 + '"...: entry is a string', data8)

    # I/O: a path that does not exist and a directory.
    if os.path.lexists(os.path.join(out_dir, "missing.safetensors")):
        os.remove(os.path.join(out_dir, "missing.safetensors"))
    expect.append("missing.safetensors error VKF_ERROR_IO No such file or directory")
    os.makedirs(os.path.join(out_dir, "dir.safetensors"), exist_ok=True)
    expect.append("dir.safetensors error VKF_ERROR_IO Is a directory")


def main():
    global out_dir
    if len(sys.argv) != 2:
        sys.exit("usage: gen_safetensors.py DIR")
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    expect.append("# written by tests/gen_safetensors.py; see its docstring for the format")
    good_files()
    bad_files()
    with open(os.path.join(out_dir, "expect.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(expect) + "\n")


if __name__ == "__main__":
    main()
