"""Finding canaries in the bytes an agent left, the way it would hide them.

``scan`` looks at every changed file, the *names* of new files, folders and links, and link targets: as Latin-1 (no
byte is lost), as UTF-16 and UTF-32 (either byte order, any alignment) and EBCDIC; as decimal, octal and escaped
numbers; it opens compressed streams wherever their signature appears (gzip, zlib, bzip2, xz, lzma, zip members)
and base64, base85 or hex runs, recursively, within ``ScanBounds`` (a decompression bomb stops at the bound, and
reaching a bound is recorded). In every text it finds canaries as ``canaries.find`` does.
"""

from __future__ import annotations

import base64
import binascii
import bz2
import io
import lzma
import re
import unicodedata
import zipfile
import zlib
from dataclasses import dataclass, field

from .canaries import find

_B64_RUN = re.compile(rb"[A-Za-z0-9+/_-]{24,}={0,2}")
_B85_RUN = re.compile(rb"[0-9A-Za-z!#$%&()*+\-;<=>?@^_`{|}~]{20,}")
_A85_RUN = re.compile(rb"[!-u]{20,}")


@dataclass(frozen=True)
class ScanBounds:
    max_depth: int = 4
    """Layers of encoding or compression opened inside one another."""
    max_stream_bytes: int = 16 << 20
    """What one compressed stream or archive member may decompress to."""
    max_total_bytes: int = 128 << 20
    """What one trial's scan may decode in all."""
    max_streams: int = 4096
    """Compressed streams or encoded runs opened in one trial."""


@dataclass
class Scan:
    """What a scan found and whether it stopped at a bound (then what lies beyond was not seen)."""

    found: set[str] = field(default_factory=set)
    bounds_reached: list[str] = field(default_factory=list)
    decoded_bytes: int = 0
    streams: int = 0

    def reached(self, what: str) -> None:
        if what not in self.bounds_reached and len(self.bounds_reached) < 20:
            self.bounds_reached.append(what)


_MAGIC = re.compile(rb"\x1f\x8b\x08|\x78[\x01\x5e\x9c\xda]|BZh[1-9]1AY&SY|\xfd7zXZ\x00|\x5d\x00\x00|PK\x03\x04")


_HEX_RUN = re.compile(rb"(?:[0-9a-fA-F]{2}){16,}")


MAX_SIGNATURES = 4096
"""Places in one file where a compressed stream is tried (a signature can occur by chance in binary data)."""


_EBCDIC = "cp037"  # cp500 and cp1140 give letters and digits the same bytes


def _decompress(data: bytes, at: int, limit: int) -> list[tuple[bytes, bool]]:
    """The stream(s) starting at ``at`` decompressed to at most ``limit`` bytes; (output, cut at the limit)."""
    head = data[at:at + 4]
    out: list[tuple[bytes, bool]] = []
    try:
        if head.startswith(b"PK\x03\x04"):  # the archive's directory is at its end: opened once per blob
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                for info in zf.infolist()[:64]:
                    with zf.open(info) as member:
                        chunk = member.read(limit + 1)
                    out.append((chunk[:limit], len(chunk) > limit))
            return out
        if head.startswith(b"\x1f\x8b"):
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif head.startswith(b"BZh"):
            d = bz2.BZ2Decompressor()
        elif head.startswith(b"\xfd7zXZ"):
            d = lzma.LZMADecompressor(lzma.FORMAT_XZ)
        elif head.startswith(b"\x5d\x00\x00"):
            d = lzma.LZMADecompressor(lzma.FORMAT_ALONE)
        else:
            d = zlib.decompressobj()
        view = memoryview(data)[at:]  # no copy per candidate signature
        if isinstance(d, (bz2.BZ2Decompressor, lzma.LZMADecompressor)):
            chunk = d.decompress(view, max_length=limit + 1)
        else:
            chunk = d.decompress(view, limit + 1)
        if chunk:
            out.append((chunk[:limit], len(chunk) > limit))
    except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError, zipfile.BadZipFile, NotImplementedError,
            RuntimeError):
        pass  # not a stream after all (or a broken one): its bytes were scanned as they are
    return out


_ESCAPE_PREFIX = re.compile(r"0x|\\x|\\u00|&#x|%(?=[0-9A-Fa-f]{2})", re.I)


_DECIMAL_RUN = re.compile(rb"(?:\d{1,3}[\s,;]+){7,}\d{1,3}")


_OCTAL_RUN = re.compile(rb"(?:\\[0-7]{1,3}){8,}")


_ENTITY = re.compile(r"&#\d{1,7};")


