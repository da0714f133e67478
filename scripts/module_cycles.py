#!/usr/bin/env python3
"""Finds import cycles between the source files of each crate.

The rule (issue 42): every path a file names -- its `use` declarations and
the `crate::`, `super::`, `self::` and child-module paths in its code -- is
an import of the file of the *longest module prefix* of that path. So
`crate::server::http::BearerAuth` imports `server/http/mod.rs`, even when
`BearerAuth` is defined in a child of it and only re-exported there: naming
a module's facade depends on that facade. Not imports: `mod` declarations,
and the `pub use` lines of a facade (`mod.rs`, `lib.rs`, `main.rs`), which
are what the facade offers rather than what it uses. Test code
(`#[cfg(test)]` modules, inline or in files, and `#[cfg(test)]` uses) is
left out: it is not part of the crate's structure. An edge A -> B means A
imports B.

The same is checked one level up: no two top-level modules of a crate
(`auth/`, `server/`, `codec.rs`, ...) may import each other through any of
their files, so that the layers of docs/ARCHITECTURE.md stay an order.

Usage: scripts/module_cycles.py [--why] [CRATE_SRC_DIR...]   (default: every crates/*/src)
Prints each cycle (a strongly connected set of files) and exits 1 if there
is one; prints the number of files and edges and exits 0 otherwise.
"""

