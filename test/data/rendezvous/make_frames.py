#!/usr/bin/env python3
"""Writes the rendezvous wire fixtures (common/run/rendezvous_wire.h): valid request and response
frames, one stream per file, the corpus of rendezvous_wire_fuzz_smoke. An encoder of its own, so
the fixtures also check the C++ decoder against the documented format (rendezvous_test decodes
every file). Run from this directory: python3 make_frames.py"""
import struct

SET, GET, TRY_GET, WAIT, ADD = 1, 2, 3, 4, 5
OK, NOT_FOUND, TIMED_OUT, ERROR = 0, 1, 2, 3


def request(op, key, value=b"", number=0):
    return struct.pack("<BIIq", op, len(key), len(value), number) + key + value


def response(code, value=b"", number=0):
    return struct.pack("<BIq", code, len(value), number) + value


FILES = {
    "set.req": request(SET, b"addr/0", b"10.0.0.1:40000"),
    "get.req": request(GET, b"addr/1", number=30000),
    "session.req": b"".join([
        request(SET, b"spec/0", bytes(range(256)) * 4),
        request(TRY_GET, b"spec/1"),
        request(WAIT, b"ready/0", number=0),
        request(ADD, b"barrier", number=1),
        request(ADD, b"barrier", number=-(2**63)),
        request(GET, b"k" * 1024, number=2**40),
        request(SET, b"empty"),
    ]),
    "value.resp": response(OK, b"10.0.0.1:40000"),
    "session.resp": b"".join([
        response(OK),
        response(NOT_FOUND),
        response(TIMED_OUT),
        response(OK, number=800),
        response(ERROR, b"key 'text' holds 5 bytes that are not an integer counter"),
        response(OK, bytes(range(256)) * 16),
    ]),
}

for name, data in FILES.items():
    with open(name, "wb") as f:
        f.write(data)
