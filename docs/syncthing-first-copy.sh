#!/usr/bin/env bash
# Side-by-side first copy between two local Syncthing instances and between
# two tern nodes, on this machine, in one run: of one file of random bytes,
# or (--tree) of a source tree, then a change of 100 of its files.
#
#   docs/syncthing-first-copy.sh [SIZE_MIB, default 256] [RUNS, default 3]
#   docs/syncthing-first-copy.sh --tree [FILES, default 10000] [RUNS, default 3]
#
# Syncthing v1 and v2 both work (v2's generate has no --no-default-folder
# and spells --skip-port-probing --no-port-probing, and its device ID is a
# command of its own); SYNCTHING=/path/to/syncthing picks a binary other
# than the one on PATH. v2 is not on the module proxy: build it from its
# source (git archive v2.1.3 of github.com/syncthing/syncthing) with
# go build -tags noassets -ldflags "-X github.com/syncthing/syncthing/lib/build.Version=v2.1.3"
# ./cmd/syncthing; without the version it says unknown-dev and is taken for v1.
#
# Run it from a clone of tern (any folder works: it finds the repo root from
# its own path). Needs syncthing (apt-get install syncthing), go, curl and jq.
# Everything goes under one temporary folder that is removed on exit, and
# both Syncthing processes are killed on exit, failure included.
#
# Per run, interleaved:
#   Syncthing  two fresh instances A and B on 127.0.0.1 only (no discovery,
#              relays, NAT, usage or crash reporting, upgrades), one shared
#              sendreceive folder on each, fsWatcher off, rescan once a day.
#              Timed: from moving the file (made outside the folder and
#              fsynced first) into A's folder and POST /rest/db/scan on A,
#              until B's /rest/db/status shows it all in sync and the file
#              is on B at its full size (polled every 50 ms). A's scan
#              (hashing) and B's pull are read from their StateChanged events.
#   tern       two tern node processes on 127.0.0.1, paired, as a person
#              runs them. Timed: from the file in a folder (made outside it
#              and fsynced first), through tern capsule new, tern capsule
#              import (node A takes the new, empty agent) and tern capsule
#              snapshot AGENT DIR through node A (the file becomes the
#              workspace, hashed as Syncthing's scan hashes it, and offered
#              to B as it is stored), until tern sync wait says B holds it
#              all (polled every 50 ms).
#              tern bench sync --only blob measures the same in one process
#              (through_node_seconds) beside its limits; its figures carry
#              the costs of its own 256 MiB buffers in this VM, so this
#              script times the commands instead.
# Printed per run: both times and syncthing_s / tern_s (> 1: tern is faster).
#
# --tree: FILES files of 1-64 KiB of random bytes in folders of 100, and
# four of 2-8 MiB, made (with python3) outside both folders and fsynced.
#   Syncthing  the tree moved into A's folder and scanned, until B's
#              folder is in sync and holds all the bytes; then 100 files
#              grow by 4 KiB each, scanned, until B holds the new bytes.
#   tern       two tern node processes, paired, as a person runs them:
#              tern capsule new, tern capsule import (A takes the empty
#              agent), tern capsule snapshot AGENT TREE through the node
#              (the tree becomes its workspace), tern sync wait until B
#              holds it all; then the same 100 files grow, and tern
#              capsule snapshot AGENT TREE and tern sync wait again.
set -euo pipefail

SHAPE=file
if [[ ${1:-} == --tree ]]; then
  SHAPE=tree
  shift
  FILES=${1:-10000}
  RUNS=${2:-3}
  SIZE_MIB=1 # unused
else
  SIZE_MIB=${1:-256}
  RUNS=${2:-3}
fi
SIZE=$((SIZE_MIB * 1024 * 1024))
SYNCTHING=${SYNCTHING:-syncthing}
CHANGED=100 # files a --tree run changes after its first copy
FOLDER_ID=bench
FILE=blob.bin
POLL_S=0.05     # how often B's status is polled while the copy runs
TIMEOUT_S=${TIMEOUT_S:-900} # give up on one copy after this long

die() { echo "syncthing-first-copy: $*" >&2; exit 1; }
log() { echo "# $*" >&2; }

# --- setup and cleanup --------------------------------------------------

