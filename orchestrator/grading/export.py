"""Exporting the final workspace from the stopped sandbox, as data, within bounds, complete or saying so.

The engine streams ``/workspace`` as a tar; it is read member by member and
rewritten into a sanitized tar on the host: regular files (setuid, setgid and
sticky bits dropped), folders, and symlinks *as entries* (never followed);
a hard link becomes a regular file with its target's content (the engine
sends the second name of a file as a link to the first); devices, FIFOs and
sockets are left out and noted; ``.git`` is never exported; names with ``..``
or absolute paths are refused. Past ``max_bytes``, ``max_files`` or
``timeout_s`` the export stops and says so. Nothing from the workspace is
ever extracted onto the host's filesystem or executed there.

**Complete or it says so.** The engine's archive silently leaves out what it
cannot reach by one path (a path longer than ``PATH_MAX``). So the sandbox,
with every process of the agent stopped, is started again (its command only:
nothing of the agent's runs), and ``find`` lists the workspace's entries
(type, size, link count; NUL-separated, names as bytes) before it is stopped
again. Nothing can change the files between the archive and the listing.
Every listed entry the archive lacks is read on its own, through the
sandbox's shell one folder at a time (so no single path exceeds the limit);
whatever still differs (missing, a size that does not match) is a
``problem``: the ``export`` criterion is then critical and names the paths.

Paths are ``str`` with surrogate escapes for bytes that are not UTF-8
(Python's lossless convention; ``textsafe.path_bytes`` gives the bytes back).
"""

from __future__ import annotations

import hashlib
import io
import json
import posixpath
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import OutputLost, SandboxError
from ..sandbox.base import Sandbox
from ..textsafe import path_bytes, recordable

MAX_LINK_HOPS = 40
"""As the kernel: resolving a path follows at most this many symlinks (then ``ELOOP``)."""


@dataclass(frozen=True)
class ExportLimits:
    max_bytes: int = 512 << 20
    max_files: int = 100_000
    timeout_s: float = 300.0
    """The whole export (archive, listing, reads of what the archive missed)."""


@dataclass
class Tree:
    """A workspace as data: file contents by path, symlink targets, and what was left out."""

    files: dict[str, bytes] = field(default_factory=dict)
    executable: set[str] = field(default_factory=set)
    symlinks: dict[str, str] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)
    skipped: list[str] = field(default_factory=list)
    """Notes on what was left out by design (special files, dropped mode bits)."""
    truncated: bool = False
    problems: list[str] = field(default_factory=list)
    """What the export could not bring over although it exists in the sandbox: the tree is incomplete."""

    @property
    def complete(self) -> bool:
        return not (self.truncated or self.problems)

    def digest(self) -> str:
        h = hashlib.sha256()
        for p in sorted(self.files):
            h.update(b"f " + path_bytes(p) + (b" x " if p in self.executable else b" - ")
                     + hashlib.sha256(self.files[p]).digest())
        for p in sorted(self.symlinks):
            h.update(b"l " + path_bytes(p) + b" " + path_bytes(self.symlinks[p]) + b"\0")
        return h.hexdigest()

    def notes(self) -> dict:
        """What the export left out or could not bring over, as recordable data."""
        return {"truncated": self.truncated, "problems": [recordable(p) for p in self.problems],
                "notes": [recordable(s) for s in self.skipped]}

    def to_tar(self, path: Path | None = None, uid: int = 1000, gid: int = 1000) -> bytes:
        """A tar of the tree (owned by uid:gid); written to ``path`` too when given, with the export's
        notes beside it (``<name>.json``) so a stored workspace keeps saying what it lacks."""
        buf = io.BytesIO()
        now = int(time.time())  # fresh mtimes: no bytecode cached against an old timestamp can match
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
            for d in sorted(self.dirs):
                ti = tarfile.TarInfo(d)
                ti.type, ti.mode, ti.uid, ti.gid, ti.mtime = tarfile.DIRTYPE, 0o755, uid, gid, now
                tf.addfile(ti)
            for p in sorted(self.files):
                ti = tarfile.TarInfo(p)
                ti.size, ti.uid, ti.gid, ti.mtime = len(self.files[p]), uid, gid, now
                ti.mode = 0o755 if p in self.executable else 0o644
                tf.addfile(ti, io.BytesIO(self.files[p]))
            for p in sorted(self.symlinks):
                ti = tarfile.TarInfo(p)
                ti.type, ti.linkname, ti.uid, ti.gid, ti.mtime = tarfile.SYMTYPE, self.symlinks[p], uid, gid, now
                tf.addfile(ti)
        data = buf.getvalue()
        if path is not None:
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
            path.with_suffix(".json").write_text(json.dumps(self.notes(), indent=2))
        return data


