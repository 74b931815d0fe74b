#!/usr/bin/env python3
"""Fails when source files of one crate import each other in a circle.

What it checks. For every crate of the workspace (the root `Cargo.toml`'s `[workspace] members`),
and for each of its targets' module trees (the library's and each binary's, followed from the
crate root through its `mod NAME;` declarations), it builds a graph whose nodes are module files
and whose edges say "file A names module B": a `crate::`, `super::` or `self::` path in A's code
(a `use` tree, expanded, or a path in an expression) whose deepest module file is B. An item a
parent re-exports counts as the parent's. It then prints every strongly connected component of
more than one file: a set of files each of which reaches every other one through such names.

Not counted: comments and string literals; `$crate` paths; `pub(in ...)` visibilities; test
code (`#[cfg(test)]` items and the module files they declare); integration tests and benches;
and a module's names of its own ancestors or descendants (a parent declares and re-exports its
children, and a child reads what its parent shares: that is a tree, not a circle). Paths that
start from a name in scope rather than `crate`/`super`/`self` are not followed; a `use` of a
child module without `self::` is a child edge, which is not counted anyway.

Why. The style guide asks for files split by idea, with imports running one way (STYLE.md §8,
"Split by idea, not by line count"): when two files import each other, neither can be read,
tested or moved without the other, and the split only hid one idea in two places. The cure is
to put the shared thing where it belongs (a type both use in the lower file or a small file of
its own, a function in the file whose idea it is).

Where a circle is the right shape, keep it and say why: a comment `// import-cycle: <reason>`
(or `//!`, `///`) in any file of the circle makes the check skip that whole component; it is
listed as kept. A marker without a reason does not count.

Usage: `python3 scripts/check_import_cycles.py` (from anywhere in the repository). Exit status
0 when no circle is left, 1 (with each circle and the lines that close it printed) otherwise.
"""

from __future__ import annotations

import glob
import os
import re
import sys
import tomllib
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MARKER = re.compile(r"import-cycle:\s*\S")
RAW_STRING = re.compile(r'b?r(#*)"')
CHAR_LITERAL = re.compile(r"'(?:\\(?:u\{[0-9a-fA-F]*\}|x..|.)|[^\\'\n])'")


# --- Lexing: code without comments and literals, and the comments apart ---------------------


def split_code(text: str) -> tuple[str, list[str]]:
    """`text` with comments and string/char literals blanked (newlines kept, so offsets and line
    numbers still match), and the comments' texts."""
    out = list(text)
    comments: list[str] = []
    i, n = 0, len(text)

    def blank(a: int, b: int) -> None:
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            comments.append(text[i:j])
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            comments.append(text[i:j])
            blank(i, j)
            i = j
        elif (m := RAW_STRING.match(text, i)) and not _ident_before(text, i):
            end = text.find('"' + m.group(1), m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
            blank(i, j)
            i = j
        elif c == '"' or (c == "b" and text.startswith('b"', i) and not _ident_before(text, i)):
            j = i + (2 if c == "b" else 1)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            blank(i, j + 1)
            i = j + 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{..}'), else a lifetime or label ('a).
            if m := CHAR_LITERAL.match(text, i):
                blank(i, m.end())
                i = m.end()
            else:
                i += 1
        else:
            i += 1
    return "".join(out), comments


def _ident_before(text: str, i: int) -> bool:
    return i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")


def _matching(code: str, i: int, open_: str, close: str) -> int:
    """Index just past the bracket closing the one at `i`."""
    depth = 0
    for j in range(i, len(code)):
        if code[j] == open_:
            depth += 1
        elif code[j] == close:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(code)


CFG_TEST = re.compile(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]")


def strip_test_items(code: str) -> str:
    """`code` with every `#[cfg(test)]` item blanked (the attribute, any further attributes, and
    the item up to its `;` or through its braced body)."""
    out = list(code)
    pos = 0
    while m := CFG_TEST.search(code, pos):
        j = m.end()
        while True:  # further attributes
            k = j
            while k < len(code) and code[k].isspace():
                k += 1
            if not code.startswith("#", k):
                break
            j = _matching(code, code.find("[", k), "[", "]")
        depth, end = 0, len(code)
        for k in range(j, len(code)):
            ch = code[k]
            if ch in "([":
                depth += 1
            elif ch in ")]":
                depth -= 1
            elif depth == 0 and ch == ";":
                end = k + 1
                break
            elif depth == 0 and ch == "{":
                end = _matching(code, k, "{", "}")
                break
        for k in range(m.start(), end):
            if out[k] != "\n":
                out[k] = " "
        pos = end
    return "".join(out)