check_tools() {
  command -v "$SYNCTHING" >/dev/null ||
    die "syncthing is not installed: run 'apt-get install syncthing' (Debian) and try again"
  local t
  for t in go curl jq awk; do
    command -v "$t" >/dev/null || die "$t is not installed"
  done
  if [[ $SHAPE == tree ]]; then
    command -v python3 >/dev/null || die "python3 is not installed (it writes the tree)"
    [[ $FILES =~ ^[1-9][0-9]*$ && $FILES -ge $CHANGED && $RUNS =~ ^[1-9][0-9]*$ ]] ||
      die "usage: $0 --tree [FILES (at least $CHANGED)] [RUNS] (positive integers)"
  fi
  [[ $SIZE_MIB =~ ^[1-9][0-9]*$ && $RUNS =~ ^[1-9][0-9]*$ ]] ||
    die "usage: $0 [SIZE_MIB] [RUNS] | $0 --tree [FILES] [RUNS] (positive integers)"
  ST_V2=false
  [[ $("$SYNCTHING" --version) == "syncthing v2."* ]] && ST_V2=true
  return 0
}

PIDS=()
TMP=
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  PIDS=()
  [[ -n $TMP ]] && rm -rf "$TMP"
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# build_tern builds the tern binary of this checkout into $TMP.
build_tern() {
  local root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  log "building tern from $root"
  (cd "$root" && go build -o "$TMP/tern" ./cmd/tern) || die "go build ./cmd/tern failed"
}

# free_port VAR: sets VAR to a TCP port on 127.0.0.1 that nothing listens on
# and that this script has not handed out yet.
USED_PORTS=" "
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 40000))
    [[ $USED_PORTS == *" $p "* ]] && continue
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      USED_PORTS+="$p "
      printf -v "$1" %s "$p"
      return
    fi
  done
}

# --- one Syncthing instance ----------------------------------------------
# An instance is described by shell variables named <NAME>_HOME, _GUI, _PORT,
# _KEY, _ID, _DIR, _PID (NAME is A or B).

# st_api NAME METHOD PATH [JSON]: one REST call to instance NAME.
st_api() {
  local gui key
  gui=${1}_GUI key=${1}_KEY
  curl -fsS -X "$2" -H "X-API-Key: ${!key}" ${4:+-H 'Content-Type: application/json' -d "$4"} \
    "http://127.0.0.1:${!gui}$3"
}

# set_option FILE NAME VALUE: sets <NAME>VALUE</NAME> in a config.xml.
set_option() {
  grep -q "<$2>" "$1" || die "config.xml has no <$2>"
  sed -i "s|<$2>[^<]*</$2>|<$2>$3</$2>|" "$1"
}

# st_generate NAME DIR: makes the home, keys and a config that talks to
# 127.0.0.1 only, before the instance ever starts (so it never calls out).
st_generate() {
  local name=$1 home=$2/home cfg port=${1}_PORT
  mkdir -p "$home" "$2/folder"
  # v2 makes no default folder and has no flag for it, and its
  # --skip-port-probing is --no-port-probing.
  local flags=(--no-default-folder --skip-port-probing)
  $ST_V2 && flags=(--no-port-probing)
  STNODEFAULTFOLDER=1 "$SYNCTHING" generate --home "$home" "${flags[@]}" >"$2/generate.log" 2>&1 ||
    die "syncthing generate failed: $(cat "$2/generate.log")"
  cfg=$home/config.xml
  set_option "$cfg" listenAddress "tcp://127.0.0.1:${!port}"
  set_option "$cfg" globalAnnounceEnabled false
  set_option "$cfg" localAnnounceEnabled false
  set_option "$cfg" relaysEnabled false
  set_option "$cfg" natEnabled false
  set_option "$cfg" urAccepted -1             # usage reporting declined
  set_option "$cfg" crashReportingEnabled false
  set_option "$cfg" autoUpgradeIntervalH 0
  set_option "$cfg" startBrowser false
  set_option "$cfg" setLowPriority false      # same priority as tern
  set_option "$cfg" reconnectionIntervalS 1   # connect as soon as both know each other
  eval "${name}_HOME=\$home ${name}_DIR=\$2/folder"
  if $ST_V2; then
    eval "${name}_ID=\$(\"\$SYNCTHING\" device-id --home \"\$home\")"
  else
    eval "${name}_ID=\$(\"\$SYNCTHING\" serve --home \"\$home\" --device-id)"
  fi
}

