#!/usr/bin/env python3
"""An independent reader of tern capsule format v1, for its test vectors.

    python3 check.py [VECTORS_DIR [GOLDEN_DIR]]

It shares no code with tern: it re-derives every peer ID, event id,
signature, digest and verdict from the bytes and the rules of
docs/FORMAT.md, with Python 3.11's standard library only (ed25519,
base58btc, base32, CIDs, peer IDs and RFC 8785 canonical JSON are written
out below), and for each journal vector what a reader reads of its journal
(the readable and quarantined events and the version vector). It compares
each with VECTORS_DIR/expected.json and, when GOLDEN_DIR is given, the
golden capsule's verdict with GOLDEN_DIR/expected.json. It prints one line
per vector and exits 1 naming every vector whose result differs, 0 when all
agree.
"""

import base64
import functools
import hashlib
import io
import json
import math
import os
import re
import sys
import tarfile
from decimal import Decimal

# ---------------------------------------------------------------------------
# ed25519 (RFC 8032, section 5.1), after the RFC's reference code.

P = 2**255 - 19
L = 2**252 + 27742317777372353535851937790883648493
D = -121665 * pow(121666, P - 2, P) % P
SQRT_M1 = pow(2, (P - 1) // 4, P)


def _recover_x(y, sign):
    if y >= P:
        return None
    x2 = (y * y - 1) * pow(D * y * y + 1, P - 2, P)
    if x2 == 0:
        return None if sign else 0
    x = pow(x2, (P + 3) // 8, P)
    if (x * x - x2) % P != 0:
        x = x * SQRT_M1 % P
    if (x * x - x2) % P != 0:
        return None
    if (x & 1) != sign:
        x = P - x
    return x


_GY = 4 * pow(5, P - 2, P) % P
_GX = _recover_x(_GY, 0)
G = (_GX, _GY, 1, _GX * _GY % P)
IDENTITY = (0, 1, 1, 0)


def _add(p, q):
    a = (p[1] - p[0]) * (q[1] - q[0]) % P
    b = (p[1] + p[0]) * (q[1] + q[0]) % P
    c = 2 * p[3] * q[3] * D % P
    d = 2 * p[2] * q[2] % P
    e, f, g, h = b - a, d - c, d + c, b + a
    return (e * f % P, g * h % P, f * g % P, e * h % P)


def _mul(s, p):
    q = IDENTITY
    while s > 0:
        if s & 1:
            q = _add(q, p)
        p = _add(p, p)
        s >>= 1
    return q


def _compress(p):
    zinv = pow(p[2], P - 2, P)
    x, y = p[0] * zinv % P, p[1] * zinv % P
    return int.to_bytes(y | ((x & 1) << 255), 32, "little")


def _decompress(b):
    if len(b) != 32:
        return None
    y = int.from_bytes(b, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    x = _recover_x(y, sign)
    if x is None:
        return None
    return (x, y, 1, x * y % P)


def _hash_int(*parts):
    return int.from_bytes(hashlib.sha512(b"".join(parts)).digest(), "little")


def _expand(seed):
    h = hashlib.sha512(seed).digest()
    a = int.from_bytes(h[:32], "little")
    a &= (1 << 254) - 8
    a |= 1 << 254
    return a, h[32:]


def ed25519_public(seed):
    a, _ = _expand(seed)
    return _compress(_mul(a, G))


def ed25519_sign(seed, msg):
    a, prefix = _expand(seed)
    pub = _compress(_mul(a, G))
    r = _hash_int(prefix, msg) % L
    rs = _compress(_mul(r, G))
    h = _hash_int(rs, pub, msg) % L
    s = (r + h * a) % L
    return rs + int.to_bytes(s, 32, "little")


@functools.lru_cache(maxsize=4096)
def ed25519_verify(pub, msg, sig):
    """[s]B = R + [h]A, with R compared as the signature's bytes and s < L."""
    if len(pub) != 32 or len(sig) != 64:
        return False
    a = _decompress(pub)
    if a is None:
        return False
    s = int.from_bytes(sig[32:], "little")
    if s >= L:
        return False
    h = _hash_int(sig[:32], pub, msg) % L
    minus_ha = _mul(h, ((P - a[0]) % P, a[1], a[2], (P - a[3]) % P))
    return _compress(_add(_mul(s, G), minus_ha)) == sig[:32]


# ---------------------------------------------------------------------------
# base58btc, base32, varints, CIDs, peer IDs.

B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def b58encode(b):
    n = int.from_bytes(b, "big")
    out = ""
    while n:
        n, r = divmod(n, 58)
        out = B58[r] + out
    return "1" * (len(b) - len(b.lstrip(b"\0"))) + out


def b58decode(s):
    n = 0
    for ch in s:
        i = B58.find(ch)
        if i < 0:
            raise ValueError("not base58btc: %r" % ch)
        n = n * 58 + i
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return b"\0" * (len(s) - len(s.lstrip("1"))) + body


def b32encode(b):
    """RFC 4648 base32, lower case, no padding (multibase 'b' without the 'b')."""
    return base64.b32encode(b).decode().lower().rstrip("=")


def b32decode(s):
    if s != s.lower() and s != s.upper():
        raise ValueError("mixed case base32")
    return base64.b32decode(s.upper() + "=" * (-len(s) % 8))


def varint(b, i):
    """An unsigned LEB128 varint at b[i], minimal; returns (value, next i)."""
    n = shift = 0
    start = i
    while True:
        if i >= len(b) or i - start >= 9:
            raise ValueError("bad varint")
        c = b[i]
        i += 1
        n |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            if c == 0 and i - start > 1:
                raise ValueError("varint not minimal")
            return n, i


def uvarint(n):
    out = b""
    while n >= 0x80:
        out += bytes([n & 0x7F | 0x80])
        n >>= 7
    return out + bytes([n])


CODEC_RAW, CODEC_JSON, SHA2_256 = 0x55, 0x0200, 0x12


def cid_bytes(codec, digest):
    return uvarint(1) + uvarint(codec) + bytes([SHA2_256, 32]) + digest


def cid_string(codec, data):
    """The CIDv1 of data (sha2-256) as writers spell it: 'b' + base32."""
    return "b" + b32encode(cid_bytes(codec, hashlib.sha256(data).digest()))


def multibase_decode(s):
    """The multibase encodings a reader may meet in a blob CID (writers only
    write 'b'); anything else raises."""
    if not s:
        raise ValueError("empty")
    p, body = s[0], s[1:]
    if p in "bB":
        return b32decode(body)
    if p in "fF":
        return bytes.fromhex(body)
    if p == "z":
        return b58decode(body)
    if p in "kK":
        n = int(body.lower(), 36)
        zeros = len(body) - len(body.lstrip("0"))
        return b"\0" * zeros + n.to_bytes((n.bit_length() + 7) // 8, "big")
    if p in "mM":
        return base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    if p in "uU":
        return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    raise ValueError("unknown multibase prefix %r" % p)


def parse_cid(raw, codec):
    """The sha256 digest of a CIDv1 with the given codec and a sha2-256
    multihash, from its bytes."""
    v, i = varint(raw, 0)
    c, i = varint(raw, i)
    mh, i = varint(raw, i)
    n, i = varint(raw, i)
    if v != 1 or c != codec or mh != SHA2_256 or n != 32 or len(raw) - i != 32:
        raise ValueError("not a CIDv1 of codec %#x with a sha2-256 multihash" % codec)
    return raw[i:]


def valid_event_id(s):
    """An event id, spelt the one way writers write it."""
    if not isinstance(s, str) or len(s) > 128 or not s.startswith("b"):
        return False
    try:
        digest = parse_cid(b32decode(s[1:]), CODEC_JSON)
    except Exception:
        return False
    return "b" + b32encode(cid_bytes(CODEC_JSON, digest)) == s


def blob_sha256(s):
    """The sha256 hex a blob CID names: raw codec, sha2-256, any base above."""
    if not isinstance(s, str):
        raise ValueError("not a string")
    return parse_cid(multibase_decode(s), CODEC_RAW).hex()


MACHINE_PREFIX = bytes([0x00, 0x24, 0x08, 0x01, 0x12, 0x20])


def machine_key(s):
    """The ed25519 public key of a machine's peer ID: base58btc of the
    identity multihash (00, length 0x24) of the protobuf PublicKey
    {Type: Ed25519 (08 01), Data: 32 bytes (12 20 …)}, and only that."""
    if not isinstance(s, str) or len(s) > 128:
        raise ValueError("not a peer ID")
    raw = b58decode(s)
    if b58encode(raw) != s or len(raw) != 38 or raw[:6] != MACHINE_PREFIX:
        raise ValueError("not a machine's peer ID in its canonical form: %r" % s)
    return raw[6:]


def peer_id(pub):
    return b58encode(MACHINE_PREFIX + pub)


# ---------------------------------------------------------------------------
# JSON: strict parsing (I-JSON) and RFC 8785 canonical form.


class BadJSON(Exception):
    pass


def _pairs(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise BadJSON("duplicate key")
    return dict(pairs)


def _no_constant(name):
    raise BadJSON("%s is not JSON" % name)


def loads_strict(b):
    """One JSON value from UTF-8 bytes: no duplicate keys, no NaN."""
    try:
        text = b.decode("utf-8")
        return json.loads(text, object_pairs_hook=_pairs, parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise BadJSON(str(e)) from None


def es6_number(x):
    """A number as ECMAScript's Number.prototype.toString writes it."""
    if isinstance(x, int):
        x = float(x)  # RFC 8785 numbers are IEEE doubles
    if math.isnan(x) or math.isinf(x):
        raise BadJSON("not a finite number")
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    t = Decimal(repr(abs(x))).normalize().as_tuple()  # shortest round-trip digits
    digits = "".join(map(str, t.digits))
    k = len(digits)
    n = t.exponent + k
    if k <= n <= 21:
        s = digits + "0" * (n - k)
    elif 0 < n <= 21:
        s = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        s = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        s = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return sign + s


_ESC = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _string(s):
    out = ['"']
    for ch in s:
        if ch in _ESC:
            out.append(_ESC[ch])
        elif ch < " ":
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _canon(v):
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (int, float)):
        return es6_number(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, list):
        return "[" + ",".join(_canon(x) for x in v) + "]"
    if isinstance(v, dict):
        keys = sorted(v, key=lambda k: k.encode("utf-16-be"))  # by UTF-16 code units
        return "{" + ",".join(_string(k) + ":" + _canon(v[k]) for k in keys) + "}"
    raise BadJSON("not a JSON value")


def canonical(v):
    """The RFC 8785 bytes of a parsed JSON value."""
    try:
        return _canon(v).encode("utf-8")
    except UnicodeEncodeError:
        raise BadJSON("lone surrogate") from None


def without(obj, *keys):
    return {k: v for k, v in obj.items() if k not in keys}


MAX_SAFE = 2**53 - 1


def safe_int(v, least):
    """v as an integer from least to 2^53-1, read from its canonical text."""
    t = _canon(v)
    if not re.fullmatch(r"0|[1-9][0-9]{0,15}", t) or int(t) > MAX_SAFE or int(t) < least:
        return None
    return int(t)


def canonical_b64_sig(s):
    """The 64 signature bytes of the standard base64 (with padding) s, or None
    for any other spelling."""
    if not isinstance(s, str):
        return None
    try:
        b = base64.b64decode(s, validate=True)
    except ValueError:
        return None
    if len(b) != 64 or base64.b64encode(b).decode() != s:
        return None
    return b


# ---------------------------------------------------------------------------
# Event lines.

TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-](\d{2}):(\d{2}))")
DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]


def valid_time(s):
    m = TIME.fullmatch(s)
    if not m:
        return False
    y, mo, d, h, mi, sec = (int(m.group(i)) for i in range(1, 7))
    leap = y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
    if not 1 <= mo <= 12 or not 1 <= d <= DAYS[mo - 1] + (mo == 2 and leap):
        return False
    if h > 23 or mi > 59 or sec > 59:
        return False
    if m.group(8) != "Z" and (int(m.group(9)) > 23 or int(m.group(10)) > 59):
        return False
    return True


# An event type: a token of 1 to 64 ASCII bytes (docs/FORMAT.md, "Types").
# fullmatch, since "$" would also match before a final line break.
TYPE = re.compile(r"[a-z][a-z0-9_.-]{0,63}", re.ASCII)


FIELDS = ["body", "clock", "epoch", "id", "machine", "prev", "seq", "session", "sig", "time", "turn", "type", "v"]


class Event:
    def __init__(self, obj):
        self.obj = obj
        self.id, self.machine, self.seq, self.epoch = obj["id"], obj["machine"], obj["seq"], obj["epoch"]
        self.prev, self.clock, self.type, self.body = obj["prev"], obj["clock"], obj["type"], obj["body"]


def parse_line(line):
    """(check, Event or None) for one journal line without its newline, the
    checks made in the order docs/FORMAT.md gives."""
    try:
        obj = loads_strict(line)
        canon = canonical(obj)
    except BadJSON:
        return "invalid-event", None
    if not isinstance(obj, dict) or "v" not in obj:
        return "invalid-event", None
    v = safe_int(obj["v"], 1)
    if v is None:
        return "invalid-event", None
    if v > 1:
        return "future-format", None
    if canon != line:
        return "not-canonical", None
    for key in sorted(obj, key=lambda k: k.encode("utf-16-be")):
        val = obj[key]
        if key in ("id", "machine", "prev", "session", "turn", "sig", "time", "type") and not isinstance(val, str):
            return "invalid-event", None
        if key in ("seq", "clock") and safe_int(val, 1) is None:
            return "invalid-event", None
        if key == "epoch" and safe_int(val, 0) is None:
            return "invalid-event", None
        if key == "time" and not valid_time(val):
            return "invalid-event", None
        if key == "type" and not TYPE.fullmatch(val):
            return "invalid-event", None
    if any(f not in obj for f in FIELDS):
        return "invalid-event", None
    try:
        pub = machine_key(obj["machine"])
    except ValueError:
        return "invalid-event", None
    if obj["seq"] == 1 and obj["prev"] != "":
        return "invalid-event", None
    if obj["seq"] > 1 and not valid_event_id(obj["prev"]):
        return "invalid-event", None
    sig = canonical_b64_sig(obj["sig"])
    if sig is None or not ed25519_verify(pub, canonical(without(obj, "id", "sig")), sig):
        return "bad-signature", None
    if obj["id"] != cid_string(CODEC_JSON, canonical(without(obj, "id"))):
        return "bad-id", None
    return "ok", Event(obj)


def chain_problems(chain):
    """The checks one machine's chain fails, and the first seq that is not
    readable (None if all are): a fork (two events at one seq) or a broken
    chain (a missing seq, a prev that is not the id of the event before, a
    clock that does not rise)."""
    problems, cut = set(), None

    def mark(kind, seq):
        nonlocal cut
        problems.add(kind)
        cut = seq if cut is None else min(cut, seq)

    groups = {}
    for e in chain:
        groups.setdefault(e.seq, []).append(e)
    before, want = None, 1
    for seq in sorted(groups):
        group = groups[seq]
        if seq > want:
            mark("broken-chain", seq)
            before = None
        if len(group) > 1:
            mark("fork", seq)
        for e in group:
            if seq > 1 and before is not None:
                prev = [p for p in before if p.id == e.prev]
                if not prev or e.clock <= prev[0].clock:
                    mark("broken-chain", seq)
        before, want = group, seq + 1
    return problems, cut


HEAL = "chain.healed"


def heal_pairs(e):
    """The (id, by) pairs a chain.healed event names: its body is an object
    whose "replaced" is a list of objects, each with a string "id" and, if
    present, a string "by" ("" when absent; other members are ignored). A
    body of any other shape names nothing."""
    body = e.body
    if not isinstance(body, dict) or not isinstance(body.get("replaced"), list):
        return []
    pairs = []
    for r in body["replaced"]:
        if not isinstance(r, dict) or not isinstance(r.get("id"), str) or not isinstance(r.get("by", ""), str):
            return []
        pairs.append((r["id"], r.get("by", "")))
    return pairs


def follows(chain, start, ids):
    """Whether walking prev links from the event start, among chain, meets
    an event whose id is in ids."""
    by_id = {e.id: e for e in chain}
    seen = set()
    e = by_id.get(start)
    while e is not None and e.id not in seen:
        if e.id in ids:
            return True
        seen.add(e.id)
        e = by_id.get(e.prev)
    return False


def set_aside(chain, stale):
    """The ids of one machine's events that its heals set aside: every id
    any heal of the machine names (but its own), whether or not that heal
    is itself set aside, so what is set aside only grows; except an event
    not itself stale whose content a heal signed again after a stale event
    (the copy follows what is set aside; the event stays readable)."""
    named = set()
    for e in chain:
        if e.type == HEAL:
            for i, by in heal_pairs(e):
                if i == e.id:
                    continue
                if by and i not in stale and stale and follows(chain, by, stale):
                    continue
                named.add(i)
    return named & {e.id for e in chain}


ACTIVATED = "holder.activated"


def activation_bound(e):
    """(S, e, k, x) for a holder.activated event that counts: its body is
    {"holder": {"peer": P, "epoch": n}, "from": {"peer": S, "epoch": e,
    "seq": k, "id": x}}, with P its writer, n its epoch, S another machine
    and 0 < e < n; the old holder S's epoch e ended when its chain stood at
    seq k, at the event x. A "seq" left out is 0 (S had written nothing),
    an "id" left out is "" (not said). None for any other event, and for a
    body of another shape."""
    if e.type != ACTIVATED or not isinstance(e.body, dict):
        return None
    holder, old = e.body.get("holder"), e.body.get("from")
    if not isinstance(holder, dict) or not isinstance(old, dict):
        return None
    peer, epoch = holder.get("peer"), holder.get("epoch")
    s, s_epoch, k, x = old.get("peer"), old.get("epoch"), old.get("seq", 0), old.get("id", "")
    if not all(is_int(n) and n >= 0 for n in (epoch, s_epoch, k)) or not isinstance(s, str) or not isinstance(x, str):
        return None
    if peer != e.machine or epoch != e.epoch or s in ("", e.machine) or not 0 < s_epoch < e.epoch:
        return None
    return s, s_epoch, k, x


def epoch_bounds(events):
    """{(S, e): (k, x)}: for each old holder S and epoch e that an
    activation among events ends, the lowest seq k any of them gives, and at
    that seq an id x over none, the smallest over another. Every activation
    counts, wherever it stands in its writer's chain."""
    bounds = {}
    for e in events:
        b = activation_bound(e)
        if b is None:
            continue
        key, k, x = b[:2], b[2], b[3]
        if key not in bounds:
            bounds[key] = (k, x)
            continue
        ck, cx = bounds[key]
        if k < ck or k == ck and x and (not cx or x < cx):
            bounds[key] = (k, x)
    return bounds


def stale_ids(chain, bounds):
    """The ids of one machine's events that it wrote under an epoch that
    had ended: at a nonzero epoch an activation ends, with a seq above
    where it ended, or, when the activation names that point by id and the
    chain holds an event with that id at that seq, not that event nor one
    of its ancestors (by prev) and at or above the lowest of those held. Then what its heals signed again of a stale
    event ("by" of a pair whose "id" is stale) is stale too, as often as
    that goes on. Offline edits (epoch 0) always stand otherwise."""
    by_id = {e.id: e for e in chain}
    standing = {}
    for (machine, epoch), (k, x) in bounds.items():
        if not chain or machine != chain[0].machine or not x:
            continue
        head = by_id.get(x)
        if head is None or head.seq != k:
            continue
        line, low = set(), head.seq
        e = head
        while e is not None and e.id not in line:
            line.add(e.id)
            low = e.seq
            e = by_id.get(e.prev)
        standing[epoch] = (line, low)
    out = set()
    for e in chain:
        b = bounds.get((e.machine, e.epoch))
        if e.epoch == 0 or b is None:
            continue
        line = standing.get(e.epoch)
        # Below the lowest ancestor held, a missing event keeps the line
        # from being followed: those events are not judged by it.
        if e.seq > b[0] or line is not None and e.id not in line[0] and e.seq >= line[1]:
            out.add(e.id)
    changed = bool(out)
    while changed:
        changed = False
        for e in chain:
            if e.type != HEAL:
                continue
            for i, by in heal_pairs(e):
                if i in out and by and by not in out:
                    out.add(by)
                    changed = True
    return out


MEMBER_ADDED, MEMBER_REMOVED = "member.added", "member.removed"
NONCE = re.compile(r"[0-9a-f]{32}")
EVERY = float("inf")  # a member's events count at every seq


def member_body(e):
    """The body of a membership event, if it reads: an object whose "peer"
    is a machine peer ID in its one spelling; "nonce", if present, 32
    lowercase hex digits; "founder", if present, true; "seq", if present,
    an integer (other members ignored). None for a body of another shape."""
    b = e.body
    if not isinstance(b, dict) or not isinstance(b.get("peer"), str):
        return None
    try:
        machine_key(b["peer"])
    except ValueError:
        return None
    if "nonce" in b and not (isinstance(b["nonce"], str) and NONCE.fullmatch(b["nonce"])):
        return None
    if "founder" in b and b["founder"] is not True:
        return None
    if "seq" in b and not (is_int(b["seq"]) and b["seq"] >= 0):
        return None
    return b


def agent_id_of(machine, nonce):
    """The agent id derived from a machine's peer ID and a nonce: the first
    16 bytes of sha256("tern.agent/1\n" + machine + "\n" + nonce) as a
    version 8 UUID."""
    b = bytearray(hashlib.sha256(("tern.agent/1\n" + machine + "\n" + nonce).encode()).digest()[:16])
    b[6] = b[6] & 0x0F | 0x80
    b[8] = b[8] & 0x3F | 0x80
    h = b.hex()
    return "-".join((h[:8], h[8:12], h[12:16], h[16:20], h[20:]))


def derived(agent):
    return len(agent) == 36 and agent[14] == "8"


def membership_events(events):
    return sorted({e.id: e for e in events if e.type in (MEMBER_ADDED, MEMBER_REMOVED)}.values(), key=order_key)


def fold_members(roots, ms):
    """{machine: last seq of its that counts} after the membership events ms
    (in total order), from the first members roots: an event counts when its
    writer's events up to its seq count; an addition adds a machine that
    never was a member; a removal of a member, unless it is the last, cuts
    it at its "seq" (0 when left out) and voids its membership events above
    the cut, the fold being made again without them when one had counted."""
    voided = set()
    while True:
        cut, live, counted, again = {r: EVERY for r in roots}, len(roots), {}, False
        for e in ms:
            if e.id in voided or e.machine not in cut or e.seq > cut[e.machine]:
                continue
            b = member_body(e)
            if b is None:
                continue
            p = b["peer"]
            if e.type == MEMBER_ADDED and p not in cut:
                cut[p] = EVERY
                live += 1
            elif e.type == MEMBER_REMOVED and cut.get(p) == EVERY and live > 1:
                k = b.get("seq", 0)
                cut[p] = k
                live -= 1
                for x in counted.get(p, []):
                    if x.seq > k:
                        voided.add(x.id)
                        again = True
                if again:
                    break
            counted.setdefault(e.machine, []).append(e)
        if not again:
            return cut


def founded_at(ms, roots):
    for e in ms:
        b = member_body(e)
        if b is not None and e.machine in roots and b.get("founder") and b["peer"] == e.machine:
            return e.clock
    return 0


class Members:
    """Who writes an agent's history: cut is {member: last seq of its that
    counts} (None for an open journal, which names none and admits all),
    since the clock from which activations need a handover."""

    def __init__(self, cut, since=0):
        self.cut, self.since = cut, since


def members_of(agent, events):
    """The members as the journal names them for agent: the first member of
    a derived id is the machine whose member.added naming itself carries
    the nonce the id derives from; of another id, every machine whose
    member.added names itself a founder (none: open)."""
    ms = membership_events(events)
    roots, founders = set(), False
    for e in ms:
        b = member_body(e)
        if b is None or e.type != MEMBER_ADDED or b["peer"] != e.machine:
            continue
        if derived(agent):
            if "nonce" in b and agent_id_of(e.machine, b["nonce"]) == agent:
                roots.add(e.machine)
        elif b.get("founder"):
            roots.add(e.machine)
            founders = True
    if not derived(agent) and not founders:
        return Members(None)
    return Members(fold_members(roots, ms), 0 if derived(agent) else founded_at(ms, roots))


def members_claimed(events):
    """The members as a journal read without its agent id names them, for
    the readable line: every machine that names itself with a nonce or as a
    founder is a first member."""
    ms = membership_events(events)
    roots = set()
    for e in ms:
        b = member_body(e)
        if b is not None and e.type == MEMBER_ADDED and b["peer"] == e.machine and ("nonce" in b or b.get("founder")):
            roots.add(e.machine)
    if not roots:
        return Members(None)
    return Members(fold_members(roots, ms))


def handover_message(agent, s, e, p, n):
    return ("tern.handover/1\n%s\n%s\n%d\n%s\n%d\n" % (agent, s, e, p, n)).encode()


def has_custody(agent, e, m):
    """Whether a holder.activated event e proves its writer was handed the
    agent: in a journal that names members and from the clock they were
    first named, it counts as an activation, and carries a handover whose
    from is its from (peer, epoch), whose to is its writer at its epoch,
    signed by from's peer, a member now or before its removal."""
    if e.type != ACTIVATED or m.cut is None or e.clock < m.since:
        return True
    b = activation_bound(e)
    h = e.body.get("handover") if isinstance(e.body, dict) else None
    if b is None or not isinstance(h, dict):
        return False
    s, s_epoch = b[0], b[1]
    frm, to, sig = h.get("from"), h.get("to"), h.get("sig")
    if not isinstance(frm, dict) or not isinstance(to, dict) or not isinstance(sig, str):
        return False
    if frm.get("peer") != s or frm.get("epoch") != s_epoch or to.get("peer") != e.machine or to.get("epoch") != e.epoch:
        return False
    if not is_int(frm.get("epoch")) or not is_int(to.get("epoch")) or s not in m.cut:
        return False
    raw = canonical_b64_sig(sig)
    return raw is not None and ed25519_verify(machine_key(s), handover_message(agent, s, s_epoch, e.machine, e.epoch), raw)


def member_checks(agent, events):
    """not-member when a machine that never was a member wrote an event (a
    removed member's events after its cut are set aside, not refused);
    no-custody when an activation lacks its handover."""
    m = members_of(agent, events)
    checks = set()
    for e in events:
        if m.cut is not None and e.machine not in m.cut:
            checks.add("not-member")
        if not has_custody(agent, e, m):
            checks.add("no-custody")
    return checks


class Journal:
    """What a reader reads of a set of events: the checks the chains fail,
    the readable events and the quarantined ones (both in total order), and
    the version vector {machine: {"seq", "id"[, "aside"]}}. Each machine's
    heals, and the activations that end its epochs, are applied first: what
    they set aside is left out of its chain, and quarantined."""

    def __init__(self, events):
        self.checks, self.readable, self.quarantined, self.vector = set(), [], [], {}
        by_machine = {}
        distinct = {e.id: e for e in events}.values()
        for e in distinct:
            by_machine.setdefault(e.machine, []).append(e)
        bounds = epoch_bounds(distinct)
        kept_to = members_claimed(distinct).cut or {}
        for machine, chain in sorted(by_machine.items()):
            stale = stale_ids(chain, bounds)
            out = set_aside(chain, stale) | stale
            if kept_to.get(machine, EVERY) != EVERY:  # a removed member
                out |= {e.id for e in chain if e.seq > kept_to[machine]}
            kept = [e for e in chain if e.id not in out]
            problems, cut = chain_problems(kept)
            self.checks |= problems
            line = sorted((e for e in kept if cut is None or e.seq < cut), key=lambda e: e.seq)
            on_line = {e.id for e in line}
            aside = [e for e in chain if e.id not in on_line]
            self.readable += line
            self.quarantined += aside
            head = {"seq": line[-1].seq, "id": line[-1].id} if line else {"seq": 0, "id": ""}
            if aside:
                head["aside"] = aside_digest(aside)
            self.vector[machine] = head
        self.readable.sort(key=order_key)
        self.quarantined.sort(key=order_key)


def aside_digest(events):
    """The first 16 hex digits of the sha256 of the events' sorted ids, each
    followed by a newline."""
    return hashlib.sha256("".join(i + "\n" for i in sorted(e.id for e in events)).encode()).hexdigest()[:16]


def order_key(e):
    """The total order: clock, machine, seq, then id."""
    return (e.clock, e.machine, e.seq, e.id)


# ---------------------------------------------------------------------------
# manifest.json.

LAYOUT = [
    "agent.json",
    "artifacts/snapshot.json",
    "environment/spec.json",
    "memory/working_memory.md",
    "memory/timeline_events.jsonl",
    "memory/vector_index/index.json",
]
DIRS = ["artifacts", "artifacts/blobs", "environment", "memory", "memory/vector_index"]
HEX64 = re.compile(r"[0-9a-f]{64}")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
MAX_MANIFEST = 128 << 20


def blob_name(name):
    if name.startswith("artifacts/blobs/") and HEX64.fullmatch(name[len("artifacts/blobs/"):]):
        return name[len("artifacts/blobs/"):]
    return None


def valid_name(name):
    parts = name.split("/")
    clean = name and not name.startswith("/") and "\\" not in name and all(p not in ("", ".", "..") for p in parts)
    return bool(clean) and (name in LAYOUT or blob_name(name) is not None)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def manifest_fields_ok(m):
    if set(m) - {"format", "id", "holder", "files", "signature", "digest"}:
        return False
    if not isinstance(m.get("id"), str) or not UUID.fullmatch(m["id"]):
        return False
    h = m.get("holder")
    if not isinstance(h, dict) or set(h) - {"peer", "epoch"}:
        return False
    epoch = h.get("epoch", 0)
    if not is_int(epoch) or not 0 <= epoch <= MAX_SAFE:
        return False
    try:
        machine_key(h.get("peer", ""))
    except ValueError:
        return False
    if "signature" in m:
        s = m["signature"]
        if not isinstance(s, dict) or set(s) - {"signer", "sig"} or not isinstance(s.get("sig", ""), str):
            return False
        try:
            machine_key(s.get("signer", ""))
        except ValueError:
            return False
    if not isinstance(m.get("digest", ""), str):
        return False
    files = m.get("files")
    if not isinstance(files, dict):
        return False
    for name, e in files.items():
        if not isinstance(e, dict) or set(e) - {"sha256", "size"} or not valid_name(name):
            return False
        if not isinstance(e.get("sha256"), str) or not HEX64.fullmatch(e["sha256"]):
            return False
        if not is_int(e.get("size")) or not 0 <= e["size"] <= MAX_SAFE:
            return False
        if blob_name(name) not in (None, e["sha256"]):
            return False
    return all(n in files for n in LAYOUT)


def parse_manifest(data):
    """(check, manifest or None). The signature is checked last: its failure
    still returns the manifest."""
    if len(data) > MAX_MANIFEST:
        return "invalid-manifest", None
    try:
        head = json.loads(data.decode("utf-8", "replace"))
    except ValueError:
        return "not-capsule", None
    if not isinstance(head, dict) or not isinstance(head.get("format"), str):
        return "not-capsule", None
    if head["format"] != "tern.capsule/1":
        return ("future-format" if head["format"].startswith("tern.capsule/") else "not-capsule"), None
    try:
        m = loads_strict(data)
        canon = canonical(m)
    except BadJSON:
        return "invalid-manifest", None
    if canon != data:
        return "not-canonical", None
    if not manifest_fields_ok(m):
        return "invalid-manifest", None
    if m.get("digest") != hashlib.sha256(canonical(without(m, "digest"))).hexdigest():
        return "bad-digest", None
    if "signature" in m:
        sig = canonical_b64_sig(m["signature"].get("sig"))
        pub = machine_key(m["signature"]["signer"])
        if sig is None or not ed25519_verify(pub, canonical(without(m, "digest", "signature")), sig):
            return "bad-signature", m
    return "ok", m


# ---------------------------------------------------------------------------
# agent.json, environment/spec.json, snapshot.json, the index.

SECRET_WORDS = {"TOKEN", "TOKENS", "KEY", "KEYS", "APIKEY", "SECRET", "SECRETS", "PASSWORD", "PASSWD",
                "PASSPHRASE", "CREDENTIAL", "CREDENTIALS", "PAT", "COOKIE", "SESSIONID"}
SECRET_FRAGMENTS = ["SECRET", "PASSWORD", "CREDENTIAL", "APIKEY", "ACCESSKEY", "AUTHTOKEN"]
VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def looks_secret(name):
    up = name.upper()
    return any(p in SECRET_WORDS for p in up.split("_")) or any(f in up for f in SECRET_FRAGMENTS)


def valid_agent(b):
    a = loads_strict(b)
    if not isinstance(a, dict) or set(a) - {"name", "instructions", "provider", "model", "tools"}:
        return False
    if any(not isinstance(a.get(k, ""), (str, type(None))) for k in ("name", "instructions", "provider", "model")):
        return False
    if not a.get("name"):
        return False
    tools = a.get("tools") or []
    if not isinstance(tools, list):
        return False
    for t in tools:
        if not isinstance(t, dict) or set(t) - {"name", "description", "parameters", "effect"} or not t.get("name"):
            return False
        if t.get("effect", "") not in ("", "pure", "idempotent", "at-most-once"):
            return False
    return True


def valid_env(b):
    s = loads_strict(b)
    if not isinstance(s, dict) or set(s) != {"workdir", "packages", "env", "secrets"} or None in s.values():
        return False
    if not isinstance(s["workdir"], str) or "\0" in s["workdir"]:
        return False
    if not isinstance(s["packages"], list) or any(not isinstance(p, str) or not p.strip() for p in s["packages"]):
        return False
    secrets = s["secrets"]
    if not isinstance(secrets, list) or any(not isinstance(n, str) or not VAR.fullmatch(n) for n in secrets):
        return False
    if len(set(secrets)) != len(secrets):
        return False
    env = s["env"]
    if not isinstance(env, dict) or any(not isinstance(v, str) for v in env.values()):
        return False
    return all(VAR.fullmatch(n) and n not in secrets and not looks_secret(n) for n in env)


def snapshot_problems(b, files):
    """The checks a snapshot.json fails, its blob references resolved against
    the manifest's files."""
    try:
        s = loads_strict(b)
    except BadJSON:
        return {"invalid-content"}
    if not isinstance(s, dict) or set(s) != {"entries"} or not isinstance(s["entries"], dict):
        return {"invalid-content"}
    problems = set()
    entries = s["entries"]
    for path, e in entries.items():
        parts = path.split("/")
        if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in path or "\0" in path:
            return {"invalid-content"}
        if not isinstance(e, dict) or set(e) - {"type", "mode", "cid", "size"}:
            return {"invalid-content"}
        mode = e.get("mode")
        if not isinstance(mode, str) or not re.fullmatch(r"0[0-7]{3}", mode):
            return {"invalid-content"}
        if e.get("type") == "file":
            try:
                h = blob_sha256(e.get("cid"))
            except Exception:
                return {"invalid-content"}
            size = e.get("size", 0)
            if not is_int(size) or size < 0:
                return {"invalid-content"}
            listed = files.get("artifacts/blobs/" + h)
            if listed is None:
                problems.add("missing-blob")
            elif listed["size"] != size:
                problems.add("invalid-content")
        elif e.get("type") == "dir":
            if e.get("cid", "") != "" or e.get("size", 0) != 0:
                return {"invalid-content"}
        else:
            return {"invalid-content"}
    for path in entries:
        parts = path.split("/")
        for i in range(1, len(parts)):
            parent = entries.get("/".join(parts[:i]))
            if parent is not None and parent.get("type") != "dir":
                return {"invalid-content"}
    return problems


# ---------------------------------------------------------------------------
# Capsule tars.

MAX_FILE, MAX_TOTAL, MAX_ENTRIES = 16 << 30, 64 << 30, 1 << 20


class UnsafeTar(Exception):
    pass


def index_tar(data):
    """name → bytes of every file of a capsule tar, after the reader's
    refusals (docs/FORMAT.md, Tars)."""
    if len(data) % 512:
        raise UnsafeTar("truncated: not a whole number of 512-byte blocks")
    members = []
    if data:
        try:
            tf = tarfile.open(fileobj=io.BytesIO(data), mode="r:")
            while True:
                m = tf.next()
                if m is None:
                    break
                members.append(m)
        except tarfile.TarError as e:
            raise UnsafeTar(str(e)) from None
        if tf.pax_headers:  # tarfile applies a PAX global header ('g') and lists no entry for it
            raise UnsafeTar("a PAX global header")
    # tarfile stops quietly at a damaged header after the first entry: after
    # the last entry comes the end of the file, or a zero block and then the
    # end or a second zero block (and whatever follows it).
    end = 0
    if members:
        last = members[-1]
        end = last.offset_data
        if last.type in (tarfile.REGTYPE, tarfile.AREGTYPE):
            end += (last.size + 511) // 512 * 512
    first, second = data[end:end + 512], data[end + 512:end + 1024]
    if first.strip(b"\0") or (first and second.strip(b"\0")):
        raise UnsafeTar("a damaged header or end-of-archive marker after the last entry")
    files, seen, total = {}, set(), 0
    if len(members) > MAX_ENTRIES:
        raise UnsafeTar("too many entries")
    for m in members:
        name = m.name[2:] if m.name.startswith("./") else m.name
        if m.type == tarfile.DIRTYPE:
            d = name.rstrip("/")
            if d in ("", "."):
                continue
            if d not in DIRS or d + "/" in seen:
                raise UnsafeTar("folder %r" % m.name)
            seen.add(d + "/")
            continue
        if m.type not in (tarfile.REGTYPE, tarfile.AREGTYPE):
            raise UnsafeTar("entry %r of type %r" % (m.name, m.type))
        if name != "manifest.json" and not valid_name(name):
            raise UnsafeTar("entry %r is not part of capsule v1" % m.name)
        if name in seen:
            raise UnsafeTar("duplicate entry %r" % m.name)
        seen.add(name)
        if (name == "manifest.json" and m.size > MAX_MANIFEST) or m.size > MAX_FILE:
            raise UnsafeTar("entry %r is too large" % m.name)
        total += m.size
        if total > MAX_TOTAL:
            raise UnsafeTar("too large in total")
        if m.offset_data + m.size > len(data):
            raise UnsafeTar("truncated inside %r" % m.name)
        files[name] = data[m.offset_data:m.offset_data + m.size]
    return files


class Report:
    def __init__(self):
        self.checks = set()
        self.events = []
        self.journal = None


def verify_capsule(data):
    """Every check a capsule tar fails (the set {"ok"} if none), and what
    was read."""
    r = Report()
    try:
        files = index_tar(data)
    except UnsafeTar:
        r.checks.add("unsafe-tar")
        return r
    if "manifest.json" not in files:
        r.checks.add("not-capsule")
        return r
    check, m = parse_manifest(files["manifest.json"])
    if m is None:
        r.checks.add(check)
        return r
    if check != "ok":
        r.checks.add(check)
    listed = m["files"]
    jname = "memory/timeline_events.jsonl"
    for name in sorted(listed):
        want = listed[name]
        if name not in files:
            r.checks.add("missing-file")
            continue
        got = files[name]
        if name == jname:
            if len(got) < want["size"]:
                r.checks.add("truncated")
            elif hashlib.sha256(got[:want["size"]]).hexdigest() != want["sha256"]:
                r.checks.add("hash-mismatch")
        elif len(got) < want["size"]:
            r.checks.add("truncated")
        elif len(got) != want["size"] or hashlib.sha256(got).hexdigest() != want["sha256"]:
            r.checks.add("hash-mismatch")
    for name in files:
        if name != "manifest.json" and name not in listed:
            r.checks.add("unlisted-file")
    if jname in files:
        data = files[jname]
        end = data.rfind(b"\n") + 1
        if len(data) > end and end < listed[jname]["size"]:
            r.checks.add("truncated")  # a torn last line inside the sealed part
        for line in data[:end].split(b"\n")[:-1]:
            check, e = parse_line(line)
            if e is None:
                r.checks.add(check)
            else:
                r.events.append(e)
        r.journal = Journal(r.events)
        r.checks |= r.journal.checks
        r.checks |= member_checks(m["id"], r.events)
        r.events = sorted({e.id: e for e in r.events}.values(), key=order_key)
    for name, valid in (("agent.json", valid_agent), ("environment/spec.json", valid_env),
                        ("memory/vector_index/index.json", lambda b: isinstance(loads_strict(b), dict))):
        if name in files:
            try:
                ok = valid(files[name])
            except BadJSON:
                ok = False
            if not ok:
                r.checks.add("invalid-content")
    if "artifacts/snapshot.json" in files:
        r.checks |= snapshot_problems(files["artifacts/snapshot.json"], listed)
    if not r.checks:
        r.checks.add("ok")
    return r


# ---------------------------------------------------------------------------
# The vectors.


def check_keys(path, failures):
    with open(path, "rb") as f:
        keys = json.load(f)["keys"]
    for k in keys:
        seed = bytes.fromhex(k["seed"])
        pub = ed25519_public(seed)
        proto = bytes([0x08, 0x01, 0x12, 0x20]) + pub
        derived = {
            "public_key": pub.hex(),
            "public_key_protobuf": proto.hex(),
            "multihash": (bytes([0x00, len(proto)]) + proto).hex(),
            "peer_id": peer_id(pub),
            "private_key_protobuf": (bytes([0x08, 0x01, 0x12, 0x40]) + seed + pub).hex(),
        }
        for field, want in derived.items():
            if k[field] != want:
                failures.append("keys.json: key %s: %s is %s, derived %s" % (k["name"], field, k[field], want))
        if machine_key(k["peer_id"]) != pub:
            failures.append("keys.json: key %s: peer ID does not give back its key" % k["name"])
    return {k["peer_id"]: bytes.fromhex(k["seed"]) for k in keys}


def resign_check(obj, unsigned, sig_text, seeds, name, failures):
    """An accepted signature by a vector key is the one ed25519 gives: sign
    again and compare (ed25519 is deterministic)."""
    seed = seeds.get(obj)
    if seed is not None and base64.b64encode(ed25519_sign(seed, unsigned)).decode() != sig_text:
        failures.append("%s: signing again with the key's seed gives another signature" % name)


def vector_checks(root, name, seeds, failures):
    """The checks a vector fails, and for a capsule what was read of it."""
    with open(os.path.join(root, name), "rb") as f:
        data = f.read()
    kind = name.split("/")[0]
    if kind == "events":
        if not data.endswith(b"\n") or b"\n" in data[:-1]:
            failures.append("%s: an event vector is one line ending in a newline" % name)
            return [], None
        check, e = parse_line(data[:-1])
        if e is not None:
            resign_check(e.machine, canonical(without(e.obj, "id", "sig")), e.obj["sig"], seeds, name, failures)
        return [check], None
    if kind == "manifests":
        check, m = parse_manifest(data)
        if check == "ok" and "signature" in m:
            s = m["signature"]
            resign_check(s["signer"], canonical(without(m, "digest", "signature")), s["sig"], seeds, name, failures)
        return [check], None
    if kind == "capsules":
        r = verify_capsule(data)
        return sorted(r.checks), r
    failures.append("%s: no reader for it" % name)
    return [], None


def journal_read(r):
    """What expected.json records of a journal vector's journal."""
    j = r.journal or Journal([])
    return {"readable": len(j.readable), "quarantined": len(j.quarantined), "vector": j.vector}


def self_test():
    """RFC 8032 section 7.1, test 1, and RFC 8785's number examples."""
    seed = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
    sig = bytes.fromhex("e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b")
    pub = ed25519_public(seed)
    assert pub.hex() == "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
    assert ed25519_sign(seed, b"") == sig and ed25519_verify(pub, b"", sig)
    assert not ed25519_verify(pub, b"x", sig)
    for x, want in [(0.0, "0"), (-0.0, "0"), (1e21, "1e+21"), (1e20, "100000000000000000000"), (1e-7, "1e-7"),
                    (0.000001, "0.000001"), (123e-20, "1.23e-18"), (4.5, "4.5"), (-1.5e300, "-1.5e+300"),
                    (9007199254740992, "9007199254740992"), (333333333.33333329, "333333333.3333333"),
                    (5e-324, "5e-324"), (1.7976931348623157e308, "1.7976931348623157e+308")]:
        assert es6_number(x) == want, (x, es6_number(x), want)


def main(argv):
    self_test()
    root = argv[1] if len(argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    failures = []
    seeds = check_keys(os.path.join(root, "keys.json"), failures)
    with open(os.path.join(root, "expected.json"), "rb") as f:
        expected = json.load(f)
    on_disk = set()
    for kind in ("events", "manifests", "capsules"):
        for f in os.listdir(os.path.join(root, kind)):
            on_disk.add(kind + "/" + f)
    for name in sorted(on_disk - set(expected)):
        failures.append("%s: a vector expected.json does not name" % name)
    for name in sorted(expected):
        want, want_read = expected[name], None
        if isinstance(want, dict):  # a journal vector: its checks, and what is read of its journal
            want_read = {k: v for k, v in want.items() if k != "checks"}
            want = want["checks"]
        want = want if isinstance(want, list) else [want]
        got, report = vector_checks(root, name, seeds, failures)
        ok = got == sorted(want)
        if ok and want_read is not None:
            got_read = journal_read(report)
            for key in sorted(set(want_read) | set(got_read)):
                if got_read.get(key) != want_read.get(key):
                    ok = False
                    failures.append("%s: %s is %s, expected %s" % (name, key, json.dumps(got_read.get(key), sort_keys=True),
                                                                    json.dumps(want_read.get(key), sort_keys=True)))
        elif got != sorted(want):
            failures.append("%s: got %s, expected %s" % (name, ", ".join(got), ", ".join(want)))
        print("%s %-60s %s" % ("ok  " if ok else "FAIL", name, ", ".join(got)))
    if len(argv) > 2:
        check_golden(argv[2], failures)
    for f in failures:
        print("FAIL " + f, file=sys.stderr)
    print("%d vectors, %d failures" % (len(expected), len(failures)))
    return 1 if failures else 0


def check_golden(root, failures):
    """The golden capsule: the checks it fails, and what a reader reads of
    it, as GOLDEN_DIR/expected.json records them."""
    with open(os.path.join(root, "expected.json"), "rb") as f:
        want = json.load(f)
    with open(os.path.join(root, want["tar"]), "rb") as f:
        r = verify_capsule(f.read())
    got = sorted(r.checks)
    name = "golden/" + want["tar"]
    print("%s %-60s %s" % ("ok  " if got == want["checks"] else "FAIL", name, ", ".join(got)))
    if got != want["checks"]:
        failures.append("%s: got %s, expected %s" % (name, ", ".join(got), ", ".join(want["checks"])))
    quarantined = len(r.journal.quarantined) if r.journal else 0
    if (len(r.events), quarantined) != (want["events"], want["quarantined"]):
        failures.append("%s: read %d events, %d quarantined; expected %d and %d"
                        % (name, len(r.events), quarantined, want["events"], want["quarantined"]))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