def resolve(tree: Tree, path: str, workdir: str = "/workspace", max_hops: int = MAX_LINK_HOPS) -> str | None:
    """Where ``path`` (relative to the workspace) leads, resolved component by component as the kernel
    would, against ``tree``'s symlinks: the workspace-relative result, or None when it leaves the
    workspace or takes more than ``max_hops`` links (a loop).

    An absolute target counts as inside only when it names ``workdir`` or a path under it; outside the
    workspace nothing is known, so ``/tmp/../workspace/x`` is treated as leaving (conservative)."""
    pending = [p for p in reversed(path.split("/"))]
    done: list[str] = []
    hops = 0
    root = workdir.strip("/").split("/")
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not done:
                return None
            done.pop()
            continue
        here = "/".join([*done, part])
        target = tree.symlinks.get(here)
        if target is None:
            done.append(part)
            continue
        hops += 1
        if hops > max_hops:
            return None
        if target.startswith("/"):
            parts = [p for p in target.split("/") if p not in ("", ".")]
            if parts[:len(root)] != root or ".." in parts[:len(root)]:
                return None
            done, target = [], "/".join(parts[len(root):])
        pending.extend(reversed(target.split("/")))
    return "/".join(done)


def leaves_workspace(tree: Tree, link: str) -> bool:
    """Whether the symlink at ``link`` (or anything through it) resolves outside the workspace."""
    return resolve(tree, link) is None


class _ChunkReader(io.RawIOBase):
    def __init__(self, chunks: Iterator[bytes], deadline: float | None = None) -> None:
        self.chunks, self.buf, self.deadline = chunks, b"", deadline

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        while not self.buf:
            if self.deadline is not None and time.monotonic() > self.deadline:
                raise TimeoutError("the export took longer than its bound")
            try:
                self.buf = next(self.chunks)
            except StopIteration:
                return 0
        n = min(len(b), len(self.buf))
        b[:n], self.buf = self.buf[:n], self.buf[n:]
        return n


def _clean(name: str, root: str) -> str | None:
    """The member's path relative to ``root`` ("" for none), or None when outside it or unsafe."""
    name = name[2:] if name.startswith("./") else name
    if root:
        if name == root or not name.startswith(root + "/"):
            return None
        name = name[len(root) + 1:]
    rel = name
    if not rel:
        return None
    norm = posixpath.normpath(rel)
    if norm.startswith("../") or norm == ".." or norm.startswith("/") or norm == ".":
        return None
    return norm


def _is_git(rel: str) -> bool:
    return rel == ".git" or rel.startswith(".git/")


def read_tar(stream: io.RawIOBase | io.BufferedIOBase, root: str, limits: ExportLimits) -> Tree:
    """Read a tar stream whose members sit under ``root/`` into a ``Tree`` (bounded)."""
    tree, total = Tree(), 0
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tf:
            for member in tf:
                rel = _clean(member.name, root)
                if rel is None or _is_git(rel):
                    continue
                if len(tree.files) + len(tree.symlinks) >= limits.max_files or total + max(member.size, 0) > limits.max_bytes:
                    tree.truncated = True
                    tree.skipped.append(f"{rel}: export limit reached ({limits.max_files} files, {limits.max_bytes} bytes)")
                    break
                if member.isdir():
                    tree.dirs.add(rel)
                elif member.isreg():
                    data = tf.extractfile(member).read()  # type: ignore[union-attr]
                    tree.files[rel] = data
                    total += len(data)
                    if member.mode & 0o111:
                        tree.executable.add(rel)
                    if member.mode & 0o7000:
                        tree.skipped.append(f"{rel}: setuid/setgid/sticky bits dropped")
                elif member.issym():
                    tree.symlinks[rel] = member.linkname
                elif member.islnk():  # the same file under a second name: a regular file with that content
                    first = _clean(member.linkname, root)
                    if first is not None and first in tree.files:
                        if total + len(tree.files[first]) > limits.max_bytes:
                            tree.truncated = True
                            tree.skipped.append(f"{rel}: export limit reached ({limits.max_bytes} bytes)")
                            break
                        tree.files[rel] = tree.files[first]
                        total += len(tree.files[first])
                        if first in tree.executable:
                            tree.executable.add(rel)
                    else:  # its first name was not exported (.git, or outside): read on its own below
                        tree.skipped.append(f"{rel}: hard link to {member.linkname} whose first name is not exported")
                else:
                    tree.skipped.append(f"{rel}: special file (device, FIFO or socket) left out")
    except TimeoutError:
        tree.truncated = True
        tree.skipped.append(f"the export took longer than {limits.timeout_s:.0f}s and was cut off")
    return tree


