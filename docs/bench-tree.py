#!/usr/bin/env python3
"""Writes the benchmarks' source tree: FILES files of 1-64 KiB of random
bytes (sizes from a fixed seed) in folders of 100, and four of 2-8 MiB.

    docs/bench-tree.py DIR FILES

docs/syncthing-first-copy.sh --tree and docs/import-vs-cp.sh --tree use it.
"""
import os
import random
import sys

root, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(1)


def write(path, size):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(os.urandom(size))


for i in range(n):
    write(os.path.join(root, "src%03d" % (i // 100), "file%05d.dat" % i), rng.randint(1024, 64 * 1024))
for i, mib in enumerate((2, 4, 6, 8)):
    write(os.path.join(root, "assets", "big%d.bin" % i), mib << 20)
