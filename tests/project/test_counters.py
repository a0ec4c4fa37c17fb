"""Counter names in the source: every one the Lua scripts write is registered, and the Python
code names counters only through the registry (:mod:`crawler_tasks.core.counters`).

The scripts are found wherever they live under crawler_tasks/: in the string constants of
its modules, or in ``.lua`` files. A crawl that checks what is really written is in
tests/stages/test_counters_crawl.py.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from crawler_tasks.core import counters

PACKAGE = Path(__file__).resolve().parents[2] / "crawler_tasks"
REGISTRY_MODULE = PACKAGE / "core" / "counters.py"

#: Fields the scripts HINCRBY that are not counters, and why.
NOT_COUNTERS = {
    "pseq": "a host's proxy rotation: which proxy its next request takes",
}

#: A Redis call in Lua (``redis.call``, ``redis.pcall`` or an alias such as ``call``)
#: incrementing a hash field; the key may be any expression without a comma.
HINCRBY = re.compile(r"""\b(?:redis\s*\.\s*)?p?call\s*\(\s*(['"])HINCRBY(?:FLOAT)?\1\s*,\s*([^,]+?)\s*,"""
                     r"""\s*(?:(['"])([^'"]*)\3|([^,)]+?))\s*[,)]""", re.IGNORECASE)
#: Every mention of the command, to make sure each one was understood.
MENTION = re.compile(r"""(['"])HINCRBY(?:FLOAT)?\1""", re.IGNORECASE)
#: What tells a Python string constant holding Lua.
LUA_SIGNS = re.compile(r"\bredis\s*\.\s*p?call\b|\bKEYS\[|\bARGV\[")


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes of a module and its classes and functions."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                out.add(id(body[0].value))
    return out


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def lua_sources() -> list[tuple[str, str]]:
    """(where, Lua text) of every script under crawler_tasks/: ``.lua`` files, and the string
    constants of the modules that hold Lua."""
    out = [(str(p.relative_to(PACKAGE)), p.read_text(encoding="utf-8")) for p in sorted(PACKAGE.rglob("*.lua"))]
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and LUA_SIGNS.search(node.value):
                out.append((f"{path.relative_to(PACKAGE)}:{node.lineno}", node.value))
    return out


def lua_increments() -> tuple[set[tuple[str, str]], list[str]]:
    """((where, field) of every HINCRBY of a literal field, mentions not understood)."""
    literal: set[tuple[str, str]] = set()
    unread: list[str] = []
    for where, text in lua_sources():
        calls = list(HINCRBY.finditer(text))
        for m in calls:
            if m.group(4) is not None:
                literal.add((where, m.group(4)))
        if len(calls) != len(MENTION.findall(text)):
            unread.append(where)
    return literal, unread


def test_every_counter_a_lua_script_names_is_registered():
    literal, unread = lua_increments()
    assert not unread, f"HINCRBY calls this test cannot read in {unread}: teach it their shape"
    assert literal, "no HINCRBY of a literal field found: has the extraction lost the scripts?"
    unknown = sorted((where, name) for where, name in literal
                     if name not in NOT_COUNTERS and not any(c.matches(name) for c in counters.REGISTRY))
    assert not unknown, f"counters written by Lua but not in crawler_tasks/core/counters.py: {unknown}"


def test_the_extraction_reads_lua_files_and_every_spelling(tmp_path):
    """The same patterns read a ``.lua`` file as the other engineer's layout will have it."""
    text = """
local call = redis.call
redis.call('HINCRBY', KEYS[3], 'gate/admitted', admitted)
call("HINCRBY", hk, "requests", 1)
redis.pcall('hincrby', P .. 'host:' .. h, 'deferred', 1)
for i = 4, #ARGV, 2 do redis.call('HINCRBY', KEYS[2], ARGV[i], ARGV[i + 1]) end
"""
    calls = list(HINCRBY.finditer(text))
    assert [m.group(4) for m in calls] == ["gate/admitted", "requests", "deferred", None]
    assert len(calls) == len(MENTION.findall(text))


# -- Python ---------------------------------------------------------------------------------

#: The first segment of every registered name with a slash (``status``, ``store``...): a
#: literal starting ``<group>/`` is a counter name, whatever position it is in.
GROUPS = sorted({c.name.split("/", 1)[0] for c in counters.REGISTRY if "/" in c.name})
SHAPED = re.compile(rf"^(?:{'|'.join(map(re.escape, GROUPS))})/")

#: Literals shaped like a counter's name that are labels a person reads (the rate's unit).
LABELS = {"pages/s"}
#: Literals that read like counters in a counter's position but are something else, and what.
ELSEWHERE = {
    ("backends/elasticsearch/documents.py", "truncated"): "the record field, in the pages index's mapping",
    ("cli/stats.py", "requests"): "a HostState field of `stats --json`'s busiest hosts",
    ("cli/probe.py", "requests"): "the requests a parser yields, in `parse --json` and the shell's names",
    ("cli/stats.py", "throttled"): "a HostState field of `stats --json`'s busiest hosts",
    ("cli/top_view.py", "failed"): "the label of the failures row in `top`'s responses panel",
    ("cli/top_view.py", "cancelled"): "a crawl's state (service.control), styled in `top`",
}

#: Calls whose arguments are counts (name -> amount), and the functions that take them.
SINKS = {"complete", "admit", "abandon", "count_once", "add_counts", "settle", "add", "Settlement",
         "HandOn", "Redirect", "Retry", "Fail", "Skip"}


def _static_prefix(node: ast.expr) -> str | None:
    """A string constant, or the constant start of an f-string; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        first = node.values[0] if node.values else None
        return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else ""
    return None


def _name_of(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _positions(tree: ast.AST) -> Iterator[ast.expr]:
    """Expressions in a position where a counter's name goes: dict keys, subscripts,
    ``.get``/``.hget``/``.hincrby``/``.startswith`` arguments, ``counter=``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            yield from (k for k in node.keys if k is not None)
        elif isinstance(node, ast.Subscript):
            yield node.slice
        elif isinstance(node, ast.Call):
            attr = node.func.attr if isinstance(node.func, ast.Attribute) else ""
            if attr in ("get", "hget", "startswith") and node.args:
                yield node.args[0]
            if attr == "hincrby" and len(node.args) > 1:
                yield node.args[1]
            yield from (k.value for k in node.keywords if k.arg == "counter")


def _counts_dicts(tree: ast.AST) -> Iterator[ast.Dict]:
    """Dict displays that are counts: passed to a counting call, or put into ``counts``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name_of(node.func) in SINKS:
            yield from (a for a in [*node.args, *(k.value for k in node.keywords)] if isinstance(a, ast.Dict))
        elif isinstance(node, ast.Call) and _name_of(node.func) == "update" \
                and _name_of(getattr(node.func, "value", None)) == "counts":
            yield from (a for a in node.args if isinstance(a, ast.Dict))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Dict):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(_name_of(t) == "counts" for t in targets):
                yield node.value


def _counts_subscripts(tree: ast.AST) -> Iterator[ast.expr]:
    """``counts[...] = `` and ``counts[...] += `` keys."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and _name_of(t.value) == "counts":
                    yield t.slice


def python_counter_literals() -> list[str]:
    """Where the Python code spells a counter name itself instead of taking it from the registry."""
    found = []
    for path, tree in _modules():
        if path == REGISTRY_MODULE:
            continue
        rel = str(path.relative_to(PACKAGE))
        skip = _docstrings(tree)
        for node in ast.walk(tree):  # the shape, anywhere: "store/…", f"errors/{…}"
            text = None if id(node) in skip else _static_prefix(node)
            if text and SHAPED.match(text) and not LUA_SIGNS.search(text) and text not in LABELS:
                found.append(f"{rel}:{node.lineno}: {text!r}")
        for node in _positions(tree):  # a registered name where a counter's name goes
            text = _static_prefix(node)
            if text and (rel, text) not in ELSEWHERE and any(c.matches(text) for c in counters.REGISTRY):
                found.append(f"{rel}:{node.lineno}: {text!r}")
        for node in [*(k for d in _counts_dicts(tree) for k in d.keys if k is not None),
                     *_counts_subscripts(tree)]:  # any literal key of counts, registered or not
            text = _static_prefix(node)
            if text is not None:
                found.append(f"{rel}:{node.lineno}: {text!r}")
    return sorted(set(found))


def test_python_names_counters_only_through_the_registry():
    found = python_counter_literals()
    assert not found, ("counter names spelled out instead of taken from crawler_tasks.core.counters "
                       f"(register a new one there): {found}")


def test_the_python_scan_sees_literals_where_counters_go(tmp_path, monkeypatch):
    """The scan flags each way a literal counter name used to be written."""
    module = tmp_path / "crawler_tasks" / "stages" / "sample.py"
    module.parent.mkdir(parents=True)
    module.write_text('''
def count(rt, counts, name, code):
    rt.gate.add_counts("c", {"store/replayed": 1})
    counts["failures"] = 1
    counts.update({"retries": 1, f"retry/reason_count/{name}": 1})
    counts = {"brand_new": 1}
    rt.gate.abandon("c", "t", "line", {"errors": 1})
    label = f"status/{code}"
    return RobotsVerdict(counter="robots/disallowed"), label
''')
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path / "crawler_tasks")
    found = "\n".join(python_counter_literals())
    for literal in ("'store/replayed'", "'failures'", "'retries'", "'retry/reason_count/'",
                    "'brand_new'", "'errors'", "'status/'", "'robots/disallowed'"):
        assert literal in found, literal
