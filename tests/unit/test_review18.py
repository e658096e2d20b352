"""The eighteenth review's findings at the host functions (a helper who did not write the change attacked the
grading path; engine tests: tests/docker/test_threats_review18.py)."""

from __future__ import annotations

import base64
import binascii
import random
import resource
import subprocess

import pytest

from orchestrator.canaries import find
from orchestrator.grading.diff import DIFF_BYTES, _whole, compute_diff
from orchestrator.grading.script import TRIED_NAMES, replaced_runners
from orchestrator.grading.tree import DANGLING, MAX_LINK_HOPS, Resolver, Tree, followed, leaving_links


def _reference_resolve(tree: Tree, path: str, workdir: str = "/workspace", max_hops: int = MAX_LINK_HOPS):
    """The resolution the Resolver replaced, as it was (quadratic, one link at a time): the results must agree."""
    pending = list(reversed(path.split("/")))
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
        target = tree.symlinks.get("/".join([*done, part]))
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


@pytest.mark.parametrize("seed", range(40))
def test_the_resolver_agrees_with_the_plain_resolution_on_random_link_mazes(seed):
    rng = random.Random(seed)
    names = ["a", "b", "c", "d"]
    tree = Tree(files={"a/x": b"1", "b/y": b"2", "top": b"3"})
    for _ in range(rng.randint(1, 14)):
        where = "/".join(rng.choice(names) for _ in range(rng.randint(1, 3)))
        target = "/".join(rng.choice(names + ["..", ".", "x", "y", "top"]) for _ in range(rng.randint(1, 4)))
        if rng.random() < 0.2:
            target = "/workspace/" + target if rng.random() < 0.7 else "/etc/" + target
        tree.symlinks[where] = target
    resolver = Resolver(tree)
    for path in [*tree.symlinks, *(f"{link}/x" for link in tree.symlinks), "a/x", "c/../a/x"]:
        assert resolver.resolve(path) == _reference_resolve(tree, path), (path, tree.symlinks)


def test_links_through_long_chains_cost_their_size_once():
    """The review's maze: 39 links with 4 KB targets, and many links to its start (0.1 s each before)."""
    # the folders a/a/…/a exist (818 deep): the chain leads to README.md, as the kernel would follow it
    tree = Tree(files={"README.md": b"x"}, dirs={"/".join(["a"] * n) for n in range(1, 819)})
    for i in range(38):
        tree.symlinks[f"T{i}"] = "a/" * 818 + "../" * 818 + f"T{i + 1}"
    tree.symlinks["T38"] = "README.md"
    for j in range(20_000):
        tree.symlinks[f"L{j}"] = "T0"
    assert leaving_links(tree, "/app") == set()
    view = followed(tree, "/app")
    assert view.files["L19999"] == b"x" and not view.truncated
    # without those folders nothing is there (the kernel fails at the first ``a``): the links lead nowhere, neither
    # out nor to a file, and cost as little
    bare = Tree(files={"README.md": b"x"}, symlinks=dict(tree.symlinks))
    assert leaving_links(bare, "/app") == set() and Resolver(bare, "/app").resolve("L5") == DANGLING
    assert "L5" not in followed(bare, "/app").files
    # a loop is still a loop, and 41 hops still too many
    loop = Tree(symlinks={"p": "q", "q": "p"})
    assert leaving_links(loop) == {"p", "q"}
    chain = Tree(files={"end": b""}, symlinks={f"k{i}": f"k{i + 1}" for i in range(41)} | {"k41": "end"})
    assert "k0" in leaving_links(chain) and "k2" not in leaving_links(chain)


def test_a_diff_of_many_large_files_costs_their_size_not_a_string_per_line():
    blob = b"#\n" * ((1 << 20) // 2 - 1)
    final = Tree(files={f"notes/n{i}.txt": blob for i in range(80)})
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    diff = compute_diff(Tree(), final)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) >> 10
    assert grown_mib < 600, grown_mib  # 32 MiB of such files took 1.38 GB more before
    shown = [c for c in diff.text.split("--- ") if c.startswith("/dev/null")]
    assert diff.paths == sorted(final.files) and len(shown) < 80
    assert diff.text.count("not shown: the diff's 64 MiB of text is reached") == 80 - len(shown)
    assert sum(len(final.files[f"notes/n{i}.txt"]) for i in range(len(shown))) <= DIFF_BYTES


