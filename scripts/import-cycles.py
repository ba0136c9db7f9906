#!/usr/bin/env python3
"""Finds import cycles between source files: every `crate::`, `super::` and `self::` path a file
names (in `use` items and inline), resolved to the file that defines the module, and the strongly
connected components of that graph. A file and the modules below it are one unit (a `mod.rs`
re-exporting its children is not a cycle); test modules are left out. Exits 1 on a cycle that is
not allow-listed below, so a new cycle fails `scripts/test.sh`."""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRATES = ["src", "sandbox/src", "egress/src"]

# Known cycles, each naming its files (relative to the crate's `src/`), with the reason it may
# stay. None today: the sandbox's launcher/guard/prepare cycle was broken by moving the launch
# failure (`fail.rs`) and the AppArmor question (`apparmor.rs`) below them.
ALLOWED: list = []

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def modules(src):
    """Maps a module path (tuple) to its file, for one crate."""
    out = {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), src)
            parts = rel[:-3].split(os.sep)
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            if rel == "main.rs" and () in out:
                continue
            out[tuple(parts)] = rel
    return out


# Comments, strings and character literals, matched in one pass so that `//` in a string or a
# quote in a comment does not confuse the other.
LEXEMES = re.compile(
    r"//[^\n]*|/\*.*?\*/|b?r(#*)\".*?\"\1|b?\"(?:\\.|[^\"\\])*\"|b?'(?:\\.|[^'\\])'",
    re.S,
)


def strip(text):
    text = LEXEMES.sub(lambda m: '""' if m.group(0).endswith(('"', "#")) else " ", text)
    m = re.search(r"#\[cfg\(test\)\]\s*(pub\s+)?mod\s+" + IDENT, text)
    return text[: m.start()] if m else text


def expand(tree):
    """`a::{b, c::{d}}` -> [a::b, a::c::d] (as lists of segments)."""
    tree = tree.strip()
    i = tree.find("{")
    if i < 0:
        segs = [s.strip() for s in tree.split("::") if s.strip()]
        segs = [s.split(" as ")[0].strip() for s in segs]
        return [segs] if segs else []
    prefix = [s.strip() for s in tree[:i].split("::") if s.strip()]
    inner = tree[i + 1 : tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        for sub in expand(p):
            out.append(prefix + sub)
    return out


def paths(text):
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        yield from expand(m.group(1))
    no_use = re.sub(r"\buse\s+[^;]+;", "", text)
    for m in re.finditer(r"\b((?:crate|super|self)(?:::" + IDENT + r")+)", no_use):
        yield m.group(1).split("::")


def resolve(segs, here, is_mod, mods):
    base = list(here) if is_mod else list(here[:-1])
    if segs[0] == "crate":
        base, rest = [], segs[1:]
    elif segs[0] in ("super", "self"):
        rest = list(segs)
        if rest[0] == "self":
            base = list(here)
            rest = rest[1:]
        else:
            base = list(here)
        while rest and rest[0] == "super":
            base = base[:-1]
            rest = rest[1:]
    else:
        return None
    full = base + [s for s in rest if s not in ("self", "*")]
    for n in range(len(full), -1, -1):
        if tuple(full[:n]) in mods:
            return tuple(full[:n])
    return None


def cycles(src):
    mods = modules(src)
    edges = {m: set() for m in mods}
    for mod, rel in mods.items():
        is_mod = rel.endswith(("mod.rs", "lib.rs", "main.rs"))
        with open(os.path.join(src, rel), encoding="utf-8") as fh:
            text = strip(fh.read())
        for segs in paths(text):
            to = resolve(segs, mod, is_mod, mods)
            if to is None or to == mod:
                continue
            if to[: len(mod)] == mod or mod[: len(to)] == to:
                continue
            edges[mod].add(to)
    # Tarjan's strongly connected components.
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    result = []
    for comp in out:
        files = frozenset(mods[m] for m in comp)
        inner = sorted(
            f"{mods[a]} -> {mods[b]}" for a in comp for b in edges[a] if b in comp
        )
        result.append((files, inner))
    return result


def main():
    bad = 0
    for crate in CRATES:
        for files, inner in cycles(os.path.join(ROOT, crate)):
            allowed = (crate, files) in ALLOWED
            tag = "allowed" if allowed else "cycle"
            print(f"{tag}: {crate}: {', '.join(sorted(files))}")
            for e in inner:
                print(f"    {e}")
            bad += not allowed
    if bad:
        print(f"error: {bad} import cycle(s) between files", file=sys.stderr)
        print(
            "hint: move what both files need into a lower module that neither imports back",
            file=sys.stderr,
        )
        return 1
    print("no import cycles between files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
