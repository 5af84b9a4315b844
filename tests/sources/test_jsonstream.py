"""The streaming JSON reader: the same values whatever the chunking, early stops, and errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pipeline.sources.jsonstream import JsonStream, JsonStreamError

BODY = json.dumps({
    "status": "success",
    "data": {"resultType": "streams", "result": [
        {"stream": {"app": "a", "pod": "p-1"}, "values": [["1700", "é ünïcode ✓"], ["17001", "b"]]},
        {"values": [["3", "c"]], "stream": {"app": "b"}},
    ], "stats": {"summary": {"execTime": 0.25, "totalLinesProcessed": 123456789}}},
}, ensure_ascii=False).encode()


def _walk(reader: JsonStream) -> list[Any]:
    """Every (labels, value) pair and the other top-level values, in order."""
    out: list[Any] = []
    reader.begin_object()
    while (key := reader.next_key()) is not None:
        if key != "data":
            out.append((key, reader.value()))
            continue
        reader.begin_object()
        while (inner := reader.next_key()) is not None:
            if inner != "result":
                out.append((inner, reader.value()))
                continue
            reader.begin_array()
            while reader.next_item():
                reader.begin_object()
                while (field := reader.next_key()) is not None:
                    if field == "values":
                        reader.begin_array()
                        while reader.next_item():
                            out.append(("value", reader.value()))
                    else:
                        out.append((field, reader.value()))
    reader.finish()
    return out


def test_chunking__never_changes_what_is_read() -> None:
    whole = _walk(JsonStream([BODY], max_bytes=10**6))
    assert ("stats", {"summary": {"execTime": 0.25, "totalLinesProcessed": 123456789}}) in whole
    assert ("value", ["1700", "é ünïcode ✓"]) in whole
    for size in (1, 2, 3, 7, 64):
        chunks = [BODY[i:i + size] for i in range(0, len(BODY), size)]
        assert _walk(JsonStream(chunks, max_bytes=10**6)) == whole, size


def test_early_stop__reads_only_what_it_needs() -> None:
    def chunks():  # type: ignore[no-untyped-def]
        yield b'{"values": ['
        for i in range(10**6):
            yield json.dumps([str(i), "line"]).encode() + b","
        raise AssertionError("read to the end")

    reader = JsonStream(chunks(), max_bytes=10**9)
    reader.begin_object()
    assert reader.next_key() == "values"
    reader.begin_array()
    got = []
    while reader.next_item() and len(got) < 5:
        got.append(reader.value())
    assert got == [[str(i), "line"] for i in range(5)]
    assert reader.bytes_read < 1000


@pytest.mark.parametrize("body", [
    b'{"a": [1, 2', b'{"a" 1}', b'{"a": [1 2]}', b'[1]', b'{"a": 1} x', b'{"a": tru}',
    b'\xff\xfe{}',
])
def test_malformed__is_a_json_stream_error(body: bytes) -> None:
    with pytest.raises(JsonStreamError):
        reader = JsonStream([body[:3], body[3:]], max_bytes=10**6)
        reader.begin_object()
        while reader.next_key() is not None:
            reader.value()
        reader.finish()


def test_byte_bound__is_enforced_while_reading() -> None:
    big = [b'{"padding": "'] + [b"x" * 1024] * 100 + [b'"}']
    reader = JsonStream(big, max_bytes=10 * 1024)
    reader.begin_object()
    assert reader.next_key() == "padding"
    with pytest.raises(JsonStreamError, match="more than 10240 bytes"):
        reader.value()