# st_start NAME: starts the instance in the background. STMONITORED=yes runs
# Syncthing itself without its monitor parent (which --no-restart does not
# drop in 1.19), so the pid that is killed and waited for is the one that
# serves. TZ=UTC makes its event times end in Z, which jq parses.
st_start() {
  local home=${1}_HOME gui=${1}_GUI key=${1}_KEY
  STMONITORED=yes TZ=UTC STNODEFAULTFOLDER=1 "$SYNCTHING" serve --home "${!home}" --no-browser --no-restart --no-upgrade \
    --gui-address="http://127.0.0.1:${!gui}" --gui-apikey="${!key}" \
    >"${!home}/syncthing.log" 2>&1 &
  PIDS+=($!)
  eval "${1}_PID=$!"
}

# wait_for SECONDS WHAT COMMAND...: retries COMMAND every 100 ms.
wait_for() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "timed out waiting for $what"
    sleep 0.1
  done
}

# st_configure NAME PEER: adds PEER as a device at its static address and the
# shared folder, through the REST config API.
st_configure() {
  local peer_id=${2}_ID peer_port=${2}_PORT dir=${1}_DIR me=${1}_ID
  st_api "$1" PUT "/rest/config/devices/${!peer_id}" \
    "{\"deviceID\":\"${!peer_id}\",\"name\":\"$2\",\"addresses\":[\"tcp://127.0.0.1:${!peer_port}\"]}" >/dev/null
  st_api "$1" PUT "/rest/config/folders/$FOLDER_ID" "$(jq -n --arg id "$FOLDER_ID" --arg path "${!dir}" \
    --arg me "${!me}" --arg peer "${!peer_id}" '{id:$id, label:$id, path:$path, type:"sendreceive",
      fsWatcherEnabled:false, rescanIntervalS:86400,
      devices:[{deviceID:$me}, {deviceID:$peer}]}')" >/dev/null
}

connected() { st_api "$1" GET /rest/system/connections | jq -e --arg p "$2" '.connections[$p].connected' ; }
folder_idle() { st_api "$1" GET "/rest/db/status?folder=$FOLDER_ID" | jq -e '.state == "idle"'; }

# st_check_offline NAME: the options that keep it on 127.0.0.1 took effect.
st_check_offline() {
  st_api "$1" GET /rest/config/options | jq -e '
    .globalAnnounceEnabled == false and .localAnnounceEnabled == false and
    .relaysEnabled == false and .natEnabled == false and .urAccepted < 0 and
    .crashReportingEnabled == false and .autoUpgradeIntervalH == 0' >/dev/null ||
    die "instance $1 did not take its offline options"
}

# st_pair_up RUNDIR: two fresh instances A and B, connected, folder idle.
st_pair_up() {
  free_port A_GUI; free_port A_PORT; free_port B_GUI; free_port B_PORT
  # shellcheck disable=SC2034 # read through ${!key} in st_api and st_start
  A_KEY=bench-key-a-$RANDOM$RANDOM B_KEY=bench-key-b-$RANDOM$RANDOM
  st_generate A "$1/a"
  st_generate B "$1/b"
  st_start A
  st_start B
  wait_for 30 "syncthing A's REST API" st_api A GET /rest/system/ping
  wait_for 30 "syncthing B's REST API" st_api B GET /rest/system/ping
  st_check_offline A
  st_check_offline B
  st_configure A B
  st_configure B A
  wait_for 60 "A and B to connect" connected A "$B_ID"
  wait_for 60 "B to see A" connected B "$A_ID"
  st_warm_up
}

# st_warm_up: a small file through the folder, untimed, so that the timed copy
# starts on a connection whose folder exchange is over (adding the folder
# can make them reconnect) and with both folders idle.
st_warm_up() {
  echo "warm-up" >"$A_DIR/warm-up.txt"
  st_api A POST "/rest/db/scan?folder=$FOLDER_ID" >/dev/null
  wait_for 60 "the warm-up file on B" test -f "$B_DIR/warm-up.txt"
  wait_for 60 "A's folder to be idle" folder_idle A
  wait_for 60 "B's folder to be idle" folder_idle B
}

# st_stop: kills both instances of this run.
st_stop() {
  kill "$A_PID" "$B_PID" 2>/dev/null || true
  wait "$A_PID" "$B_PID" 2>/dev/null || true
  PIDS=()
}

