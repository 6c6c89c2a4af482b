#!/usr/bin/env python3
"""Writes the seed corpus of the store fuzz targets (tests/fuzz/corpus/<target>/): small valid inputs in
each target's format (see the comment at the top of each fuzz_*.cpp). Run it again after a format
change; crashing inputs found later are added beside these by hand (named crash-*) and never regenerated.

  tests/fuzz/make_corpus.py
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

# --- idist's TCPStore frames (src/store/tcp_store_protocol.hpp) ---
MAGIC = 0x54534449
SET, GET, WAIT, ADD, CHECK, HELLO = 1, 2, 3, 4, 5, 6
VERSION = 3


def s(b):
    b = b.encode() if isinstance(b, str) else b
    return struct.pack("<I", len(b)) + b


def frame(session, op, payload):
    return bytes([session]) + struct.pack("<IB3xI", MAGIC, op, len(payload)) + payload


def hello(session, token=""):
    return frame(session, HELLO, struct.pack("<I", VERSION) + s(token))


def keys(*ks):
    return struct.pack("<I", len(ks)) + b"".join(s(k) for k in ks)


server = {
    "set_get": bytes([0]) + hello(0) + frame(0, SET, s("k") + s("v")) + frame(0, GET, struct.pack("<Q", 1000) + s("k")),
    "wait_two_sessions": bytes([0]) + hello(0) + hello(1) + frame(1, WAIT, struct.pack("<Q", 1000) + keys("a", "b"))
    + frame(0, SET, s("a") + s("1")) + frame(0, SET, s("b") + s("2")),
    "add_check": bytes([0]) + hello(0) + frame(0, ADD, s("c") + struct.pack("<q", 5))
    + frame(0, ADD, s("c") + struct.pack("<q", -2)) + frame(0, CHECK, keys("c", "x")),
    # src/store/store_join.cpp's requests: rank 0 claimed twice, the count, the verdict another session waits for
    "join_conflict": bytes([2 << 1]) + hello(0) + frame(0, ADD, s("idist/join/rank_0") + struct.pack("<q", 1))
    + frame(0, ADD, s("idist/join/count") + struct.pack("<q", 1))
    + hello(2) + frame(2, WAIT, struct.pack("<Q", 1000) + keys("idist/join/verdict"))
    + hello(1) + frame(1, ADD, s("idist/join/rank_0") + struct.pack("<q", 1))
    + frame(1, SET, s("idist/join/verdict") + s("rank 0 was claimed by two processes")),
    "token": bytes([1]) + hello(0, "tok") + frame(0, SET, s("k") + s("v")) + hello(1, "bad"),
    "get_times_out": bytes([0]) + hello(0) + frame(0, GET, struct.pack("<Q", 10) + s("never")),
    "reserved_key": bytes([0]) + hello(0) + frame(0, SET, s("idist/store/flag") + s("9"))
    + frame(0, ADD, s("idist/store/world_size") + struct.pack("<q", 0)),
}

# --- c10d replies: u8 mode | u8 op x 4 | reply bytes (tests/fuzz/fuzz_c10d_replies.cpp) ---
O_SET, O_GET, O_ADD, O_CHECK, O_WAIT, O_POLL = range(6)


def i64(v):
    return struct.pack("<q", v)


def value(b):
    return struct.pack("<Q", len(b)) + b


HELLO_REPLY = i64(0)  # GETNUMKEYS
c10d = {}
for mode, name in ((0, "v1"), (1, "v2"), (2, "probed")):
    c10d[f"{name}_set_get_add_check"] = bytes([mode, O_SET, O_GET, O_ADD, O_CHECK]) + HELLO_REPLY + b"\x00" \
        + b"\x00" + value(b"v") + i64(1) + b"\x00"
c10d["v2_wait_poll"] = bytes([1, O_WAIT | (2 << 3), O_POLL, O_CHECK | (1 << 3), O_GET]) + HELLO_REPLY + b"\x00" \
    + b"\x00" + b"\x01" + b"\x00" + value(b"")
c10d["v1_check_not_ready"] = bytes([0, O_CHECK, O_WAIT, O_ADD, O_SET]) + HELLO_REPLY + b"\x01" + b"\x00" + i64(-7)
c10d["probed_silent_v2"] = bytes([2 | 4, O_GET, O_SET, O_SET, O_SET])  # no reply at all: the probe gives up

# --- FileStore: u8 key_length | key | file bytes (tests/fuzz/fuzz_file_store.cpp) ---


def fs_input(key, data):
    return bytes([len(key)]) + key + data


file_store = {
    "counter": fs_input(b"counter", b"41"),
    "negative": fs_input(b"a", b"-9223372036854775808"),
    "at_int64_max": fs_input(b"", b"9223372036854775807"),
    "slash_key": fs_input(b"a/b c%", b"hello"),
    "not_a_number": fs_input(b"x", b"12a"),
}

for target, seeds in (("tcp_store_server", server), ("c10d_replies", c10d), ("file_store", file_store)):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