def test_a_file_shown_whole_is_a_patch_that_applies(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "f.txt").write_text("old1\nold2")
    (tmp_path / "g.txt").write_text("x\n")
    patch = _whole("old1\nold2", "new1\nnew2\n", "a/f.txt", "b/f.txt") + _whole("x\n", "", "a/g.txt", "/dev/null") \
        + _whole("", "n\nm", "/dev/null", "b/h.txt")
    (tmp_path / "p.diff").write_text(patch)
    subprocess.run(["git", "apply", "p.diff"], cwd=tmp_path, check=True, capture_output=True)
    assert (tmp_path / "f.txt").read_text() == "new1\nnew2\n" and not (tmp_path / "g.txt").exists()
    assert (tmp_path / "h.txt").read_text() == "n\nm"


@pytest.mark.parametrize("encode", [
    lambda b: binascii.b2a_uu(b).decode(), lambda b: binascii.b2a_uu(b, backtick=True).decode(),
    lambda b: "begin 644 notes\n" + binascii.b2a_uu(b"Z" + b).decode() + "`\nend\n",
    lambda b: base64.b32hexencode(b).decode(), lambda b: base64.b32hexencode(b"xy" + b).decode().lower()])
def test_uuencoded_and_base32hex_canaries_are_found(encode):
    canary = "tbenv989ea331d999c7dc31e7cb0c"
    assert find([canary], encode(canary.encode())) == [canary]


def test_names_the_standard_library_tries_to_import_are_judged_as_modules_or_as_plain_folders():
    probed = {"names": ["json", "pytest"], "namespaces": []}
    for files in ({"org/__init__.py": b"import os; os._exit(0)"}, {"org/python/core.py": b"import os; os._exit(0)"},
                  {"java.py": b""}):
        tree = Tree(files=files)
        found = replaced_runners(tree, "/app", sorted(files), "/usr/bin", probed)
        assert found and found[0].split("/")[0].split(":")[0] in ("org", "java.py", "java"), (files, found)
    # an installed ``org`` (a regular package elsewhere) wins over a plain folder of the workspace, as before
    tree = Tree(files={"org/notes.py": b""})
    assert replaced_runners(tree, "/app", ["org/notes.py"], "/usr/bin", {"names": ["org"], "namespaces": []}) == []
    assert {"org", "java", "numpy"} <= TRIED_NAMES and "test" not in TRIED_NAMES  # an honest repository's test/


def test_links_resolving_far_deeper_than_the_tree_lead_nowhere_at_a_bounded_cost():
    """The nineteenth review: 38 chained links each adding 2,047 folders that do not exist, and thousands of links
    to the last: 1.8 GB and a minute for 3,000 of them, every resolution kept whole."""
    tree = Tree(files={"README.md": b"x"})
    tree.symlinks["L0"] = "d/" * 2046 + "d"
    for k in range(1, 38):
        tree.symlinks[f"L{k}"] = f"L{k - 1}/" + "d/" * 2045 + "d"
    for i in range(20_000):
        tree.symlinks[f"M{i}"] = "L37"
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert leaving_links(tree) == set()
    assert Resolver(tree).resolve("M7") == DANGLING and "M7" not in followed(tree).files
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) >> 10 < 300
    # a resolution that leaves before it gets deep still leaves
    assert leaving_links(Tree(symlinks={"out": "../" + "d/" * 5000})) == {"out"}


def test_the_likeness_reads_a_large_diff_line_by_line():
    from orchestrator.grading.likeness import changed_lines, similarity

    diff = "+++ b/x\n" + "+a\n" * 3_000_000
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert similarity(diff, "+a\n") == (pytest.approx(2 / 2001, rel=0.01), True)
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) >> 10 < 100
    assert len(changed_lines(diff, 10)) == 11 and changed_lines("-x\n+y\n--- a\n") == ["-x", "+y"]


@pytest.mark.parametrize("pad", [0, 16, 17, 30, 44, 100])
def test_a_uuencoded_canary_is_found_across_line_boundaries(pad):
    canary = "tbenv37d002d949d96e88b0c8cd89"
    data = b"#" * pad + canary.encode()
    lines = b"".join(binascii.b2a_uu(data[i:i + 45]) for i in range(0, len(data), 45))
    assert find([canary], b"begin 644 notes.uu\n" + lines + b"`\nend\n") == [canary]
    assert find([canary], lines.replace(b"\n", b"\r\n")) == [canary]