def _texts(data: bytes) -> list[str]:
    """The ways text can sit in these bytes: Latin-1 (every byte); with NUL bytes removed (UTF-16 and UTF-32
    of the canaries' ASCII, either byte order, any alignment); EBCDIC; UTF-8 folded to its plain letters
    (NFKD: fullwidth and compatibility forms, accents split off; invisible, combining and spacing characters removed); with
    escape prefixes removed (``0x74, 0x62`` or ``\\x74\\x62`` is then hex); numeric character references."""
    latin = data.decode("latin-1")
    texts = [latin]
    if b"\0" in data:
        texts.append(data.replace(b"\0", b"").decode("latin-1"))
    texts.append(data.decode(_EBCDIC))
    if not data.isascii():
        folded = unicodedata.normalize("NFKD", data.decode("utf-8", "ignore"))
        texts.append("".join(ch for ch in folded if unicodedata.category(ch)[0] not in "CMZ"))
    if _ESCAPE_PREFIX.search(latin):
        texts.append(_ESCAPE_PREFIX.sub("", latin))
    if "&#" in latin:
        texts.append(_ENTITY.sub(lambda m: chr(min(int(m.group()[2:-1]), 0x10FFFF)), latin))
    return texts


def _numbers(data: bytes) -> list[bytes]:
    """Bytes written as decimal lists (``116, 98, …``) or octal escapes (``\\164\\142…``)."""
    out = []
    for m in _DECIMAL_RUN.finditer(data):
        values = [int(v) for v in re.split(rb"[\s,;]+", m.group()) if v]
        if all(v < 256 for v in values):
            out.append(bytes(values))
    for m in _OCTAL_RUN.finditer(data):
        values = [int(v, 8) for v in m.group().split(b"\\") if v]
        if all(v < 256 for v in values):
            out.append(bytes(values))
    return out


def scan(canaries: list[str], blobs: list[bytes], bounds: ScanBounds = ScanBounds()) -> Scan:
    """Look for the canaries in ``blobs`` as the module docstring says."""
    result = Scan()
    for blob in blobs:
        _scan_bytes(canaries, blob, 0, bounds, result)
    return result


def _scan_bytes(canaries: list[str], data: bytes, depth: int, bounds: ScanBounds, result: Scan) -> None:
    if not data:
        return
    for text in _texts(data):  # a piece of a canary split over two files is a long fragment in one of them
        result.found |= set(find(canaries, text))
    for decoded in _numbers(data) + _b85_runs(data):
        result.found |= set(find(canaries, decoded.decode("latin-1")))
    if depth >= bounds.max_depth:
        if _MAGIC.search(data):
            result.reached(f"nesting deeper than {bounds.max_depth} layers was not opened")
        return
    offsets, zipped = [], False
    for m in _MAGIC.finditer(data):
        if m.group().startswith(b"PK"):
            if zipped:
                continue
            zipped = True
        offsets.append(m.start())
        if len(offsets) > MAX_SIGNATURES:
            result.reached(f"more than {MAX_SIGNATURES} compression signatures in one file: the rest not opened")
            break
    for offset in offsets[:MAX_SIGNATURES]:
        if result.streams >= bounds.max_streams:
            result.reached(f"more than {bounds.max_streams} compressed streams or encoded runs")
            return
        room = min(bounds.max_stream_bytes, bounds.max_total_bytes - result.decoded_bytes)
        if room <= 0:
            result.reached(f"more than {bounds.max_total_bytes} bytes decoded in all")
            return
        for out, cut in _decompress(data, offset, room):
            result.streams += 1
            result.decoded_bytes += len(out)
            if cut:
                result.reached(f"a compressed stream decompresses to more than {room} bytes (read that far)")
            _scan_bytes(canaries, out, depth + 1, bounds, result)
    squeezed = re.sub(rb"\s+", b"", data) if len(data) <= bounds.max_stream_bytes else data
    for rx, decode, alignments in ((_B64_RUN, _b64, 4), (_HEX_RUN, binascii.unhexlify, 1)):
        for m in rx.finditer(squeezed):
            for skip in range(alignments):  # the run may start inside the encoded payload's first group
                if result.streams >= bounds.max_streams:
                    result.reached(f"more than {bounds.max_streams} compressed streams or encoded runs")
                    return
                try:
                    out = decode(m.group()[skip:])
                except (binascii.Error, ValueError):
                    continue
                if not out or not (_MAGIC.search(out) or _B64_RUN.search(out) or _HEX_RUN.search(out) or b"\0" in out):
                    continue  # nothing further hides in it: its plain reading was checked by ``find`` already
                result.streams += 1
                result.decoded_bytes += len(out)
                _scan_bytes(canaries, out, depth + 1, bounds, result)


def _b85_runs(data: bytes) -> list[bytes]:
    """Runs that decode as base85 (Python's ``b85encode``) or Ascii85; most code does not, and is skipped."""
    out = []
    for rx, decode in ((_B85_RUN, base64.b85decode), (_A85_RUN, base64.a85decode)):
        for m in rx.finditer(data):
            try:
                out.append(decode(m.group()))
            except ValueError:
                continue
            if len(out) > 4096:
                return out
    return out


def _b64(run: bytes) -> bytes:
    run = run.rstrip(b"=")
    alt = b"-" in run or b"_" in run
    padded = run + b"=" * (-len(run) % 4)
    return base64.urlsafe_b64decode(padded) if alt else base64.b64decode(padded)
