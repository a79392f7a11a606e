#!/usr/bin/env bash
# tern capsule import against cp -r + sync of the same capsule folder, side
# by side, on this machine, in one run: a capsule whose workspace is one
# file of random bytes, or (--tree) a source tree.
#
#   docs/import-vs-cp.sh [SIZE_MIB, default 256] [RUNS, default 3]
#   docs/import-vs-cp.sh --tree [FILES, default 10000] [RUNS, default 3]
#
# Run it from a clone of tern (it builds the tern of the checkout it is in).
# Needs go, bc and, for --tree, python3. Everything goes under one temporary
# folder in $TMPDIR (default /tmp) that is removed on exit, and the node is
# killed on exit, failure included. Put TMPDIR on the filesystem to measure.
#
# Per run: the capsule folder is made offline (tern capsule new, tern
# capsule snapshot CAPSULE WORKSPACE) and synced; then, each from a synced
# page cache and a pause of 2 s,
#   cp -r      cp -r CAPSULE COPY && sync -f COPY: the folder copied and
#              made durable, as a person backs it up.
#   import     tern capsule import CAPSULE into a running tern node with no
#              peer: the capsule checked, copied into the node's store and
#              made durable, until the command returns.
# Printed per run: both times, how the import copied the blobs, and
# cp_s / import_s (the issue's goal is >= 0.8; > 1: the import is faster).
#
# --tree: FILES files of 1-64 KiB of random bytes in folders of 100, and
# four of 2-8 MiB (the tree of docs/syncthing-first-copy.sh --tree).
set -euo pipefail

SHAPE=file
if [[ ${1:-} == --tree ]]; then
  SHAPE=tree
  shift
  FILES=${1:-10000}
  RUNS=${2:-3}
  [[ $FILES =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 --tree [FILES] [RUNS] (positive integers)" >&2; exit 2; }
else
  SIZE_MIB=${1:-256}
  RUNS=${2:-3}
  [[ $SIZE_MIB =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [SIZE_MIB] [RUNS] (positive integers)" >&2; exit 2; }
fi
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "usage: RUNS is a positive integer" >&2; exit 2; }

die() { echo "import-vs-cp: $*" >&2; exit 1; }
for t in go bc; do command -v $t >/dev/null || die "$t is not installed"; done
[[ $SHAPE == file ]] || command -v python3 >/dev/null || die "python3 is not installed (it writes the tree)"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/import-vs-cp.XXXXXX")
NODE=
cleanup() {
  [[ -n $NODE ]] && { kill "$NODE" 2>/dev/null || true; wait "$NODE" 2>/dev/null || true; }
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
echo "# building tern from $root" >&2
(cd "$root" && go build -o "$TMP/tern" ./cmd/tern) || die "go build ./cmd/tern failed"
TERN=$TMP/tern

# The workspace, once for every run.
mkdir -p "$TMP/ws"
if [[ $SHAPE == tree ]]; then
  python3 "$root/docs/bench-tree.py" "$TMP/ws" "$FILES"
  echo "# shape: $FILES files of 1-64 KiB and four of 2-8 MiB" >&2
else
  head -c $((SIZE_MIB << 20)) /dev/urandom >"$TMP/ws/blob.bin"
  echo "# shape: one file of $SIZE_MIB MiB" >&2
fi

mkdir -p "$TMP/node"
TERN_HOME=$TMP/node "$TERN" node --listen /ip4/127.0.0.1/tcp/0 --no-mdns >"$TMP/node.out" 2>"$TMP/node.log" &
NODE=$!
for _ in $(seq 300); do grep -q '^api ' "$TMP/node.out" 2>/dev/null && break; sleep 0.1; done
grep -q '^api ' "$TMP/node.out" || die "the node did not start: $(cat "$TMP/node.log")"

seconds() { echo "$EPOCHREALTIME - $1" | bc; }
for run in $(seq "$RUNS"); do
  cap=$TMP/cap$run
  TERN_HOME=$TMP/offline "$TERN" -q capsule new "$cap" --name "import$run" >/dev/null
  TERN_HOME=$TMP/offline "$TERN" -q capsule snapshot "$cap" "$TMP/ws" >/dev/null
  sync; sleep 2
  start=$EPOCHREALTIME
  cp -r "$cap" "$TMP/copy$run" && sync -f "$TMP/copy$run"
  cp_s=$(seconds "$start")
  sync; sleep 2
  start=$EPOCHREALTIME
  how=$(TERN_HOME=$TMP/node "$TERN" -q capsule import "$cap" 2>&1 >/dev/null) || die "import: $how"
  import_s=$(seconds "$start")
  echo "run $run: cp -r + sync ${cp_s} s, tern capsule import ${import_s} s (${how}), ratio $(echo "scale=2; $cp_s / $import_s" | bc)"
  rm -rf "$cap" "$TMP/copy$run"
done
