#!/usr/bin/python3
"""Unpacks the golden data of tests/test_hftok.c (tests/data/tokenizers/*.xz, written
by tools/make_tokenizer_cases.py and tools/make_bpe_cases.py) into a directory of the
build: each FILE.xz becomes FILE, and each NAME.folder.json.xz ({file name: text}) a
folder NAME holding those files. Standard library only.

usage: unpack_tokenizer_cases.py DATA_DIR OUT_DIR
"""
import json
import lzma
import os
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: unpack_tokenizer_cases.py DATA_DIR OUT_DIR")
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    names = sorted(n for n in os.listdir(src) if n.endswith(".xz"))
    if not names:
        sys.exit("unpack_tokenizer_cases: no .xz files in %s" % src)
    for name in names:
        with open(os.path.join(src, name), "rb") as f:
            data = lzma.decompress(f.read())
        if name.endswith(".folder.json.xz"):
            folder = os.path.join(out, name[:-len(".folder.json.xz")])
            os.makedirs(folder, exist_ok=True)
            for fn, text in json.loads(data).items():
                with open(os.path.join(folder, fn + ".tmp"), "w", encoding="utf-8") as f:
                    f.write(text)
                os.replace(os.path.join(folder, fn + ".tmp"), os.path.join(folder, fn))
            continue
        tmp = os.path.join(out, name[:-3] + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(out, name[:-3]))


if __name__ == "__main__":
    main()