import os
import re
import sys
from collections import defaultdict

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip_code(text):
    """The text without comments, string and char literals (kept as spaces,
    so that offsets and braces stay meaningful)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            out.append(" ")
        elif re.match(r'b?r#*"', text[i:i + 8]) and (i == 0 or not re.match(r"[A-Za-z0-9_]", text[i - 1])):
            m = re.match(r'b?r(#*)"', text[i:])
            if m:
                end = text.find('"' + m.group(1), i + m.end())
                i = n if end < 0 else end + 1 + len(m.group(1))
                out.append('""')
            else:
                out.append(c)
                i += 1
        elif c == '"' or (c == "b" and text.startswith('b"', i)):
            i += 2 if c == "b" else 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:])
            if m:
                out.append("' '")
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


# Blocks that are not this file's own code: test modules
# (`#[cfg(test)] mod name {`, also `cfg(all(test, ...))`) and what a macro
# generates (`quote! {`, `quote_spanned!(span => {`).
TEST_ATTR = r"#\[cfg\((?:all\()?test\b[^\]]*\]\s*"
# Other attributes may stand between `#[cfg(test)]` and the item.
OTHER_ATTRS = r"(?:#\[[^\]]*\]\s*)*"
TEST_MODULE = TEST_ATTR + OTHER_ATTRS + r"(pub(\([^)]*\))?\s+)?mod\s+" + IDENT + r"\s*\{"
# `#[cfg(test)] mod tests;` and `#[cfg(test)] use ...;`: dropped to the `;`.
TEST_ITEM = TEST_ATTR + OTHER_ATTRS + r"(?:pub(?:\([^)]*\))?\s+)?(?:mod\s+" + IDENT + r"\s*;|use\s[^;]*;)"
QUOTED = r"\bquote(?:_spanned)?!\s*(?:\([^)]*=>\s*)?\{"


def drop_blocks(code, opening):
    """Removes every block that starts with a match of `opening` (which ends
    at the block's `{`) through its matching `}`."""
    while True:
        m = re.search(opening, code)
        if not m:
            return code
        depth, i = 1, m.end()
        while i < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            i += 1
        code = code[: m.start()] + code[i:]


def expand_use_tree(tree):
    """`a::{b, c::{d as e}, self}` -> [(["a","b"], "b"), (["a","c","d"], "e"), (["a"], "a")]."""
    tree = tree.strip()
    results = []
    depth = 0
    # split a top-level path prefix from a brace group
    brace = None
    for i, c in enumerate(tree):
        if c == "{":
            if depth == 0 and brace is None:
                brace = i
            depth += 1
        elif c == "}":
            depth -= 1
    if brace is not None:
        prefix = tree[:brace].rstrip(":").strip()
        inner = tree[brace + 1: tree.rindex("}")]
        parts, depth, start = [], 0, 0
        for i, c in enumerate(inner):
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
            elif c == "," and depth == 0:
                parts.append(inner[start:i])
                start = i + 1
        parts.append(inner[start:])
        base = [s for s in prefix.split("::") if s] if prefix else []
        for part in parts:
            if not part.strip():
                continue
            for path, name in expand_use_tree(part):
                if path == ["self"]:
                    results.append((base, base[-1] if base else "self"))
                else:
                    results.append((base + path, name))
        return results
    alias = None
    m = re.match(r"(.*?)\s+as\s+(" + IDENT + r")$", tree)
    if m:
        tree, alias = m.group(1), m.group(2)
    path = [s.strip() for s in tree.split("::") if s.strip()]
    return [(path, alias or (path[-1] if path else ""))]


class Crate:
    def __init__(self, src):
        self.src = src
        self.files = {}  # module path tuple -> file
        self.module_of = {}  # file -> module path tuple
        self.code = {}
        self.uses = {}  # file -> [(path, name, is_pub)]
        self.defines = {}  # file -> set of item names defined at top level
        roots = [r for r in ("lib.rs", "main.rs") if os.path.exists(os.path.join(src, r))]
        for root in roots[:1]:
            self.load(os.path.join(src, root), ())

    def load(self, path, module):
        if path in self.module_of:
            return
        self.files[module] = path
        self.module_of[path] = module
        code = drop_blocks(drop_blocks(strip_code(open(path, encoding="utf-8").read()), TEST_MODULE), QUOTED)
        code = re.sub(TEST_ITEM, " ", code)
        self.code[path] = code
        uses = []
        for m in re.finditer(r"(?:^|[;{}\]\s])(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", code):
            for p, name in expand_use_tree(m.group(2)):
                uses.append((p, name, bool(m.group(1))))
        self.uses[path] = uses
        self.defines[path] = set(
            re.findall(
                r"\b(?:fn|struct|enum|trait|type|const|static|union|macro_rules!)\s+(" + IDENT + ")",
                code,
            )
        )
        here = os.path.dirname(path)
        stem = os.path.splitext(os.path.basename(path))[0]
        child_dir = here if stem in ("lib", "main", "mod") else os.path.join(here, stem)
        for m in re.finditer(r"(?:^|[;}\]\s])(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*;", code):
            name = m.group(1)
            for candidate in (os.path.join(child_dir, name + ".rs"), os.path.join(child_dir, name, "mod.rs")):
                if os.path.exists(candidate):
                    self.load(candidate, module + (name,))
                    break

    def children(self, module):
        return {m[-1] for m in self.files if len(m) == len(module) + 1 and m[:-1] == module}

    def absolute(self, module, path):
        """`path` as named in `module`, made absolute; None if external."""
        if not path:
            return None
        head = path[0]
        if head == "crate":
            return list(path[1:])
        if head in ("super", "self"):
            base = list(module)
            rest = list(path)
            while rest and rest[0] in ("super", "self"):
                if rest[0] == "super":
                    if not base:
                        return None
                    base.pop()
                rest.pop(0)
            return base + rest
        if head in self.children(module):
            return list(module) + list(path)
        # a name brought in by a `use` of this module
        for used, name, _ in self.uses.get(self.files.get(tuple(module)), []):
            if name == head and used and used[0] in {"crate", "super", "self"} | self.children(module):
                base = self.absolute(module, used)
                if base is not None:
                    return base + list(path[1:])
        return None

    def resolve(self, segments):
        """The file of the longest module prefix of absolute `segments`."""
        i = len(segments)
        while i >= 0 and tuple(segments[:i]) not in self.files:
            i -= 1
        return self.files[tuple(segments[:i])] if i >= 0 else None

    def is_facade(self, file):
        return os.path.basename(file) in ("mod.rs", "lib.rs", "main.rs")

    def edges(self):
        graph = defaultdict(set)
        self.why = defaultdict(set)
        for file, module in self.module_of.items():
            code = self.code[file]
            body = re.sub(r"(?:pub(?:\([^)]*\))?\s+)?use\s+[^;]+;", " ", code)
            # A facade's `pub use` lines are what it offers, not imports.
            facade = self.is_facade(file)
            paths = [p for p, _, is_pub in self.uses[file] if not (facade and is_pub)]
            children = self.children(module)
            for m in re.finditer(r"(?<![A-Za-z0-9_:])((?:" + IDENT + r"::)+" + IDENT + r")", body):
                parts = m.group(1).split("::")
                if parts[0] in ("crate", "super", "self") or parts[0] in children:
                    paths.append(parts)
            # `super::` inside an inline `mod name { }` names this file's
            # own items (inline modules are not tracked as modules here).
            inline = re.search(r"(?:^|[;}\]\s])(?:pub(?:\([^)]*\))?\s+)?mod\s+" + IDENT + r"\s*\{", code)
            own = self.defines[file] | {name for _, name, _ in self.uses[file]}
            for path in paths:
                if inline and len(path) > 1 and path[0] == "super" and path[1] in own:
                    continue
                absolute = self.absolute(module, path)
                if absolute is None:
                    continue
                target = self.resolve(absolute)
                if target and target != file:
                    graph[file].add(target)
                    self.why[(file, target)].add("::".join(path))
        return graph


def cycles(graph, nodes):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    flags = [a for a in sys.argv[1:] if a.startswith("--")]
    dirs = [a for a in sys.argv[1:] if not a.startswith("--")] or sorted(
        os.path.join(here, "crates", c, "src") for c in os.listdir(os.path.join(here, "crates"))
    )
    found = False
    for src in dirs:
        crate = Crate(src)
        graph = crate.edges()
        rel = lambda f: os.path.relpath(f, src)
        components = cycles(graph, crate.module_of)
        found = found or bool(components)
        for component in components:
            print(f"{os.path.relpath(src, here)}: a cycle between {len(component)} files:")
            members = set(component)
            for f in component:
                into = sorted(t for t in graph[f] if t in members)
                if "--why" in flags:
                    for t in into:
                        print(f"  {rel(f)} -> {rel(t)}: {', '.join(sorted(crate.why[(f, t)]))}")
                else:
                    print(f"  {rel(f)} -> {', '.join(rel(t) for t in into)}")
        # The same graph one level up: between top-level modules.
        top = lambda f: crate.module_of[f][0] if crate.module_of[f] else None
        layers = defaultdict(set)
        for f, targets in graph.items():
            for t in targets:
                if top(f) and top(t) and top(f) != top(t):
                    layers[top(f)].add(top(t))
        modules = {top(f) for f in crate.module_of if top(f)}
        layer_cycles = cycles(layers, modules)
        found = found or bool(layer_cycles)
        for component in layer_cycles:
            print(f"{os.path.relpath(src, here)}: a cycle between the modules {', '.join(component)}:")
            members = set(component)
            for f, targets in sorted(graph.items()):
                for t in sorted(targets):
                    if top(f) in members and top(t) in members and top(f) != top(t):
                        detail = f": {', '.join(sorted(crate.why[(f, t)]))}" if "--why" in flags else ""
                        print(f"  {rel(f)} -> {rel(t)}{detail}")
        if not components and not layer_cycles:
            edges = sum(len(v) for v in graph.values())
            print(
                f"{os.path.relpath(src, here)}: {len(crate.module_of)} files, {edges} edges, "
                f"{len(modules)} top-level modules, no cycle"
            )
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
