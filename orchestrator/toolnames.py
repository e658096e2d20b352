"""What an agent's tool calls *did*, in the tool contract's terms, whichever agent made them.

A task's trajectory constraints (``required_tools``, ``forbidden_tools``, ``forbidden_commands``, ``order``) name
the contract's tools: ``bash``, ``read_file``, ``write_file``, ``edit_file`` (and ``submit``, ``ask_user``). Agents
express the same actions differently: the built-in agent calls the contract itself; Claude Code has ``Read`` and
``Edit``; Codex and mini-swe-agent read with ``sed -n``/``cat`` and edit with ``apply_patch`` through a shell;
aider has no tools at all and edits by SEARCH/REPLACE blocks in its answer's text. The same behaviour must get the
same verdict, so each call is turned into the *actions* it performed (``actions``):

* a call is mapped by its name (``DEFAULT_TOOL_MAP``, with a candidate's ``tool_map`` over it) onto a contract
  tool, its arguments renamed (the first of the reported names present wins; a list, as Codex sends a command,
  is joined as the shell would quote it); a ``patch`` mapping reads an ``apply_patch`` envelope;
* a shell command (a ``bash`` call, the harness's or a reported one) also counts as what it does to files, read
  from its words (``shell_actions``): a read of a file (``cat``, ``head``, ``tail``, ``nl``, ``less``, ``more``,
  ``sed`` without ``-i``) is a ``read_file``; ``sed -i``/``perl -pi``, an ``apply_patch`` envelope's updated files and an
  append (``>>``) are an ``edit_file``; a redirection (``>``), ``tee`` and an envelope's added files are a
  ``write_file``, each only for a file of the workspace (a scratch file in ``/tmp`` is none). Words are not a
  proof of effect (a script that writes through Python is not seen); the verdict
  names the basis;
* an agent whose candidate declares ``text_edits: search_replace`` (aider) edits by blocks in its answer's text:
  each block is an ``edit_file`` of the file it names (a ``write_file`` when its SEARCH part is empty).

What an agent can *express* decides applicability: the tools it offered its model (the proxy records each
request's ``tools_offered``), mapped as above (a shell expresses reads, edits and writes too), plus its text
edits. A constraint on a tool it cannot express is not applicable, stated per agent; a call to a tool the agent
did not offer (its model named a tool that does not exist there) ran nothing: it is counted apart
(``not_offered``) and is no action.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

CONTRACT_TOOLS = ("bash", "read_file", "write_file", "edit_file")
"""The contract's tools that act on the workspace (``ask_user`` can be mapped onto too; ``submit`` has no
reported counterpart: a command agent submits by exiting)."""
SHELL_EXPRESSES = ("read_file", "write_file", "edit_file")
"""What an agent with a shell can do to files through it (``shell_actions`` reads them from its commands)."""

_PATH = ["path", "file_path", "filename"]
_BASH = {"tool": "bash", "arguments": {"command": ["command", "cmd"]}}
_READ = {"tool": "read_file", "arguments": {"path": _PATH}}
_WRITE = {"tool": "write_file", "arguments": {"path": _PATH, "content": ["content", "text"]}}
_EDIT = {"tool": "edit_file", "arguments": {"path": _PATH, "old": ["old", "old_string", "old_str"],
                                            "new": ["new", "new_string", "new_str"]}}
_PATCH = {"tool": "patch", "arguments": {"patch": ["input", "patch", "_unparsed"]}}
_ASK = {"tool": "ask_user", "arguments": {"question": ["question", "questions", "prompt"]}}
_EDITOR = {"tool": "editor", "arguments": {"command": ["command"], "path": _PATH}}
EDITOR_COMMANDS = {"view": "read_file", "create": "write_file", "str_replace": "edit_file", "insert": "edit_file",
                   "undo_edit": "edit_file"}
"""Anthropic's text editor tool (and OpenHands' ``str_replace_editor``): its ``command`` says what it did."""
DEFAULT_TOOL_MAP: dict[str, dict[str, Any]] = {
    "bash": _BASH, "Bash": _BASH, "shell": _BASH, "exec_command": _BASH, "execute_bash": _BASH,
    "run_shell_command": _BASH, "local_shell_call": _BASH,
    "read_file": _READ, "Read": _READ, "view": _READ,
    "write_file": _WRITE, "Write": _WRITE, "create_file": _WRITE,
    "edit_file": _EDIT, "Edit": _EDIT, "MultiEdit": _EDIT, "str_replace": _EDIT,
    "apply_patch": _PATCH,
    "ask_user": _ASK, "request_user_input": _ASK, "AskUserQuestion": _ASK,
    "str_replace_based_edit_tool": _EDITOR, "str_replace_editor": _EDITOR,
}
"""The contract's own names and those of the agents people evaluate (Claude Code's ``Bash``, ``Read``, ``Write``,
``Edit``, ``MultiEdit``, ``AskUserQuestion``; Codex's ``exec_command``, ``shell``, ``local_shell_call``,
``apply_patch`` and ``request_user_input``; OpenHands' ``execute_bash``; Anthropic's text editor tool and
OpenHands' ``str_replace_editor``, whose ``command`` says whether it viewed, created or edited)."""
TEXT_EDITS = ("none", "search_replace")
"""How a candidate's agent edits through its answer's text (``text_edits``)."""