# Lists the workspace: type, size, link count and path (bytes, NUL-terminated), .git pruned; "END" last.
# Whatever stops it from seeing everything (a folder it cannot enter) is an "ERR" record: never silence.
LIST_SCRIPT = r"""if ! cd "$1" 2>/dev/null; then printf 'ERR\tthe workspace cannot be entered\0END\0'; exit 0; fi
find . -path ./.git -prune -o ! -path . -printf '%y\t%s\t%n\t%P\0' 2>/tmp/.trialbox-find.err
rc=$?
if [ "$rc" -ne 0 ] || [ -s /tmp/.trialbox-find.err ]; then
  printf 'ERR\tthe listing is incomplete (find exited %s): %s\0' "$rc" "$(head -c 1500 /tmp/.trialbox-find.err | tr '\000\n' '  ')"
fi
printf 'END\0'"""
# Reads one entry through a chain of relative `cd`s (no path handed to a syscall exceeds the limit):
# "f <size>\n<bytes>" for a regular file, "l\n<target>" for a symlink, "d\n" for a folder.
READ_SCRIPT = r"""cd "$1" || exit 3
shift
while [ "$#" -gt 0 ]; do
  p=$(printf '%bx' "$1"); p=${p%x}  # each piece arrives as octal escapes: any byte of a name survives
  shift
  if [ "$#" -gt 0 ]; then cd -P "./$p" || exit 3; fi  # -P: chdir to the relative piece, not to a joined path
done
if [ -L "$p" ]; then printf 'l\n'; exec readlink -- "$p"; fi
if [ -d "$p" ]; then printf 'd\n'; exit 0; fi
[ -f "$p" ] || exit 3
n=$(wc -c < "$p") || exit 3
printf 'f %s\n' "$n"; exec cat -- "$p"
"""
CHUNK_BYTES = 2048
"""A long path is walked in pieces of at most this many bytes (well under ``PATH_MAX``, 4096)."""


@dataclass(frozen=True)
class Entry:
    kind: str  # f d l p s c b (find's %y)
    size: int
    links: int


def parse_listing(data: bytes, errors: list[str] | None = None) -> dict[str, Entry] | None:
    """``find``'s records by path; None when the output is incomplete (no end marker). What kept the listing
    from being whole (``ERR`` records) is appended to ``errors``."""
    records = data.split(b"\0")
    if len(records) < 2 or records[-2] != b"END" or records[-1] != b"":
        return None
    out = {}
    for record in records[:-2]:
        if record.startswith(b"ERR\t"):
            if errors is not None:
                errors.append(record[4:].decode("utf-8", "backslashreplace"))
            continue
        kind, _, rest = record.partition(b"\t")
        size, _, rest = rest.partition(b"\t")
        links, _, name = rest.partition(b"\t")
        if not name or not size.isdigit() or not links.isdigit():
            return None
        out[name.decode("utf-8", "surrogateescape")] = Entry(kind.decode("ascii", "replace"), int(size), int(links))
    return out


def _pieces(path: str) -> list[str]:
    """``path``'s folders grouped into pieces of at most CHUNK_BYTES, then its last component."""
    parts = path.split("/")
    pieces: list[str] = []
    for part in parts[:-1]:
        if pieces and len(path_bytes(pieces[-1])) + 1 + len(path_bytes(part)) <= CHUNK_BYTES:
            pieces[-1] += "/" + part
        else:
            pieces.append(part)
    return [*pieces, parts[-1]]


def _read_entry(sandbox: Sandbox, workdir: str, path: str, max_bytes: int) -> tuple[str, bytes] | None:
    """One entry the archive missed, read inside the sandbox; None when it cannot be read whole."""
    args = [workdir, *("".join(f"\\0{b:03o}" for b in path_bytes(p)) for p in _pieces(path))]
    for _ in range(4):  # the engine can lose a short exec's output: read again
        try:
            res = sandbox.exec(["sh", "-c", READ_SCRIPT, "sh", *args], timeout=60)
        except OutputLost:
            continue
        if res.exit_code != 0 or res.stdout_size > len(res.stdout):
            return None
        head, newline, body = res.stdout.partition(b"\n")
        if not newline:
            continue
        if head == b"d":
            return "d", b""
        if head == b"l":
            return "l", body[:-1] if body.endswith(b"\n") else body
        if head.startswith(b"f ") and head[2:].isdigit():
            size = int(head[2:])
            if size > max_bytes:
                return None
            if len(body) == size:
                return "f", body
    return None


