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

**On the host, from the disk** (``Sandbox.host_archive``, ``sandbox/hostdisk.py``), where the workspace is a
disk of its own and trialbox may mount it: once the container has stopped, the host archives the disk mounted
read-only in a mount namespace of its own; nothing runs in the sandbox and no listing is needed (tar, as root,
walks every path however long and says what it could not read; that is a ``problem``). What follows is the path
where the host cannot.

**Complete or it says so.** The engine's archive silently leaves out what it
cannot reach by one path (a path longer than ``PATH_MAX``). So the sandbox,
with every process of the agent stopped, is started again (its command only:
nothing of the agent's runs), and ``find`` lists the workspace's entries
(type, size, link count; NUL-separated, names as bytes) before it is stopped
again. Nothing can change the files between the archive and the listing. Where the host's kernel keeps a
process from tracing one it did not start (``agents.session.ptrace_restricted``), the listing is instead taken
before the stop, in the command that first kills every process the agent left (``list_workspace`` with
``kill_first``), and the sandbox is started again only when an entry must be read on its own.
Every listed entry the archive lacks is read on its own, through the
sandbox's shell one folder at a time (so no single path exceeds the limit);
whatever still differs (missing, a size that does not match) is a
``problem``: the ``export`` criterion is then critical and names the paths.

Paths are ``str`` with surrogate escapes for bytes that are not UTF-8
(Python's lossless convention; ``textsafe.path_bytes`` gives the bytes back).
"""

from __future__ import annotations

import io
import posixpath
import tarfile
import time
from dataclasses import dataclass

from ..errors import OutputLost, SandboxError
from ..log import get_logger
from ..sandbox.base import Sandbox
from ..sandbox.dockerexec import KILL_FUNCTION, SYSTEM_PATH
from ..textsafe import path_bytes
from .tree import ChunkReader, ExportLimits, Tree, read_tar

log = get_logger("export")


# Lists the workspace: type, size, link count and path (bytes, NUL-terminated), .git pruned; "END" last.
# Whatever stops it from seeing everything (a folder it cannot enter) is an "ERR" record: never silence.
LIST_SCRIPT = r"""if ! cd "$1" 2>/dev/null; then printf 'ERR\tthe workspace cannot be entered\0END\0'; exit 0; fi
exec 3>&1
errs=$(find . -path ./.git -prune -o ! -path . -printf '%y\t%s\t%n\t%P\0' 2>&1 1>&3; echo "rc=$?")
rc=${errs##*rc=}; errs=${errs%rc=*}
if [ "$rc" -ne 0 ] || [ -n "$errs" ]; then
  printf 'ERR\tthe listing is incomplete (find exited %s): %s\0' "$rc" "$(printf %s "$errs" | head -c 1500 | tr '\000\n' '  ')"
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


@dataclass(frozen=True)
class Listing:
    """The sandbox's own listing of its workspace, taken with no process of the agent left (``list_workspace``)."""

    entries: dict | None
    """Path → ``Entry``; None when it did not fit the export bounds."""
    errors: tuple[str, ...] = ()


def list_workspace(sandbox: Sandbox, workdir: str, timeout: float, kill_first: bool = False) -> Listing | None:
    """List the workspace (``LIST_SCRIPT``); ``SandboxError`` when the engine keeps losing the output. With
    ``kill_first``, in the same command, every process left but the sandbox's init and command is killed first
    (``KILL_FUNCTION``); None when they could not all be killed."""
    script = ["sh", "-c", LIST_SCRIPT] if not kill_first else \
        ["bash", "-c", KILL_FUNCTION + "kill_leftovers || exit 5\n" + LIST_SCRIPT]
    for _ in range(4):
        try:  # the image's own find, never one the agent planted on a PATH folder it can write
            res = sandbox.exec([*script, "sh", workdir], timeout=max(5.0, timeout), env={"PATH": SYSTEM_PATH})
        except OutputLost:
            continue
        if kill_first and res.exit_code != 0:
            return None  # what the agent left could not all be killed (or the command did not run): list after the stop
        if res.timed_out or res.stdout_size > len(res.stdout):
            return Listing(None)
        errors: list[str] = []
        entries = parse_listing(res.stdout, errors)
        if entries is not None:
            return Listing(entries, tuple(errors))
    raise SandboxError("the engine kept losing the output of the workspace listing", container=sandbox.spec.name)


def _missing(tree: Tree, listing: Listing) -> list[str]:
    """Compare the archive with the listing: note special files and size differences; the paths it lacks."""
    if listing.entries is None:
        tree.problems.append("the workspace's listing did not fit the export bounds: it cannot be checked whole")
        return []
    tree.problems += listing.errors  # the sandbox's own listing is not whole: what it cannot see cannot be checked
    out = []
    for path in sorted(listing.entries):
        entry = listing.entries[path]
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
        out.append(path)
    return out


def _complete(tree: Tree, sandbox: Sandbox, workdir: str, limits: ExportLimits, deadline: float,
              listing: Listing | None = None) -> None:
    """Compare the archive with the sandbox's own listing (``listing``, or one taken now); read what the archive
    missed (the sandbox running); note the rest."""
    if listing is None:
        listing = list_workspace(sandbox, workdir, deadline - time.monotonic())
    assert listing is not None
    missing = _missing(tree, listing)
    if not missing:
        return
    _read_missing(tree, sandbox, workdir, limits, deadline, listing, missing)


def _read_missing(tree: Tree, sandbox: Sandbox, workdir: str, limits: ExportLimits, deadline: float,
                  listing: Listing, missing: list[str]) -> None:
    total = sum(len(b) for b in tree.files.values())
    for path in missing:
        entry = listing.entries[path]  # type: ignore[index]
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


def _tidy(tree: Tree) -> Tree:
    tree.skipped = [s for s in tree.skipped if "whose first name is not exported" not in s
                    or s.rsplit(": hard link to ", 1)[0] not in tree.files]  # read on its own since: not a gap
    return tree


def _export_on_host(sandbox: Sandbox, limits: ExportLimits, deadline: float) -> Tree | None:
    """The workspace archived on the host from the stopped sandbox's disk (``Sandbox.host_archive``): whole, or
    its problems say what tar could not read; None when the host cannot (the engine's archive is used)."""
    archive = sandbox.host_archive(deadline)
    if archive is None:
        return None
    failed = None
    with archive:
        try:
            tree = read_tar(io.BufferedReader(ChunkReader(archive.chunks(), deadline)), "", limits)
            if not tree.truncated:
                archive.finish()  # to the end of the stream: tar's exit status says whether it read everything
        except (tarfile.TarError, TimeoutError) as exc:
            tree, failed = Tree(), exc
    if getattr(archive, "unavailable", False):
        log.warning("the workspace could not be archived on the host; through the engine instead",
                    sandbox=sandbox.spec.name, problems=archive.problems)
        return None
    tree.problems += archive.problems
    tree.skipped += getattr(archive, "notes", [])
    # tar archives the second name of a file as a link to the first only once it archived the first: a link
    # whose first name is missing is a gap of this archive (the engine's path reads it on its own instead)
    gaps = [s for s in tree.skipped if "whose first name is not exported" in s]
    tree.skipped = [s for s in tree.skipped if s not in gaps]
    tree.problems += gaps
    if failed is not None and not archive.problems:
        tree.problems.append(f"the host's archive of the workspace could not be read: {failed}")
    return tree


def export_workspace(sandbox: Sandbox, workdir: str = "/workspace", limits: ExportLimits = ExportLimits(),
                     listing: Listing | None = None) -> Tree:
    """The final workspace of a stopped sandbox, as data, checked against its own listing (see above).

    ``listing``: one taken before the sandbox stopped, once no process of the agent was left (``Sandbox.kill_
    leftovers``): nothing could change the files since. Without one, or when the archive lacks an entry that
    has to be read on its own, the sandbox is started again (its command only) and stopped before this returns."""
    deadline = time.monotonic() + limits.timeout_s
    on_host = _export_on_host(sandbox, limits, deadline)
    if on_host is not None:
        return _tidy(on_host)
    root = posixpath.basename(workdir.rstrip("/"))
    stream = sandbox.copy_out(workdir)
    try:
        tree = read_tar(io.BufferedReader(ChunkReader(iter(stream), deadline)), root, limits)
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()  # a stream left half-read (the export's bounds) would hold the container
    missing = None
    if listing is not None:
        missing = _missing(tree, listing)
        if not missing:
            return _tidy(tree)  # checked whole against the listing taken before the stop: no restart
    resume = getattr(sandbox, "resume", None)  # on the contract; a stand-in without it cannot be listed
    if resume is None:
        tree.skipped.append("this sandbox cannot list its workspace: the export was not checked against a listing")
        return tree
    resume()
    try:
        if listing is not None and missing:
            _read_missing(tree, sandbox, workdir, limits, deadline, listing, missing)
        else:
            _complete(tree, sandbox, workdir, limits, deadline)
    finally:
        sandbox.stop()
    return _tidy(tree)


