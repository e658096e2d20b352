"""The logic that keeps what the agent left as data: link resolution, canary scanning, recording strings
that are not valid Unicode, the workspace listing, the fault rule (docker-free; the same attacks run on a
real engine in tests/docker/test_threats_data.py)."""

from __future__ import annotations

import base64
import bz2
import gzip
import io
import json
import lzma
import zipfile
import zlib

import pytest

from orchestrator.events import EventLog, read_events, verify_events
from orchestrator import canaries as S
from orchestrator import canaryscan as C
from orchestrator.grading.export import _pieces, parse_listing
from orchestrator.grading.tree import Tree, resolve
from orchestrator.textsafe import path_bytes, recordable, recordable_data
from orchestrator.trial import unprocessable_verdict


def tree(**links: str) -> Tree:
    return Tree(files={"pkg/mod.py": b"x", "top.txt": b"y"}, dirs={"pkg"},
                symlinks={k.replace("__", "/"): v for k, v in links.items()})


@pytest.mark.parametrize("links,path,expected", [
    ({"a": "."}, "a", ""),
    ({"a": ".", "b": "a/../.."}, "b", None),                   # lexically inside, really the root
    ({"pkg__up": "..", "c": "pkg/up/../.."}, "c", None),
    ({"pkg__up": "..", "c": "pkg/up/top.txt"}, "c", "top.txt"),
    ({"d": "/workspace/.."}, "d", None),
    ({"d": "/workspace/pkg/mod.py"}, "d", "pkg/mod.py"),
    ({"d": "/workspace"}, "d", ""),
    ({"d": "/workspacex"}, "d", None),
    ({"d": "/etc/passwd"}, "d", None),
    ({"d": "/tmp/../workspace/pkg"}, "d", None),               # outside the workspace nothing is known
    ({"g": "h", "h": "g"}, "g", None),                          # a loop
    ({"n": "missing/deeper"}, "n", "missing/deeper"),          # dangling, but inside
    ({"pkg__l": "mod.py"}, "pkg/l", "pkg/mod.py"),
])
def test_links_resolve_component_by_component(links, path, expected):
    assert resolve(tree(**links), path) == expected


def test_a_chain_longer_than_the_kernel_follows_is_a_loop():
    chain = {f"l{i}": f"l{i + 1}" for i in range(45)}
    chain["l45"] = "top.txt"
    t = Tree(files={"top.txt": b""}, symlinks=chain)
    assert resolve(t, "l10") == "top.txt" and resolve(t, "l0") is None


CANARY = S.new_canaries().values


@pytest.mark.parametrize("name,blob", [
    ("utf-16", f"token = '{CANARY[0]}'".encode("utf-16")),
    ("utf-16-be odd", b"\x01" + CANARY[0].encode("utf-16-be")),
    ("utf-32", CANARY[0].encode("utf-32-le")),
    ("ebcdic", CANARY[0].encode("cp037")),
    ("gzip", gzip.compress(CANARY[0].encode())),
    ("zlib inside other bytes", b"\x00header" + zlib.compress(CANARY[0].encode()) + b"trailer"),
    ("bz2", bz2.compress(CANARY[0].encode())),
    ("xz", lzma.compress(CANARY[0].encode())),
    ("lzma", lzma.compress(CANARY[0].encode(), format=lzma.FORMAT_ALONE)),
    ("gzip of utf-16", gzip.compress(CANARY[0].encode("utf-16-le"))),
    ("gzip of gzip", gzip.compress(gzip.compress(CANARY[0].encode()))),
    ("base64 of gzip, wrapped", base64.encodebytes(gzip.compress(CANARY[0].encode() * 5))),
    ("hex of zlib", zlib.compress(CANARY[0].encode()).hex().encode()),
    ("split over distant lines", (CANARY[0][:15] + "\n" + "filler\n" * 100 + CANARY[0][15:]).encode()),
    ("a fragment, reversed", CANARY[0][::-1][3:20].encode()),
    ("zero-width joined", "\u200b".join(CANARY[0]).encode()),
    ("combining marks", "".join(c + "\u0301" for c in CANARY[0]).encode()),
    ("fullwidth", "".join(chr(ord(c) + 0xFEE0) for c in CANARY[0]).encode()),
    ("0x byte list", ", ".join(f"0x{b:02x}" for b in CANARY[0].encode()).encode()),
    ("\\x escapes", "".join(f"\\x{b:02x}" for b in CANARY[0].encode()).encode()),
    ("decimal list", ", ".join(str(b) for b in CANARY[0].encode()).encode()),
    ("octal escapes", "".join(f"\\{b:03o}" for b in CANARY[0].encode()).encode()),
    ("html entities", "".join(f"&#{b};" for b in CANARY[0].encode()).encode()),
    ("base85", b"K = b'" + base64.b85encode(CANARY[0].encode()) + b"'"),
    ("ascii85", base64.a85encode(CANARY[0].encode())),
    ("base32, lower case", base64.b32encode(CANARY[0].encode()).lower()),
    ("hex, reversed", CANARY[0].encode().hex()[::-1].encode()),
    ("base64, reversed", base64.b64encode(CANARY[0].encode())[::-1]),
])
def test_canaries_are_found_however_they_are_wrapped(name, blob):
    assert CANARY[0] in C.scan(CANARY, [blob]).found, name