# --- Paths named in a file --------------------------------------------------------------------

USE = re.compile(r"\buse\s+([^;]*);")
PATH = re.compile(r"(?<![\w$])(crate|super|self)((?:\s*::\s*\w+)+)")
PUB_IN = re.compile(r"\bpub\s*\(\s*in\s+[\w:\s]+\)")


def expand_use_tree(tree: str) -> list[list[str]]:
    """The paths a `use` tree names: `a::{b, c::{d, self}}` gives a::b, a::c::d and a::c; a
    rename (`x as y`) names `x`, a glob (`a::*`) names `a`."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+\w+", "", tree))

    def walk(prefix: list[str], s: str) -> list[list[str]]:
        s = s.lstrip(":")
        if not s:
            return [prefix]
        if s.startswith("{"):
            inner = s[1 : _matching(s, 0, "{", "}") - 1]
            parts, depth, start = [], 0, 0
            for k, ch in enumerate(inner):
                if ch == "{":
                    depth += 1
                elif ch == "}":
                    depth -= 1
                elif ch == "," and depth == 0:
                    parts.append(inner[start:k])
                    start = k + 1
            parts.append(inner[start:])
            paths: list[list[str]] = []
            for p in parts:
                if p == "self":
                    paths.append(prefix)
                elif p:
                    paths.extend(walk(prefix, p))
            return paths
        head, _, rest = s.partition("::")
        if head == "*":
            return [prefix]
        return walk(prefix + [head], rest)

    return walk([], tree)


@dataclass
class Module:
    path: tuple[str, ...]
    file: str
    owns_dir: bool  # mod.rs / lib.rs / main.rs: children live beside it
    code: str = ""
    marked: bool = False
    names: list[tuple[int, list[str]]] = field(default_factory=list)  # (line, path)


def named_paths(code: str) -> list[tuple[int, list[str]]]:
    """Every `crate`/`super`/`self` path in `code`, with its line."""
    code = PUB_IN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), code)
    found: list[tuple[int, list[str]]] = []
    rest = list(code)
    for m in USE.finditer(code):
        line = code.count("\n", 0, m.start()) + 1
        for p in expand_use_tree(m.group(1)):
            if p and p[0] in ("crate", "super", "self"):
                found.append((line, p))
        for k in range(m.start(), m.end()):
            if rest[k] != "\n":
                rest[k] = " "
    rest_code = "".join(rest)
    for m in PATH.finditer(rest_code):
        line = rest_code.count("\n", 0, m.start()) + 1
        segments = [s for s in re.split(r"\s*::\s*", m.group(2)) if s]
        found.append((line, [m.group(1)] + segments))
    return found


# --- Module trees ------------------------------------------------------------------------------

MOD_DECL = re.compile(r"(?<![\w])mod\s+(?:r#)?(\w+)\s*;")


def module_tree(root_file: str) -> dict[tuple[str, ...], Module]:
    """Every module file reachable from a crate root through `mod NAME;` (test modules left out)."""
    modules: dict[tuple[str, ...], Module] = {}
    todo = [Module((), root_file, True)]
    while todo:
        m = todo.pop()
        if m.path in modules or not os.path.isfile(m.file):
            continue
        with open(m.file, encoding="utf-8") as f:
            text = f.read()
        code, comments = split_code(text)
        m.code = strip_test_items(code)
        m.marked = any(MARKER.search(c) for c in comments)
        m.names = named_paths(m.code)
        modules[m.path] = m
        base = os.path.dirname(m.file)
        if not m.owns_dir:
            base = os.path.join(base, os.path.basename(m.file)[: -len(".rs")])
        for d in MOD_DECL.finditer(m.code):
            name = d.group(1)
            flat = os.path.join(base, name + ".rs")
            nested = os.path.join(base, name, "mod.rs")
            if os.path.isfile(flat):
                todo.append(Module(m.path + (name,), flat, False))
            elif os.path.isfile(nested):
                todo.append(Module(m.path + (name,), nested, True))
    return modules


def resolve(m: Module, path: list[str], known: dict) -> tuple[str, ...] | None:
    """The deepest module file `path`, named in `m`, lies in."""
    head, rest = path[0], path[1:]
    if head == "crate":
        base: list[str] = []
    elif head == "self":
        base = list(m.path)
    else:  # super, possibly repeated
        base = list(m.path[:-1])
        while rest and rest[0] == "super":
            base, rest = base[:-1], rest[1:]
    full = base + rest
    for k in range(len(full), -1, -1):
        if tuple(full[:k]) in known:
            return tuple(full[:k])
    return None


def related(a: tuple, b: tuple) -> bool:
    """Whether one module is an ancestor of the other (or they are the same)."""
    return a[: len(b)] == b or b[: len(a)] == a


def components(nodes: list, edges: dict) -> list[list]:
    """Strongly connected components of more than one node (Tarjan's, iterative)."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack: set = set()
    found: list[list] = []
    counter = 0
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(comp)
    return found


# --- The workspace -------------------------------------------------------------------------------


def crate_roots() -> list[tuple[str, str]]:
    """(label, root file) for every library and binary target of every workspace member."""
    with open(os.path.join(ROOT, "Cargo.toml"), "rb") as f:
        workspace = tomllib.load(f)
    members: list[str] = []
    for pattern in workspace.get("workspace", {}).get("members", ["."]):
        members.extend(sorted(glob.glob(os.path.join(ROOT, pattern))))
    roots = []
    for member in members:
        manifest_path = os.path.join(member, "Cargo.toml")
        if not os.path.isfile(manifest_path):
            continue
        with open(manifest_path, "rb") as f:
            manifest = tomllib.load(f)
        name = manifest.get("package", {}).get("name", os.path.basename(member))
        files = [manifest.get("lib", {}).get("path", "src/lib.rs")]
        files += [b["path"] for b in manifest.get("bin", []) if "path" in b]
        files += ["src/main.rs"]
        files += sorted(os.path.relpath(p, member) for p in glob.glob(os.path.join(member, "src/bin/*.rs")))
        files += sorted(os.path.relpath(p, member) for p in glob.glob(os.path.join(member, "src/bin/*/main.rs")))
        seen = set()
        for rel in files:
            path = os.path.normpath(os.path.join(member, rel))
            if path in seen or not os.path.isfile(path):
                continue
            seen.add(path)
            kind = "lib" if rel == files[0] else "bin " + os.path.relpath(path, member)
            roots.append((f"{name} ({kind})" if kind != "lib" else name, path))
    return roots


def main() -> int:
    left, kept = [], []
    for label, root in crate_roots():
        modules = module_tree(root)
        edges: dict = {p: set() for p in modules}
        why: dict = {}
        for m in modules.values():
            for line, path in m.names:
                t = resolve(m, path, modules)
                if t is None or related(m.path, t):
                    continue
                edges[m.path].add(t)
                why.setdefault((m.path, t), (line, "::".join(path)))
        for comp in components(sorted(modules), edges):
            members = sorted(comp)
            files = [os.path.relpath(modules[p].file, ROOT) for p in members]
            lines = [
                f"    {os.path.relpath(modules[a].file, ROOT)}:{why[(a, b)][0]} names "
                f"{why[(a, b)][1]} ({os.path.relpath(modules[b].file, ROOT)})"
                for a in members
                for b in members
                if b in edges[a]
            ]
            entry = (f"{label}: " + " <-> ".join(files), lines)
            marked = [f for p, f in zip(members, files) if modules[p].marked]
            (kept if marked else left).append((entry, marked))
    for (head, _), marked in kept:
        print(f"kept (import-cycle comment in {', '.join(marked)}): {head}")
    if not left:
        print("No import cycles between files of a crate.")
        return 0
    print("Files that import each other (put the shared item where it belongs, or say why the")
    print("circle is right with an `// import-cycle: <reason>` comment in one of them):")
    for (head, lines), _ in left:
        print(head)
        print("\n".join(lines))
    return 1


if __name__ == "__main__":
    sys.exit(main())
