#!/usr/bin/env python3
"""Finds import cycles between source files: every path a file names (in `use` items and inline)
is resolved to the file that defines the item. `crate::`, `super::` and `self::` paths, child
modules named bare, and names a `use` item brought in (`use crate::mcp;` then `mcp::x::y`) are
followed; a name a module re-exports (`pub use`, in `lib.rs`, a `mod.rs` or any file) is followed
to the file that defines it, so `crate::Error` is an edge to `error.rs`, not to the crate root.
A file and the modules below it are one unit (a `mod.rs` naming its children is not a cycle);
test modules are left out. Exits 1 on a cycle that is not allow-listed below, so a new cycle
fails `scripts/test.sh`; and on an import that points up the crate's layers (`LAYERS` below)."""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRATES = ["src", "sandbox/src", "egress/src"]

# Known cycles, each naming its files (relative to the crate's `src/`), with the reason it may
# stay. None today.
ALLOWED: list = []

# The layers of a crate, lowest first: each names the top-level modules (files or folders under
# the crate's `src/`) in it. A module may import its own layer and those below, never one above
# (the crate root, `lib.rs`, is above them all). The map of `src/lib.rs`'s docs, checked.
LAYERS = {
    "src": [
        (
            "base",
            [
                "text",
                "error",
                "output",
                "progress",
                "paths",
                "fsutil",
                "lines",
                "protocol",
                "canonical",
                "refusals",
                "session",
                "stdio",
            ],
        ),
        ("lockfile", ["lockfile", "signing", "drift", "audit", "pin"]),
        ("wire", ["mcp"]),
        ("policy", ["sandboxing", "learning", "taint", "launch", "proxy_start"]),
        ("proxy", ["proxy"]),
        ("commands", ["commands", "cli"]),
    ],
}

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# How many re-exports in a row are followed (a chain longer than this is a bug in the tree).
HOPS = 8


def modules(src):
    """Maps a module path (tuple) to its file, for one crate. `src/bin/` holds other crates."""
    out = {}
    for dirpath, dirs, files in os.walk(src):
        if os.path.relpath(dirpath, src) == ".":
            dirs[:] = [d for d in dirs if d != "bin"]
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), src)
            parts = rel[:-3].split(os.sep)
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            if rel == "main.rs" and os.path.exists(os.path.join(src, "lib.rs")):
                continue
            out[tuple(parts)] = rel
    return out


# Comments, strings and character literals, matched in one pass so that `//` in a string or a
# quote in a comment does not confuse the other.
LEXEMES = re.compile(
    r"//[^\n]*|/\*.*?\*/|b?r(#*)\".*?\"\1|b?\"(?:\\.|[^\"\\])*\"|b?'(?:\\.|[^'\\])'",
    re.S,
)
USE = re.compile(r"\b(pub(?:\s*\([^)]*\))?\s+)?use\s+([^;]+);")


TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*([;{])")


def strip(text):
    """The code of a file: comments, strings and `#[cfg(test)] mod` blocks (wherever they are)
    left out. Returns the text and the names of test modules that are files of their own."""
    text = LEXEMES.sub(lambda m: '""' if m.group(0).endswith(('"', "#")) else " ", text)
    out, files, at = [], set(), 0
    for m in TEST_MOD.finditer(text):
        if m.start() < at:
            continue
        out.append(text[at : m.start()])
        if m.group(2) == ";":
            files.add(m.group(1))
            at = m.end()
            continue
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        at = i
    out.append(text[at:])
    return "".join(out), files


def expand(tree):
    """`a::{b, c::{d as e}}` -> [([a, b], b), ([a, c, d], e)]: each path with the name it binds
    (`self` in a group binds the group's last segment)."""
    tree = tree.strip()
    i = tree.find("{")
    if i < 0:
        name = None
        if " as " in tree:
            tree, name = (s.strip() for s in tree.split(" as ", 1))
        segs = [s.strip() for s in tree.split("::") if s.strip()]
        if segs and segs[-1] == "self":
            segs = segs[:-1]
        if not segs:
            return []
        return [(segs, name or segs[-1])]
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
        if p.strip() == "self":
            if prefix:
                out.append((list(prefix), prefix[-1]))
            continue
        for segs, name in expand(p):
            out.append((prefix + segs, name))
    return out


class Crate:
    def __init__(self, src):
        self.mods = modules(src)
        self.texts, tests = {}, set()
        for mod, rel in self.mods.items():
            with open(os.path.join(src, rel), encoding="utf-8") as fh:
                self.texts[mod], files = strip(fh.read())
            tests.update(mod + (name,) for name in files)
        # A test module in a file of its own (`#[cfg(test)] mod tests;`) and what is below it.
        for mod in list(self.mods):
            if any(mod[: len(t)] == t for t in tests):
                del self.mods[mod], self.texts[mod]
        # Per module: the names its `use` items bind (all of them, for its own paths) and the
        # names it re-exports (`pub use`, for paths from elsewhere that go through it).
        self.uses, self.exports = {}, {}
        for mod, text in self.texts.items():
            uses, exports = {}, {}
            for m in USE.finditer(text):
                for segs, name in expand(m.group(2)):
                    if name == "*":
                        continue
                    uses[name] = segs
                    if m.group(1):
                        exports[name] = segs
            self.uses[mod], self.exports[mod] = uses, exports

    def absolute(self, segs, here, aliases=True):
        """A path named in module `here`, as segments from the crate root (None: outside it)."""
        if segs[0] == "crate":
            return segs[1:]
        if segs[0] in ("self", "super"):
            base, rest = list(here), list(segs)
            if rest[0] == "self":
                rest = rest[1:]
            while rest and rest[0] == "super":
                base, rest = base[:-1], rest[1:]
            return base + rest
        if tuple(list(here) + [segs[0]]) in self.mods:
            return list(here) + segs
        if aliases and segs[0] in self.uses[here]:
            bound = self.uses[here][segs[0]]
            if bound[0] != segs[0]:
                full = self.absolute(bound, here, aliases=False)
                if full is not None:
                    return full + segs[1:]
        return None

    def resolve(self, full, hops=0):
        """The file (module) that defines the item at `full`, re-exports followed."""
        full = [s for s in full if s not in ("self", "*")]
        for n in range(len(full), -1, -1):
            mod = tuple(full[:n])
            if mod not in self.mods:
                continue
            if n < len(full) and hops < HOPS:
                bound = self.exports[mod].get(full[n])
                if bound:
                    target = self.absolute(bound, mod, aliases=False)
                    if target is not None:
                        found = self.resolve(target + full[n + 1 :], hops + 1)
                        if found is not None:
                            return found
            return mod
        return None

    def edges(self):
        """Module -> {module it names: the first path that names it}."""
        out = {m: {} for m in self.mods}
        for mod, text in self.texts.items():
            named = [segs for m in USE.finditer(text) for segs, _ in expand(m.group(2))]
            rest = USE.sub("", text)
            path = r"(?<![A-Za-z0-9_:])(" + IDENT + r"(?:::" + IDENT + r")+)"
            named += [m.group(1).split("::") for m in re.finditer(path, rest)]
            for segs in named:
                full = self.absolute(segs, mod)
                if full is None:
                    continue
                to = self.resolve(full)
                if to is None or to == mod:
                    continue
                if to[: len(mod)] == mod or mod[: len(to)] == to:
                    continue
                out[mod].setdefault(to, "::".join(segs))
        return out


def components(edges):
    """Tarjan's strongly connected components with more than one module."""
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
    return out


def cycles(crate):
    edges = crate.edges()
    mods = crate.mods
    result = []
    for comp in components(edges):
        files = frozenset(mods[m] for m in comp)
        inner = sorted(
            f"{mods[a]} -> {mods[b]} ({edges[a][b]})" for a in comp for b in edges[a] if b in comp
        )
        result.append((files, inner))
    return result


def layer_breaches(name, crate):
    """Imports that point up the crate's [`LAYERS`], and top-level modules in no layer."""
    layers = LAYERS.get(name)
    if layers is None:
        return []
    rank = {unit: i for i, (_, units) in enumerate(layers) for unit in units}
    top = len(layers)
    out = []
    for unit in sorted({m[0] for m in crate.mods if m} - set(rank)):
        out.append(f"`{unit}` is in no layer: add it to LAYERS in scripts/import-cycles.py")
    edges = crate.edges()
    for mod in sorted(edges):
        if not mod or mod[0] not in rank:
            continue
        for to, path in sorted(edges[mod].items()):
            up = rank.get(to[0], top) if to else top
            if up > rank[mod[0]]:
                above = layers[up][0] if up < top else "the crate root"
                out.append(
                    f"{crate.mods[mod]} ({layers[rank[mod[0]]][0]}) imports {crate.mods[to]} "
                    f"({above}): {path}"
                )
    return out


def main():
    bad = 0
    for name in CRATES:
        crate = Crate(os.path.join(ROOT, name))
        for line in layer_breaches(name, crate):
            print(f"layer: {name}: {line}")
            bad += 1
        for files, inner in cycles(crate):
            allowed = (name, files) in ALLOWED
            tag = "allowed" if allowed else "cycle"
            print(f"{tag}: {name}: {', '.join(sorted(files))}")
            for e in inner:
                print(f"    {e}")
            bad += not allowed
    if bad:
        print(f"error: {bad} import cycle(s) or imports up the layers", file=sys.stderr)
        print(
            "hint: move what both files need into a lower module that neither imports back",
            file=sys.stderr,
        )
        return 1
    print("no import cycles between files, and every import points down the layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
