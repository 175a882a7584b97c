#!/usr/bin/env python3
# Writes the seed corpus of io_safetensors_fuzz (tests/fuzz/corpus/io_safetensors/): small valid files
# and a few near-misses. Re-run after changing it; the outputs are committed.
import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "io_safetensors")


def file_bytes(header, data=b"", pad=True, length=None):
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    n = len(text) if length is None else length
    return struct.pack("<Q", n) + text + data


def write(name, blob):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(blob)


def main():
    os.makedirs(OUT, exist_ok=True)
    write("valid_two_tensors", file_bytes({
        "__metadata__": {"format": "pt"},
        "a.weight": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
        "b.bias": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]},
    }, bytes(range(22))))
    write("empty_header", file_bytes({}))
    write("metadata_only", file_bytes({"__metadata__": {"k": "v", "format": "np"}}))
    dtypes = [("F32", 4), ("BF16", 2), ("F16", 2), ("I32", 4), ("I64", 8), ("U8", 1), ("I8", 1), ("BOOL", 1)]
    header, off = {}, 0
    for i, (dt, size) in enumerate(dtypes):
        shape = [[], [0], [2], [1, 2]][i % 4]
        n = size * (0 if 0 in shape else (shape[0] * (shape[1] if len(shape) > 1 else 1) if shape else 1))
        header[f"t{i}.{dt.lower()}"] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    write("all_dtypes", file_bytes(header, b"\x01" * off))
    write("overlapping", file_bytes({
        "x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "y": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
    }, b"\0" * 12))
    write("unsupported_dtype", file_bytes({"x": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}}, b"\0" * 8))
    write("length_past_end", file_bytes({"x": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, b"\0",
                                        length=4096))
    write("unpadded", file_bytes({"x": {"dtype": "I8", "shape": [3], "data_offsets": [0, 3]}}, b"abc", pad=False))


if __name__ == "__main__":
    main()