# last_event_id NAME: the id of the newest event the instance has buffered.
last_event_id() { st_api "$1" GET "/rest/events?since=0&timeout=1" | jq 'map(.id) | max // 0'; }

# busy_span NAME SINCE: prints "FROM TO" (Unix seconds): the folder's first
# leaving "idle" after event SINCE and its last return to "idle", from its
# StateChanged event times (their "duration" field is wrong in 1.19). On A
# that is the scan (hashing), on B the pull (index handling, fetching,
# writing, fsync, rename).
busy_span() {
  st_api "$1" GET "/rest/events?since=$2&timeout=1" | jq -r --arg f "$FOLDER_ID" '
    def secs: capture("^(?<s>[^.]+)(?<f>[.][0-9]+)?Z$") | (.s + "Z" | fromdateiso8601) + ((.f // "0") | tonumber);
    [.[] | select(.type == "StateChanged" and .data.folder == $f)] as $ev
    | "\([$ev[] | select(.data.from == "idle")][0].time | secs) \([$ev[] | select(.data.to == "idle")][-1].time | secs)"'
}

# b_has_it: B's database and disk both hold the whole file.
b_has_it() {
  local st
  # B writes a temporary file and renames it at the end: until the name
  # appears there is nothing to ask B (and this test forks nothing).
  [[ -f $B_DIR/$FILE ]] || return 1
  st=$(st_api B GET "/rest/db/status?folder=$FOLDER_ID") || return 1
  jq -e --argjson size "$SIZE" '.needFiles == 0 and .globalBytes >= $size and .inSyncBytes == .globalBytes' \
    <<<"$st" >/dev/null || return 1
  [[ $(stat -c %s "$B_DIR/$FILE") -eq $SIZE ]]
}

# syncthing_run RUNDIR: sets ST_RESULT to "total_s scan_s pull_s idle_s" of one
# first copy. It runs in the main shell (not in $(...)) so that the
# instances' pids reach the EXIT trap.
syncthing_run() {
  local dir=$1 src t0 t1 a_ev b_ev
  st_pair_up "$dir"
  # The file is made and fsynced outside the folder, so that the timed part
  # starts with its bytes in the page cache and none of them dirty.
  src=$dir/$FILE
  head -c "$SIZE" /dev/urandom >"$src"
  sync "$src"
  a_ev=$(last_event_id A) b_ev=$(last_event_id B)

  local deadline=$((SECONDS + TIMEOUT_S))
  t0=$EPOCHREALTIME
  mv "$src" "$A_DIR/$FILE"   # same file system: a rename
  st_api A POST "/rest/db/scan?folder=$FOLDER_ID" >/dev/null
  until b_has_it; do
    ((SECONDS < deadline)) || die "syncthing: B did not hold the file after ${TIMEOUT_S}s"
    sleep "$POLL_S"
  done
  t1=$EPOCHREALTIME

  # Seconds from t0: total (polled), A's scan, B's pull, B back to idle.
  ST_RESULT=$(awk -v t0="$t0" -v t1="$t1" -v a="$(busy_span A "$a_ev")" -v b="$(busy_span B "$b_ev")" 'BEGIN {
    split(a, as, " "); split(b, bs, " ")
    printf "%.3f %.3f %.3f %.3f", t1 - t0, as[2] - as[1], bs[2] - bs[1], bs[2] - t0 }')
  st_stop
}

# --- tern ----------------------------------------------------------------

# tern_node NAME DIR PORT: starts a tern node with home DIR listening on
# 127.0.0.1:PORT, and waits until its API answers.
tern_node() {
  mkdir -p "$2"
  TERN_HOME=$2 "$TMP/tern" node --listen "/ip4/127.0.0.1/tcp/$3" --no-mdns >"$2/node.out" 2>"$2/node.log" &
  PIDS+=($!)
  eval "${1}_PID=$!"
  wait_for 30 "tern node $1" grep -q '^api ' "$2/node.out"
}

# tern_at HOME ARGS...: tern with that home, quiet.
tern_at() { TERN_HOME=$1 "$TMP/tern" -q "${@:2}"; }

# tern_pair RUNDIR: starts tern nodes a and b (homes RUNDIR/a and
# RUNDIR/b) and pairs them; tern_unpair stops them.
tern_pair() {
  local pa pb ida idb
  free_port pa; free_port pb
  tern_node TA "$1/a" "$pa"
  tern_node TB "$1/b" "$pb"
  ida=$(tern_at "$1/a" id --json | jq -r .peer_id)
  idb=$(tern_at "$1/b" id --json | jq -r .peer_id)
  tern_at "$1/a" peer add "$idb" "/ip4/127.0.0.1/tcp/$pb" --name b >/dev/null
  tern_at "$1/b" peer add "$ida" "/ip4/127.0.0.1/tcp/$pa" --name a >/dev/null
}

tern_unpair() {
  kill "$TA_PID" "$TB_PID" 2>/dev/null || true
  wait "$TA_PID" "$TB_PID" 2>/dev/null || true
  PIDS=()
}

# now: Unix seconds with microseconds.
now() { echo "$EPOCHREALTIME"; }

# tern_run RUNDIR: sets TERN_RESULT to "total_s new_import_s snapshot_s
# to_held_s".
tern_run() {
  local dir=$1 agent t0 t1 t2 t3
  mkdir -p "$dir/ws"
  head -c "$SIZE" /dev/urandom >"$dir/ws/$FILE"
  sync "$dir/ws/$FILE"
  tern_pair "$dir"
  t0=$(now) # the file is in its folder
  agent=$(tern_at "$dir/a" capsule new "$dir/agent" --name file)
  tern_at "$dir/a" capsule import "$dir/agent" >/dev/null
  t1=$(now)
  tern_at "$dir/a" capsule snapshot "$agent" "$dir/ws" >/dev/null
  t2=$(now)
  tern_at "$dir/a" sync wait "$agent" --peer b --timeout "${TIMEOUT_S}s" >/dev/null ||
    die "tern: b did not hold the file after ${TIMEOUT_S}s: $(tail -5 "$dir/a/node.log")"
  t3=$(now)
  tern_unpair
  TERN_RESULT=$(awk -v t0="$t0" -v t1="$t1" -v t2="$t2" -v t3="$t3" 'BEGIN {
    printf "%.3f %.3f %.3f %.3f", t3 - t0, t1 - t0, t2 - t1, t3 - t2 }')
}

# --- report --------------------------------------------------------------

# report RUN ST_S SCAN_S PULL_S IDLE_S TERN_S NEW_S SNAP_S HELD_S: one line.
report() {
  awk -v run="$1" -v st="$2" -v scan="$3" -v pull="$4" -v idle="$5" -v tern="$6" -v new="$7" -v snap="$8" -v held="$9" 'BEGIN {
    printf "run %d: syncthing %.2f s (A scan %.2f, B pull %.2f, B idle at %.2f) | tern %.2f s (new and import %.2f, snapshot %.2f, to held %.2f) | syncthing/tern %.2f\n",
           run, st, scan, pull, idle, tern, new, snap, held, st / tern
  }'
}

# median V...: the middle value (the mean of the two middle ones if even).
median() {
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# --- the --tree shape ----------------------------------------------------

# make_tree DIR: FILES files of 1-64 KiB (random sizes and bytes) in
# folders of 100, and four of 2-8 MiB, fsynced.
make_tree() {
  python3 "$(dirname "${BASH_SOURCE[0]}")/bench-tree.py" "$1" "$FILES"
  sync -f "$1"
}

# grow_files DIR: appends 4 KiB of random bytes to each of the first
# $CHANGED files of the tree (the same files on both sides).
grow_files() {
  python3 - "$1" "$CHANGED" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    with open(os.path.join(root, "src%03d" % (i // 100), "file%05d.dat" % i), "ab") as f:
        f.write(os.urandom(4096))
PY
  sync -f "$1"
}

# tree_files DIR: how many files are under DIR (Syncthing's .stfolder aside).
tree_files() { find "$1" -name .stfolder -prune -o -type f -print | wc -l; }

# b_global_bytes: the bytes of B's global state (files, and 128 for each
# folder).
b_global_bytes() { st_api B GET "/rest/db/status?folder=$FOLDER_ID" | jq .globalBytes; }

# b_in_sync FILES BYTES: B's folder needs nothing, its global state holds
# FILES files and at least BYTES bytes, and B holds them all.
b_in_sync() {
  st_api B GET "/rest/db/status?folder=$FOLDER_ID" |
    jq -e --argjson files "$1" --argjson bytes "$2" \
      '.needFiles == 0 and .globalFiles == $files and .globalBytes >= $bytes and .inSyncBytes == .globalBytes' >/dev/null
}

# st_await_b FILES BYTES WHAT: polls until b_in_sync FILES BYTES.
st_await_b() {
  local deadline=$((SECONDS + TIMEOUT_S))
  until b_in_sync "$1" "$2"; do
    ((SECONDS < deadline)) || die "syncthing: B did not hold $3 ($1 files, $2 bytes) after ${TIMEOUT_S}s; its folder status: $(st_api B GET "/rest/db/status?folder=$FOLDER_ID" | jq -c '{needFiles, globalFiles, globalBytes, inSyncBytes, state}')"
    sleep "$POLL_S"
  done
}

# syncthing_tree_run RUNDIR TREE: sets ST_RESULT to "first_s change_s".
syncthing_tree_run() {
  local dir=$1 t0 t1 t2 t3 files bytes
  st_pair_up "$dir"
  files=$(($(tree_files "$2") + $(tree_files "$A_DIR")))
  bytes=$(($(b_global_bytes) + $(find "$2" -type f -printf '%s\n' | awk '{ t += $1 } END { print t + 0 }')))
  t0=$EPOCHREALTIME
  mv "$2" "$A_DIR/tree" # same file system: a rename
  st_api A POST "/rest/db/scan?folder=$FOLDER_ID" >/dev/null
  st_await_b "$files" "$bytes" "the tree"
  t1=$EPOCHREALTIME
  wait_for 60 "A's folder to be idle" folder_idle A
  bytes=$(($(b_global_bytes) + CHANGED * 4096))
  grow_files "$A_DIR/tree"
  t2=$EPOCHREALTIME
  st_api A POST "/rest/db/scan?folder=$FOLDER_ID" >/dev/null
  st_await_b "$files" "$bytes" "the changed files"
  t3=$EPOCHREALTIME
  ST_RESULT=$(awk -v t0="$t0" -v t1="$t1" -v t2="$t2" -v t3="$t3" 'BEGIN { printf "%.3f %.3f", t1 - t0, t3 - t2 }')
  st_stop
}

# tern_tree_run RUNDIR TREE: sets TERN_RESULT to "first_s change_s new_s
# import_s snapshot_s wait_s change_snapshot_s change_wait_s".
tern_tree_run() {
  local dir=$1 tree=$2 agent t0 t1 t2 t3 t4 t5 t6 t7
  tern_pair "$dir"
  t0=$(now)
  agent=$(tern_at "$dir/a" capsule new "$dir/agent" --name tree)
  t1=$(now)
  tern_at "$dir/a" capsule import "$dir/agent" >/dev/null
  t2=$(now)
  tern_at "$dir/a" capsule snapshot "$agent" "$tree" >/dev/null
  t3=$(now)
  tern_at "$dir/a" sync wait "$agent" --peer b --timeout "${TIMEOUT_S}s" >/dev/null ||
    die "tern: b did not hold the tree after ${TIMEOUT_S}s: $(tail -5 "$dir/a/node.log")"
  t4=$(now)
  grow_files "$tree"
  t5=$(now)
  tern_at "$dir/a" capsule snapshot "$agent" "$tree" >/dev/null
  t6=$(now)
  tern_at "$dir/a" sync wait "$agent" --peer b --timeout "${TIMEOUT_S}s" >/dev/null ||
    die "tern: b did not hold the changed files after ${TIMEOUT_S}s"
  t7=$(now)
  tern_unpair
  TERN_RESULT=$(awk -v t0="$t0" -v t1="$t1" -v t2="$t2" -v t3="$t3" -v t4="$t4" -v t5="$t5" -v t6="$t6" -v t7="$t7" 'BEGIN {
    printf "%.3f %.3f %.3f %.3f %.3f %.3f %.3f %.3f", t4 - t0, t7 - t5, t1 - t0, t2 - t1, t3 - t2, t4 - t3, t6 - t5, t7 - t6 }')
}

# tree_main: the --tree runs.
tree_main() {
  echo "# $FILES files of 1-64 KiB and four of 2-8 MiB, $RUNS runs, temp folder $TMP ($(df -P "$TMP" | awk 'NR==2 { print $1 }'))"
  echo "# first copy: from the tree in a folder until the peer holds it; change: $CHANGED files grow by 4 KiB, until the peer holds them"
  echo "# syncthing: moved into A's folder, explicit scans (fsWatcher off), B polled every 50 ms"
  echo "# tern: capsule new + import on A + snapshot AGENT TREE through the node + sync wait; change: snapshot + sync wait"
  local run st_first=() st_change=() t_first=() t_change=()
  for ((run = 1; run <= RUNS; run++)); do
    log "run $run: making the trees"
    make_tree "$TMP/tree-st$run"
    cp -a "$TMP/tree-st$run" "$TMP/tree-tern$run"
    sync -f "$TMP"
    log "run $run: syncthing"
    syncthing_tree_run "$TMP/st$run" "$TMP/tree-st$run"
    rm -rf "$TMP/st$run"
    log "run $run: tern"
    tern_tree_run "$TMP/tern$run" "$TMP/tree-tern$run"
    rm -rf "$TMP/tern$run" "$TMP/tree-tern$run"
    # shellcheck disable=SC2086 # word splitting of the two results is meant
    set -- $ST_RESULT $TERN_RESULT
    printf 'run %d: first copy: syncthing %.2f s | tern %.2f s (new %.2f, import %.2f, snapshot %.2f, to held %.2f) | syncthing/tern %.2f\n' \
      "$run" "$1" "$3" "$5" "$6" "$7" "$8" "$(awk -v a="$1" -v b="$3" 'BEGIN { print a / b }')"
    printf 'run %d: change of %d files: syncthing %.2f s | tern %.2f s (snapshot %.2f, to held %.2f) | syncthing/tern %.2f\n' \
      "$run" "$CHANGED" "$2" "$4" "$9" "${10}" "$(awk -v a="$2" -v b="$4" 'BEGIN { print a / b }')"
    st_first+=("$1") st_change+=("$2") t_first+=("$3") t_change+=("$4")
  done
  printf 'median of %d: first copy: syncthing %.2f s | tern %.2f s; change: syncthing %.2f s | tern %.2f s\n' "$RUNS" \
    "$(median "${st_first[@]}")" "$(median "${t_first[@]}")" "$(median "${st_change[@]}")" "$(median "${t_change[@]}")"
}

main() {
  check_tools
  TMP=$(mktemp -d "${TMPDIR:-/tmp}/syncthing-first-copy.XXXXXX")
  build_tern
  echo "# $("$SYNCTHING" --version)"
  echo "# tern $(git -C "$(dirname "${BASH_SOURCE[0]}")" describe --always --dirty 2>/dev/null || echo '?'), $(go version | cut -d' ' -f3)"
  if [[ $SHAPE == tree ]]; then
    tree_main
    return
  fi
  echo "# $SIZE_MIB MiB of random bytes, $RUNS runs, temp folder $TMP ($(df -P "$TMP" | awk 'NR==2 { print $1 }'))"
  echo "# syncthing: fsWatcher off, explicit scan; time from the move into A's folder until B holds it (50 ms polls);"
  echo "#   A scan = A's folder busy (hashing), B pull = B's folder busy, B idle at = B's own end time from the move"
  echo "# tern: two node processes; time from the file in a folder through tern capsule new + import on A + tern capsule"
  echo "#   snapshot AGENT DIR through node A, until tern sync wait says B holds it (50 ms polls)"
  local run st_all=() tern_all=() ratio_all=()
  for ((run = 1; run <= RUNS; run++)); do
    log "run $run: syncthing"
    syncthing_run "$TMP/st$run"
    rm -rf "$TMP/st$run"
    log "run $run: tern"
    tern_run "$TMP/tern$run"
    rm -rf "$TMP/tern$run"
    # shellcheck disable=SC2086 # word splitting of the two results is meant
    report "$run" $ST_RESULT $TERN_RESULT
    st_all+=("${ST_RESULT%% *}") tern_all+=("${TERN_RESULT%% *}")
    ratio_all+=("$(awk -v a="${ST_RESULT%% *}" -v b="${TERN_RESULT%% *}" 'BEGIN { print a / b }')")
  done
  printf 'median of %d: syncthing %.2f s | tern %.2f s | syncthing/tern %.2f\n' "$RUNS" \
    "$(median "${st_all[@]}")" "$(median "${tern_all[@]}")" "$(median "${ratio_all[@]}")"
}

main "$@"