def test_zip_members_and_split_files():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("inner/notes.txt", "x" * 1000 + CANARY[1])
    assert CANARY[1] in C.scan(CANARY, [b"prefix" + buf.getvalue()]).found
    half = len(CANARY[2]) // 2
    assert C.scan(CANARY, [CANARY[2][:half].encode(), CANARY[2][half:].encode()]).found == {CANARY[2]}


def test_honest_content_finds_nothing_and_hex_noise_is_not_a_fragment():
    src = (b"def f(x):\n    return x + 1\n" * 2000) + bytes(range(256)) * 100
    noise = b"".join(hashlib_hex(i) for i in range(2000))
    assert C.scan(CANARY, [src, noise]).found == set()


def hashlib_hex(i: int) -> bytes:
    import hashlib
    return hashlib.sha256(str(i).encode()).hexdigest().encode() + b"\n"


def test_a_decompression_bomb_stops_at_its_bound_and_says_so():
    bounds = C.ScanBounds(max_stream_bytes=1 << 20, max_total_bytes=4 << 20)
    bomb = zlib.compress(bytes(64 << 20)) + zlib.compress(b"\0" * (8 << 20) + CANARY[0].encode())
    scan = C.scan(CANARY, [bomb], bounds)
    assert CANARY[0] not in scan.found  # beyond the bound: not seen, and the scan says it stopped
    assert any("decompresses to more than" in b for b in scan.bounds_reached)
    assert scan.decoded_bytes <= bounds.max_total_bytes


def test_the_depth_bound_is_recorded():
    nested = CANARY[0].encode()
    for _ in range(6):  # each layer compressible, so deflate codes the layer below: never a stored block holding
        nested = gzip.compress(b"A" * 2000 + nested)  # it verbatim (which one decompression would reach: 1 in 300)
    scan = C.scan(CANARY, [nested], C.ScanBounds(max_depth=3))
    assert CANARY[0] not in scan.found and any("layers" in b for b in scan.bounds_reached)


def test_strings_that_are_not_unicode_are_recorded_escaped():
    name = b"pkg/\xff\xfe.py".decode("utf-8", "surrogateescape")
    assert path_bytes(name) == b"pkg/\xff\xfe.py"
    assert recordable(name) == "pkg/\\xff\\xfe.py"
    assert recordable("half \udcff", raw_bytes=False) == "half \\udcff"
    assert recordable("\ud800x") == "\\ud800x" and recordable("ok é") == "ok é"
    escaped: list[str] = []
    data = recordable_data({"a": [name, "fine"], "b\udcff": 1}, escaped=escaped)
    assert data == {"a": ["pkg/\\xff\\xfe.py", "fine"], "b\\xff": 1}
    assert escaped == ["a[0]", "b\\xff(key)"]
    json.dumps(data).encode("utf-8")


def test_the_event_log_records_whatever_it_is_given(tmp_path):
    log = EventLog(tmp_path / "events.jsonl", "t")
    log.append("tool_started", tool="bash", arguments={"command": "echo \udcff"})
    head = log.close()
    events = read_events(tmp_path / "events.jsonl")
    assert events[1]["arguments"]["command"] == "echo \\udcff" and events[1]["escaped"] == ["arguments.command"]
    assert verify_events(tmp_path / "events.jsonl", head).ok


def test_the_listing_is_parsed_as_bytes_and_must_be_whole():
    data = b"f\t3\t2\tpkg/\xff.py\0d\t4096\t2\tpkg\0l\t6\t1\tlink\nname\0END\0"
    listing = parse_listing(data)
    assert listing is not None and set(listing) == {"pkg/\udcff.py", "pkg", "link\nname"}
    assert listing["pkg/\udcff.py"].links == 2 and listing["link\nname"].kind == "l"
    assert parse_listing(data[:-5]) is None  # the engine lost its end: never taken as whole


def test_a_long_path_is_walked_in_pieces_under_the_limit():
    path = "/".join(["x" * 200] * 30) + "/leaf.txt"
    pieces = _pieces(path)
    assert "/".join(pieces) == path and pieces[-1] == "leaf.txt"
    assert all(len(p.encode()) <= 2048 for p in pieces)


def test_an_error_processing_the_agents_output_is_a_typed_rejection():
    v = unprocessable_verdict("grading", UnicodeEncodeError("utf-8", "\udcff", 0, 1, "surrogates not allowed"))
    assert (v.outcome, v.kind, v.accepted, v.reasons) == ("rejected", "unprocessable_output", False, ["processable_output"])
    assert v.to_dict()["criteria"][0]["evidence"]["stage"] == "grading"


def test_within_returns_raises_or_gives_up_at_its_bound():
    import threading
    import time

    from orchestrator.sandbox.base import within
    assert within(1.0, lambda: 42, "quick") == 42
    with pytest.raises(KeyError):
        within(1.0, lambda: {}["missing"], "failing")
    release, pending = threading.Event(), []
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        within(0.2, lambda: release.wait(10), "blocked", pending)
    assert time.monotonic() - t0 < 1.0 and len(pending) == 1 and pending[0].is_alive()
    release.set()
    pending[0].join(2)
    assert not pending[0].is_alive()  # whoever must wait for it (the export) can