def effective_map(overrides: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The defaults with a candidate's ``tool_map`` over them (models or plain dicts)."""
    out = dict(DEFAULT_TOOL_MAP)
    for name, m in (overrides or {}).items():
        m = m.model_dump() if hasattr(m, "model_dump") else dict(m)
        out[name] = {"tool": m["tool"], "arguments": {k: [v] if isinstance(v, str) else list(v)
                                                       for k, v in (m.get("arguments") or {}).items()}}
    return out


# ---------------------------------------------------------------------------------------------- shell words
_HEREDOC = re.compile(r"(?<!<)<<-?(?!<)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")  # not a here-string (<<<)
_READERS = {"cat", "head", "tail", "nl", "less", "more", "bat"}
_OPTS_WITH_VALUE = {"head": {"-n", "-c"}, "tail": {"-n", "-c"}, "nl": {"-b", "-w", "-s", "-v", "-i"}}
_ENVELOPE = re.compile(r"\*\*\* Begin Patch\b(.*?)(?:\*\*\* End Patch|\Z)", re.S)
_PATCH_FILE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$", re.M)
_SEPARATORS = {"&&", "||", ";", "|", "&", "\n", ";;", "(", ")", "|&"}


def _strip_heredocs(script: str) -> str:
    """``script`` without the bodies of its here-documents (their text is data, not commands)."""
    lines, out, waiting = script.split("\n"), [], []
    for line in lines:
        if waiting:
            if line.strip() == waiting[0]:
                waiting.pop(0)
            continue
        out.append(line)
        waiting += [m.group(2) for m in _HEREDOC.finditer(line)]
    return "\n".join(out)


def _unwrap(command: str) -> str:
    """The script a shell is asked to run (``bash -lc 'script'``, as Codex sends its commands), else ``command``."""
    if not re.match(r"\s*(\S*/)?(bash|sh|zsh|dash)\s+-\w*c", command) or len(command) > 1_000_000:
        return command
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    if words and len(words) >= 3 and words[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh", "dash") \
            and words[1].startswith("-") and "c" in words[1]:
        return words[2]
    return command


def _simple_commands(script: str) -> list[list[str]]:
    """The simple commands of a shell script, as words with their redirections (best effort: what cannot be
    split is skipped)."""
    # a line ends a command (inside quotes too: a file name with a newline in it is not worth the parse)
    lexer = shlex.shlex(_strip_heredocs(script).replace("\n", " ; "), posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    commands, current = [], []
    try:
        for token in lexer:
            if token in _SEPARATORS:
                if current:
                    commands.append(current)
                current = []
            else:
                current.append(token)
    except ValueError:  # an unclosed quote: what was read so far
        pass
    if current:
        commands.append(current)
    return commands


def shell_actions(command: str) -> list[tuple[str, dict[str, str]]]:
    """What a shell command does to files, from its words: ``(contract tool, {"path": ...})`` in order."""
    out: list[tuple[str, dict[str, str]]] = []
    for m in _ENVELOPE.finditer(command):
        out += patch_actions(m.group(0))
    for words in _simple_commands(_unwrap(command)):
        redirects: list[tuple[str, dict[str, str]]] = []  # after what the command itself reads and edits
        for i, w in enumerate(words[:-1]):
            if w in (">", ">|") and words[i + 1] != "/dev/null" and not words[i + 1].startswith("&"):
                redirects.append(("write_file", {"path": words[i + 1]}))
            elif w == ">>" and words[i + 1] != "/dev/null" and not words[i + 1].startswith("&"):
                redirects.append(("edit_file", {"path": words[i + 1]}))
        # the words without redirections and their targets (``2>&1``, ``< in``)
        plain, skip = [], False
        for i, w in enumerate(words):
            if skip:
                skip = False
                continue
            if w in (">", ">>", "<", ">|", "<<", "<<-", "<<<"):
                skip = True
                continue
            if re.fullmatch(r"\d*[<>]&?\d*-?", w):
                continue
            if w.isdigit() and i + 1 < len(words) and words[i + 1][:1] in "<>":  # a descriptor: ``2>/dev/null``
                continue
            plain.append(w)
        while plain and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", plain[0]):  # VAR=value before the command
            plain.pop(0)
        name, args = (plain[0].rsplit("/", 1)[-1], plain[1:]) if plain else ("", [])
        if name in _READERS:
            out += [("read_file", {"path": p}) for p in _operands(name, args)]
        elif name == "sed":
            inplace = any(a == "-i" or a.startswith("-i") or a == "--in-place" or a.startswith("--in-place=")
                          for a in args)
            out += [("edit_file" if inplace else "read_file", {"path": p}) for p in _sed_files(args)]
        elif name == "perl" and any(a.startswith("-") and "i" in a and "p" in a for a in args if not a.startswith("--")):
            out += [("edit_file", {"path": p}) for p in _perl_files(args)]
        elif name == "tee":
            out += [("edit_file" if "-a" in args else "write_file", {"path": p})
                    for p in args if not p.startswith("-")]
        out += redirects
    return out


def _operands(name: str, args: list[str]) -> list[str]:
    valued, files, skip = _OPTS_WITH_VALUE.get(name, set()), [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in valued:
            skip = True
            continue
        if a.startswith("-") and a != "-":
            continue
        if a != "-":
            files.append(a)
    return files


def _sed_files(args: list[str]) -> list[str]:
    """A sed command's files: what follows its script (the first operand, or every ``-e``/``-f`` value)."""
    operands, scripted, skip = [], False, False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-e", "-f", "--expression", "--file"):
            scripted, skip = True, True
            continue
        if a.startswith("-"):
            continue
        operands.append(a)
    return operands if scripted else operands[1:]


def _perl_files(args: list[str]) -> list[str]:
    operands, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-e", "-E") or (a.startswith("-") and a.endswith("e") and not a.startswith("--")):
            skip = True
            continue
        if a.startswith("-"):
            continue
        operands.append(a)
    return operands


def patch_actions(text: str) -> list[tuple[str, dict[str, str]]]:
    """An ``apply_patch`` envelope's effect: each updated (or deleted) file an ``edit_file``, each added one a
    ``write_file``."""
    return [("write_file" if kind == "Add" else "edit_file", {"path": path.strip()})
            for kind, path in _PATCH_FILE.findall(text)]


# -------------------------------------------------------------------------------------------- text edits
_BLOCK = re.compile(r"^<{5,9} SEARCH\s*$(.*?)^={5,9}\s*$(.*?)^>{5,9} REPLACE\s*$", re.M | re.S)


def text_edit_actions(text: str) -> list[tuple[str, dict[str, str]]]:
    """SEARCH/REPLACE blocks in an answer's text (aider's ``diff`` edit format): each names its file on the last
    non-fence line before it; an empty SEARCH part makes a new file (``write_file``)."""
    out = []
    for m in _BLOCK.finditer(text):
        end, name = m.start(), None
        while end > 0 and name is None:  # the lines before the block, nearest first (no rescan of the whole text)
            start = text.rfind("\n", 0, end - 1) + 1
            line = text[start:end].strip()
            if line and not line.startswith("```"):
                name = line
            end = start
        if name is None:
            continue
        name = name.strip("`*: ").strip()
        out.append(("write_file" if not m.group(1).strip() else "edit_file", {"path": name}))
    return out


# ------------------------------------------------------------------------------------------------- actions
@dataclass
class Actions:
    """What a trial's tool calls did, in contract terms (see the module docstring)."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    """``tool``, ``arguments``, ``seq``, ``order`` (a sort key), ``reported_as``, ``via`` (``tool``, ``shell``,
    ``patch`` or ``text``)."""
    expressible: set[str] = field(default_factory=set)
    """The contract tools this agent could express (empty when nothing says what it offered)."""
    offered: list[str] | None = None
    """The tool names the agent offered its model (None when not recorded)."""
    unmapped: list[str] = field(default_factory=list)
    """Reported tool names no mapping covers (their calls are no action)."""
    not_offered: list[dict[str, Any]] = field(default_factory=list)
    """Calls to tools the agent did not offer (``seq``, ``tool``): nothing ran."""


def _offered_names(tools: Any) -> list[str]:
    names = []
    for t in tools if isinstance(tools, list) else []:
        if isinstance(t, dict):
            name = t.get("name")
            if not name and isinstance(t.get("function"), dict):
                name = t["function"].get("name")
            name = name or t.get("type")
            if isinstance(name, str):
                names.append(name[:100])
    return names


def offered_tools(request: Any, limit: int = 256) -> list[str]:
    """The tool names a model request offers (Messages ``tools[].name``; OpenAI ``tools[].name`` or
    ``tools[].function.name``, a built-in tool by its ``type``), at most ``limit``."""
    return sorted(set(_offered_names(request.get("tools") if isinstance(request, dict) else None)))[:limit]


def in_workspace(path: str, workdir: str = "/workspace") -> bool:
    """Whether a path a command named is the workspace's: relative (to the workspace, where commands start), or
    absolute under ``workdir``. A scratch file elsewhere (``/tmp/out.txt``) is no action on the task's files."""
    if not path.startswith("/"):
        return True
    root = workdir.rstrip("/") or "/"
    return path == root or path.startswith(root + "/")


def _with_derived(call: dict[str, Any], order: tuple, workdir: str = "/workspace") -> list[dict[str, Any]]:
    """``call`` and what its shell command or patch did to the workspace's files, in order."""
    out = []
    if call["tool"] == "editor":  # one tool, several actions: its command names the one it did
        tool = EDITOR_COMMANDS.get(str(call["arguments"].get("command")))
        if tool is None or not in_workspace(str(call["arguments"].get("path", "")), workdir):
            return []
        return [{**call, "tool": tool, "order": order}]
    if call["tool"] == "patch":
        text = str(call["arguments"].get("patch", ""))
        derived, via = patch_actions(text), "patch"
    else:
        out.append({**call, "order": order})
        derived, via = (shell_actions(str(call["arguments"].get("command", ""))), "shell") \
            if call["tool"] == "bash" else ([], "")
    derived = [(tool, args) for tool, args in derived if in_workspace(args.get("path", ""), workdir)]
    for i, (tool, args) in enumerate(derived, start=1):
        out.append({"tool": tool, "arguments": args, "seq": call["seq"], "order": (*order, i),
                    "reported_as": call.get("reported_as"), "via": via})
    return out


def _expresses(tool: str) -> set[str]:
    if tool == "bash":
        return {"bash", *SHELL_EXPRESSES}
    if tool == "patch":
        return {"edit_file", "write_file"}
    if tool == "editor":
        return set(EDITOR_COMMANDS.values())
    return {tool}


def harness_actions(events: list[dict[str, Any]], workdir: str = "/workspace") -> Actions:
    """The tool calls trialbox ran (source ``harness``), with what their shell commands did; every contract tool is
    expressible (the agent was offered the whole contract); a call of an unknown tool is ``not_offered``."""
    acts = Actions(expressible={*CONTRACT_TOOLS, "submit", "ask_user"})
    for e in events:
        if e.get("kind") != "tool" or e.get("source") != "harness":
            continue
        if e.get("error_kind") == "unknown_tool":
            acts.not_offered.append({"seq": e.get("seq"), "tool": str(e.get("tool"))[:100]})
            continue
        args = e.get("arguments") if isinstance(e.get("arguments"), dict) else {}
        call = {"tool": e.get("tool"), "arguments": args, "seq": e.get("seq"), "reported_as": e.get("tool"), "via": "tool"}
        acts.calls += _with_derived(call, (e.get("seq") or 0,), workdir)
    return acts


def reported_actions(events: list[dict[str, Any]], tool_map: Mapping[str, Any] | None = None,
                     text_edits: str = "none", workdir: str = "/workspace") -> Actions:
    """A command agent's actions, from what its model reported (``model_tool_use``) and, with ``text_edits``, from
    its answers' text; what it could express from the tools each request offered (``tools_offered``)."""
    table = effective_map(tool_map)
    acts, unmapped = Actions(), set()
    offered_now: set[str] | None = None
    offered_all: set[str] = set()
    seen_offers = False
    for e in events:
        kind = e.get("kind")
        if kind == "model_call":
            offers = e.get("tools_offered")
            offered_now = set(offers) if isinstance(offers, list) else None
            if offered_now is not None:
                seen_offers = True
                offered_all |= offered_now
            if text_edits == "search_replace":
                said = "\n".join(str(b.get("text", "")) for b in e.get("content") or []
                                 if isinstance(b, dict) and b.get("type") == "text")
                for i, (tool, args) in enumerate(text_edit_actions(said), start=1):
                    acts.calls.append({"tool": tool, "arguments": args, "seq": e.get("seq"),
                                       "order": (e.get("seq") or 0, i), "reported_as": "text", "via": "text"})
            continue
        if kind != "model_tool_use":
            continue
        name = str(e.get("tool"))
        if offered_now is not None and name not in offered_now:
            acts.not_offered.append({"seq": e.get("seq"), "tool": name[:100]})
            continue
        entry = table.get(name)
        if entry is None:
            unmapped.add(name)
            continue
        reported = e.get("arguments") if isinstance(e.get("arguments"), dict) else {}
        args = {}
        for contract_arg, names in entry["arguments"].items():
            value = next((reported[n] for n in names if n in reported), None)
            if isinstance(value, list):  # an argv, as Codex sends a command: quoted so its words stay its words
                value = shlex.join(str(v) for v in value)
            if value is not None:
                args[contract_arg] = value
        call = {"tool": entry["tool"], "arguments": args, "seq": e.get("seq"), "reported_as": name, "via": "tool"}
        acts.calls += _with_derived(call, (e.get("seq") or 0,), workdir)
    if seen_offers:
        acts.offered = sorted(offered_all)
        for name in offered_all:  # an offered tool no mapping covers expresses nothing of the contract
            if name in table:
                acts.expressible |= _expresses(table[name]["tool"])
    elif acts.calls or unmapped:  # nothing recorded what it offered: what the map can express, as before
        acts.expressible = {t for entry in table.values() for t in _expresses(entry["tool"])}
    if text_edits == "search_replace":
        acts.expressible |= {"edit_file", "write_file"}
    acts.unmapped = sorted(unmapped)
    return acts


def mapped_calls(events: list[dict[str, Any]], tool_map: Mapping[str, Any] | None
                 ) -> tuple[list[dict[str, Any]], list[str]]:
    """The model-reported tool calls as contract calls (with what their commands did), and the names no entry maps."""
    acts = reported_actions(events, tool_map)
    return acts.calls, acts.unmapped