# The twentieth review (tests/docker/test_threats_review20.py): uuencoded lines wherever they stand, a resolution
# kept as one place whatever its depth, and a bounded likeness line.

@pytest.mark.parametrize("layout", ["indented", "prefixed", "cr", "joined", "python-list", "vt", "backtick"])
def test_uuencoded_lines_are_found_wherever_they_stand(layout):
    canary = "tbenv37d002d949d96e88b0c8cd89"
    data = b"#" * 30 + canary.encode()
    lines = [binascii.b2a_uu(data[i:i + 45], backtick=layout == "backtick")[:-1] for i in range(0, len(data), 45)]
    blob = {"indented": b"".join(b"\t" + l + b"\n" for l in lines), "prefixed": b"".join(b"x" + l + b"\n" for l in lines),
            "cr": b"\r".join(lines), "joined": b";".join(lines), "vt": b"\x0b".join(lines),
            "python-list": b"NOTES = [\n" + b"".join(b"    " + repr(l.decode()).encode() + b",\n" for l in lines) + b"]\n",
            "backtick": b"\n".join(lines)}[layout]
    assert find([canary], blob) == [canary]


def test_many_links_to_a_real_deep_folder_cost_one_resolution():
    """95,000 links to a link to a real folder 1,990 deep: 27 s and 1.9 GB while each resolution was a list."""
    tree = Tree(files={"README.md": b"x"}, dirs={"/".join(["a"] * k) for k in range(1, 1991)})
    tree.symlinks["D"] = "/".join(["a"] * 1990)
    tree.symlinks.update({f"l/x{i}": "../D" for i in range(95_000)})
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert leaving_links(tree) == set()
    assert Resolver(tree).resolve("l/x5") == "/".join(["a"] * 1990)
    followed(tree)
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) >> 10 < 400


def test_a_likeness_line_is_compared_up_to_its_bound_and_never_tokenized_past_it():
    from orchestrator.grading.likeness import MAX_LINE_CHARS, changed_lines

    line = "(" * 32_000 + "#c"
    assert changed_lines(f"+{line}\n") == ["+" + "(" * MAX_LINE_CHARS]
    assert changed_lines("+x = 1  # note\n") == ["+x=1"]


# The twenty-first review (tests/docker/test_threats_review21.py): uuencoded lines after a name ending in "M" and
# lines shorter than 45 bytes; places past the tree bounded by DEPTH_SLACK whatever the tree's depth; comment
# lines counted toward the likeness bound.

@pytest.mark.parametrize("size", [45, 30, 20, 15])
@pytest.mark.parametrize("layout", ["ITEM = '%s'\n", "'M': '%s',\n", "NUM%s\n"])
def test_uuencoded_lines_of_any_usual_length_after_any_prefix_are_found(size, layout):
    canary = "tbenv785d388f63560bdcc6aac0d8"
    for pad in range(0, 45, 7):
        data = b"#" * pad + canary.encode()
        lines = [binascii.b2a_uu(data[i:i + size])[:-1].decode() for i in range(0, len(data), size)]
        assert find([canary], "".join(layout % line for line in lines)) == [canary], pad


def test_places_past_the_tree_are_bounded_whatever_its_depth():
    chain = "/".join(["a"] * 2040)
    tree = Tree(dirs={chain}, files={"README.md": b"x"})
    tree.symlinks.update({f"z/l{k}": f"q{k}/" + chain for k in range(700)})  # 2,040 names the tree does not have
    deep = Tree(symlinks={f"c{c}/" + "/".join(["a"] * 32_700) + "/l": "x" for c in range(2)})
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert leaving_links(tree) == set() and Resolver(tree).resolve("z/l3") == DANGLING
    assert leaving_links(deep) == set()
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) >> 10 < 200
    # 64 names into folders the tree does not have still resolve (what the grader adds), 65 lead nowhere
    near = Tree(files={"x": b""}, symlinks={"ok": "/".join(["n"] * 64), "far": "/".join(["n"] * 65)})
    assert Resolver(near).resolve("ok") == "/".join(["n"] * 64) and Resolver(near).resolve("far") == DANGLING


def test_comment_lines_count_toward_the_likeness_bound():
    from orchestrator.grading.likeness import similarity

    assert similarity("+#\n" * 5_000_000, "+a\n") == (0.0, True)
