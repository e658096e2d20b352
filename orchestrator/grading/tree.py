"""A workspace as data: the ``Tree`` an export yields, read from a tar into a sanitized one, never onto the host.

``read_tar`` reads a tar member by member: regular files (setuid, setgid and sticky bits dropped), folders, and
symlinks *as entries* (never followed); a hard link becomes a regular file with its target's content; devices,
FIFOs and sockets are left out and noted; ``.git`` is never kept; names with ``..`` or absolute paths are
refused. Past ``ExportLimits`` it stops and says so. ``resolve`` follows a symlink inside the tree, as data.
Paths are ``str`` with surrogate escapes for bytes that are not UTF-8 (``textsafe.path_bytes`` gives the bytes
back).
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

    def to_tar(self, path: Path | None = None, uid: int = 1000, gid: int = 1000,
               root_owned: frozenset[str] | set[str] = frozenset(),
               root_dirs: frozenset[str] | set[str] = frozenset()) -> bytes:
        """A tar of the tree (owned by uid:gid); written to ``path`` too when given, with the export's
        notes beside it (``<name>.json``) so a stored workspace keeps saying what it lacks.

        ``root_owned``: files owned by root (mode 0444) and their folders owned by root with the sticky bit
        (mode 1777: anyone creates files there, only a file's owner removes or renames it), so no process of
        uid:gid can change, replace, move or remove them (the pytest grader's trusted files); ``root_dirs``: more
        folders owned by root with the sticky bit (what appears in them, root can set aside)."""
        sticky = {"/".join(p.split("/")[:i]) for p in root_owned for i in range(1, p.count("/") + 1)} | set(root_dirs)
        buf = io.BytesIO()
        now = int(time.time())  # fresh mtimes: no bytecode cached against an old timestamp can match
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
            for d in sorted(self.dirs):
                ti = tarfile.TarInfo(d)
                ti.type, ti.mode, ti.uid, ti.gid, ti.mtime = tarfile.DIRTYPE, 0o755, uid, gid, now
                if d in sticky:
                    ti.mode, ti.uid, ti.gid = 0o1777, 0, 0
                tf.addfile(ti)
            for p in sorted(self.files):
                ti = tarfile.TarInfo(p)
                ti.size, ti.uid, ti.gid, ti.mtime = len(self.files[p]), uid, gid, now
                ti.mode = 0o755 if p in self.executable else 0o644
                if p in root_owned:
                    ti.mode, ti.uid, ti.gid = 0o444, 0, 0
                tf.addfile(ti, io.BytesIO(self.files[p]))
            for p in sorted(self.symlinks):
                ti = tarfile.TarInfo(p)
                ti.type, ti.linkname, ti.uid, ti.gid, ti.mtime = tarfile.SYMTYPE, self.symlinks[p], uid, gid, now
                if p in root_owned:
                    ti.uid, ti.gid = 0, 0
                tf.addfile(ti)
        data = buf.getvalue()
        if path is not None:  # each whole or absent (a full disk mid-write leaves neither a part nor a temp file)
            from ..hostspace import write_atomic

            write_atomic(path, data)
            write_atomic(path.with_suffix(".json"), json.dumps(self.notes(), indent=2))
        return data


def resolve(tree: Tree, path: str, workdir: str = "/workspace", max_hops: int = MAX_LINK_HOPS) -> str | None:
    """Where ``path`` (relative to the workspace) leads, resolved component by component as the kernel
    would, against ``tree``'s symlinks: the workspace-relative result, or None when it leaves the
    workspace or takes more than ``max_hops`` links (a loop).

    An absolute target counts as inside only when it names ``workdir`` or a path under it; outside the
    workspace nothing is known, so ``/tmp/../workspace/x`` is treated as leaving (conservative).
    Resolving many paths of one tree: ``Resolver``, which shares the work."""
    return Resolver(tree, workdir, max_hops).resolve(path)



DANGLING = "\0nowhere"
"""What ``resolve`` answers for a path that passes more than ``DEPTH_SLACK`` names into folders the tree does not
have: there is nothing there, so the kernel fails on it (a link to it leads nowhere, neither out of the workspace
nor to a file). No real path holds a NUL."""

DEPTH_SLACK = 64
"""How many names a resolution may pass into folders the tree does not have before it leads nowhere: room for what
the grader adds to the workspace (its tests' folders), which is never that deep. It bounds what a resolution
builds whatever the tree (the nineteenth review: chains resolving 78,000 folders deep took 1.8 GB; the
twenty-first: 700 links 2,040 names past a real folder 2,040 deep took 3.7 GB while the bound was counted from the
tree's deepest entry)."""


class _Node:
    """A place in the workspace's path space: its name, its folder, the places below it that the tree has, the
    link there, and how many names past the tree's last folder it lies (0: the tree has it)."""

    __slots__ = ("name", "parent", "children", "link", "beyond", "_path")

    def __init__(self, name: str, parent: "_Node | None", beyond: int = 0) -> None:
        self.name, self.parent, self.beyond = name, parent, beyond
        self.children: dict[str, _Node] = {}
        self.link: str | None = None
        self._path: str | None = None

    def path(self) -> str:
        """The workspace-relative path, made when asked and kept on this place only (never on every folder above
        it: for a deep chain that was memory of its depth squared)."""
        if self._path is None:
            names, node = [], self
            while node is not None and node.parent is not None:
                names.append(node.name)
                node = node.parent
            self._path = "/".join(reversed(names))
        return self._path


_NOWHERE = _Node("\0nowhere", None)  # the resolution that passed past the bound


class Resolver:
    """``resolve`` for every path of one tree, each link's own target resolved once (the eighteenth review: 600
    links through a chain of 39 links with 4 KB targets took 200 s of host CPU, each resolution rebuilding the
    path so far at every component). A resolution is a place: the tree's own places are made once, from its
    entries; a name the tree does not have is a place made for that walk only, never kept below its folder, and
    at most ``DEPTH_SLACK`` of them in a row. What a link leads to is one reference, shared wherever a path passes
    through it. So the memory and time of all resolutions are bounded by the tree's entries and its links' targets,
    whatever their depth (the twentieth and twenty-first reviews). A link's resolution does not depend on the path
    that reached it: its folder is a real one (a tree's paths are physical) and its target is resolved from there."""

    def __init__(self, tree: Tree, workdir: str = "/workspace", max_hops: int = MAX_LINK_HOPS) -> None:
        self.root_parts = workdir.strip("/").split("/")
        self.max_hops = max_hops
        self.root = _Node("", None)
        # every entry's place, walked name by name from the root (no folder's path is ever made as a string: a
        # link at the bottom of a chain 32,700 deep had cost 1 GB of prefixes, the twenty-first review); the work
        # is the sum of the entries' depths, at most half the bytes of their names
        for path in (*tree.dirs, *tree.files, *tree.symlinks):
            node = self.root
            for name in path.split("/"):
                below = node.children.get(name)
                if below is None:
                    below = node.children[name] = _Node(name, node)
                node = below
            if path in tree.symlinks:
                node.link = tree.symlinks[path]
        self.known: dict[int, tuple[_Node | None, int]] = {}

    def resolve(self, path: str) -> str | None:
        """The workspace-relative path ``path`` leads to; None when it leaves the workspace or loops; ``DANGLING``
        when it passes more than ``DEPTH_SLACK`` names into folders the tree does not have."""
        node, _ = self._walk(self.root, path, 0)
        return None if node is None else DANGLING if node is _NOWHERE else node.path()

    def _link(self, node: _Node) -> tuple[_Node | None, int]:
        """Where the link at ``node`` leads (None: out of the workspace, or a loop) and the hops that took."""
        key = id(node)
        if key in self.known:
            return self.known[key]
        self.known[key] = (None, self.max_hops + 1)  # while it is being resolved: a loop back to it is a loop
        target = node.link or ""
        start = node.parent or self.root
        if target.startswith("/"):
            parts = [p for p in target.split("/") if p not in ("", ".")]
            if parts[:len(self.root_parts)] != self.root_parts or ".." in parts[:len(self.root_parts)]:
                return self.known[key]
            start, target = self.root, "/".join(parts[len(self.root_parts):])
        got = self._walk(start, target, 1)
        self.known[key] = got
        return got

    def _walk(self, at: _Node, rest: str, hops: int) -> tuple[_Node | None, int]:
        for part in rest.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if at.parent is None:
                    return None, hops
                at = at.parent
                continue
            nxt = at.children.get(part)
            if nxt is None:  # a name the tree does not have: a place for this walk only
                if at.beyond >= DEPTH_SLACK:
                    return _NOWHERE, hops
                at = _Node(part, at, at.beyond + 1)
                continue
            if nxt.link is not None:
                real, used = self._link(nxt)
                hops += used
                if real is None or hops > self.max_hops:
                    return None, hops
                if real is _NOWHERE:
                    return _NOWHERE, hops
                at = real
                continue
            at = nxt
        return at, hops


FOLLOWED_NAME_BYTES = 64 << 20
"""The most bytes of path names ``followed`` adds (a link at a long path to the workspace's root copies every
path under its own: the sixteenth review reached 13 GB of host memory with four such links)."""


def followed(tree: Tree, workdir: str = "/workspace", limit: int | None = None,
             name_bytes: int = FOLLOWED_NAME_BYTES) -> Tree:
    """``tree`` as a program reading the workspace sees it: every symlink that resolves inside the workspace also
    stands for what it leads to (a link to a file is that file at the link's path, with its mode; a link to a
    folder brings that folder's files under the link's path). Checks of *where* a file is and *what* it holds
    (a ``PATH`` folder, a folder Python imports from, distribution metadata) are made on this view, so a link can
    put nothing in such a place unseen (the fifteenth review: a metadata file or folder, a ``PATH`` folder, a
    ``PYTHONPATH`` folder replaced by a link). Links stay entries too. Every link is expanded from the view so far,
    pass after pass until a pass adds nothing (a link inside a linked folder is seen through whatever the order:
    the sixteenth review's ``tools/bin -> ../zz`` with ``zz/python3`` a link), at most ``MAX_LINK_HOPS`` passes as
    the kernel follows at most that many links. The work is linear in the view's size per pass (an index of
    folders); past ``limit`` paths (default: four times the tree's entries, plus 100,000) or ``name_bytes`` of
    added names, expansion stops, the view is ``truncated`` and its ``problems`` say so."""
    view = Tree(files=dict(tree.files), executable=set(tree.executable), symlinks=dict(tree.symlinks),
                dirs=set(tree.dirs))
    cap = limit if limit is not None else 4 * (len(tree.files) + len(tree.symlinks)) + 100_000
    children: dict[str, set[str]] = {}
    added_bytes = work = 0

    def index(path: str) -> None:
        parent, _, name = path.rpartition("/")
        while True:
            known = children.setdefault(parent, set())
            if name in known:
                return
            known.add(name)
            if not parent:
                return
            parent, _, name = parent.rpartition("/")

    for p in view.files:
        index(p)
    resolver = Resolver(tree, workdir)
    targets = {link: resolver.resolve(link) for link in tree.symlinks}
    for _ in range(MAX_LINK_HOPS):
        grew = False
        for link in sorted(tree.symlinks, key=lambda p: (-p.count("/"), p)):
            real = targets[link]
            if real is None or real == link or real == DANGLING:
                continue
            if real in view.files:
                found = [(link, real)]
            else:
                found, stack, pending = [], [real], 0
                while stack:
                    d = stack.pop()
                    for name in list(children.get(d, ())):
                        work += 1
                        q = f"{d}/{name}" if d else name
                        if q in view.files:
                            new = f"{link}/{q[len(real) + 1:]}" if real else f"{link}/{q}"
                            if new not in view.files:  # a later pass walks again what is there already
                                pending += len(new)
                                found.append((new, q))
                        elif not q.startswith(f"{link}/") and q != link:  # never into the link's own expansion
                            stack.append(q)
                    if added_bytes + pending > name_bytes or work > 10 * cap:  # bounded while walking, not after
                        stack = []
                        found.append(("", ""))  # stands for the rest: the bound below is reached
            for new, old in found:
                if new in view.files:
                    continue
                added_bytes += len(new) or name_bytes + 1
                if len(view.files) >= cap or added_bytes > name_bytes:
                    view.truncated = True
                    view.problems.append(f"the workspace's links lead to more than {cap} paths or {name_bytes} "
                                         "bytes of names: followed until then")
                    return view
                view.files[new] = view.files[old]
                if old in view.executable:
                    view.executable.add(new)
                index(new)
                grew = True
        if not grew:
            break
    return view


def changed_in(tree: Tree, original: Tree | None) -> list[str]:
    """Paths of ``tree`` that ``original`` does not have with the same content (added or changed): files, and
    symlinks by their target."""
    if original is None:
        return []
    # a path that was a link and is now a file changed; in a ``followed`` view a link is both (a file at its path
    # too), so an untouched link is no change (the seventeenth review: every link to a file counted as changed)
    out = [p for p, b in tree.files.items()
           if original.files.get(p) != b or (p in original.symlinks and p not in tree.symlinks)]
    out += [p for p, t in tree.symlinks.items() if original.symlinks.get(p) != t]
    return sorted(out)


def leaving_links(tree: Tree, workdir: str = "/workspace") -> set[str]:
    """The symlinks of ``tree`` that (or anything through which) resolve outside the workspace at ``workdir``."""
    resolver = Resolver(tree, workdir)
    return {link for link in tree.symlinks if resolver.resolve(link) is None}


def leaves_workspace(tree: Tree, link: str, workdir: str = "/workspace") -> bool:
    """Whether the symlink at ``link`` (or anything through it) resolves outside the workspace at ``workdir``
    (many links of one tree: ``leaving_links``)."""
    return resolve(tree, link, workdir) is None


class ChunkReader(io.RawIOBase):
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


MAX_PATH_BYTES = 64 << 10
"""The longest path an export keeps (a path is ``PATH_MAX``, 4 KiB, in everything a repository's tools use)."""
MAX_NAME_BYTES = 64 << 20
"""All the paths of an export together: the tree's names are held in memory on the host, so a workspace of
many deep folders (a few MB of disk can name gigabytes of paths) is cut off here, and says so."""


def read_tar(stream: io.RawIOBase | io.BufferedIOBase, root: str, limits: ExportLimits) -> Tree:
    """Read a tar stream whose members sit under ``root/`` into a ``Tree`` (bounded: contents by ``max_bytes``,
    entries, folders included, by ``max_files``, paths by ``MAX_PATH_BYTES`` each and ``MAX_NAME_BYTES`` in all)."""
    tree, total, names = Tree(), 0, 0
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tf:
            for member in tf:
                tf.members = []  # a stream's members are never looked up again: none is kept in memory
                rel = _clean(member.name, root)
                if rel is None or _is_git(rel):
                    continue
                names += len(rel) + len(member.linkname)
                if len(tree.files) + len(tree.symlinks) + len(tree.dirs) >= limits.max_files \
                        or total + max(member.size, 0) > limits.max_bytes:
                    tree.truncated = True
                    tree.skipped.append(f"{rel[:300]}: export limit reached ({limits.max_files} entries, "
                                        f"{limits.max_bytes} bytes)")
                    break
                if len(rel) > MAX_PATH_BYTES or names > MAX_NAME_BYTES:
                    tree.truncated = True
                    tree.skipped.append(f"{rel[:300]}…: export limit reached (paths of {MAX_PATH_BYTES} bytes, "
                                        f"{MAX_NAME_BYTES} bytes of paths in all)")
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
                    if first is not None and first in tree.symlinks:  # a second name of a symlink: the same link
                        tree.symlinks[rel] = tree.symlinks[first]
                    elif first is not None and first in tree.files:
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