def _complete(tree: Tree, sandbox: Sandbox, workdir: str, limits: ExportLimits, deadline: float) -> None:
    """Compare the archive with the sandbox's own listing; read what the archive missed; note the rest."""
    listing = None
    for _ in range(4):
        try:
            res = sandbox.exec(["sh", "-c", LIST_SCRIPT, "sh", workdir], timeout=max(5.0, deadline - time.monotonic()))
        except OutputLost:
            continue
        if res.timed_out or res.stdout_size > len(res.stdout):
            tree.problems.append("the workspace's listing did not fit the export bounds: it cannot be checked whole")
            return
        errors: list[str] = []
        listing = parse_listing(res.stdout, errors)
        if listing is not None:
            tree.problems += errors  # the sandbox's own listing is not whole: what it cannot see cannot be checked
            break
    if listing is None:
        raise SandboxError("the engine kept losing the output of the workspace listing", container=sandbox.spec.name)
    total = sum(len(b) for b in tree.files.values())
    for path in sorted(listing):
        entry = listing[path]
        if entry.kind in ("p", "s", "c", "b"):
            if not any(n.startswith(f"{path}: special file") for n in tree.skipped):
                tree.skipped.append(f"{path}: special file (device, FIFO or socket) left out")
            continue
        have = path in tree.files if entry.kind == "f" else path in tree.symlinks if entry.kind == "l" \
            else path in tree.dirs if entry.kind == "d" else True
        if have:
            if entry.kind == "f" and len(tree.files[path]) != entry.size:
                tree.problems.append(f"{path}: {entry.size} bytes in the sandbox, {len(tree.files[path])} exported")
            continue
        if tree.truncated:
            continue  # already said: the export stopped at its bounds
        if time.monotonic() > deadline or len(tree.files) + len(tree.symlinks) >= limits.max_files:
            tree.truncated = True
            tree.skipped.append(f"{path}: export bounds reached while reading what the archive missed")
            continue
        got = _read_entry(sandbox, workdir, path, limits.max_bytes - total)
        if got is None or got[0] != entry.kind:
            tree.problems.append(f"{path}: in the sandbox ({entry.kind}, {entry.size} bytes), not exported")
            continue
        kind, data = got
        if kind == "d":
            tree.dirs.add(path)
        elif kind == "l":
            tree.symlinks[path] = data.decode("utf-8", "surrogateescape")
        else:
            tree.files[path] = data
            total += len(data)
        tree.skipped.append(f"{path}: not in the engine's archive (too long a path?), read on its own")
    tree.skipped = [s for s in tree.skipped if "whose first name is not exported" not in s
                    or s.rsplit(": hard link to ", 1)[0] not in tree.files]  # read on its own since: not a gap


def export_workspace(sandbox: Sandbox, workdir: str = "/workspace", limits: ExportLimits = ExportLimits()) -> Tree:
    """The final workspace of a stopped sandbox, as data, checked against its own listing (see above).

    The sandbox is started again for the listing and stopped before this returns."""
    root = posixpath.basename(workdir.rstrip("/"))
    deadline = time.monotonic() + limits.timeout_s
    stream = sandbox.copy_out(workdir)
    try:
        tree = read_tar(io.BufferedReader(_ChunkReader(iter(stream), deadline)), root, limits)
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()  # a stream left half-read (the export's bounds) would hold the container
    resume = getattr(sandbox, "resume", None)  # on the contract; a stand-in without it cannot be listed
    if resume is None:
        tree.skipped.append("this sandbox cannot list its workspace: the export was not checked against a listing")
        return tree
    resume()
    try:
        _complete(tree, sandbox, workdir, limits, deadline)
    finally:
        sandbox.stop()
    return tree


def tree_from_tar(path: Path, limits: ExportLimits = ExportLimits()) -> Tree:
    """A ``Tree`` from a tar on the host whose members are relative paths (the trusted
    original repository, or a stored final workspace, whose export notes are read back)."""
    with open(path, "rb") as fh:
        tree = read_tar(fh, "", limits)
    notes = path.with_suffix(".json")
    if notes.is_file():
        recorded = json.loads(notes.read_text())
        tree.truncated = tree.truncated or bool(recorded.get("truncated"))
        tree.problems = list(recorded.get("problems") or [])
        tree.skipped = list(recorded.get("notes") or tree.skipped)
    return tree
