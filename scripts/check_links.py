#!/usr/bin/env python3
"""Relative links and anchors in the repository's Markdown files.

    python3 scripts/check_links.py

For every Markdown file git knows of (`git ls-files '*.md'`, plus new files
not ignored, so that a page is checked before its first commit), each
relative link — `[text](target)`, `![alt](target)`, `[ref]: target` — must
name a file or folder that exists, and each `#anchor` (in the same page, or
`page.md#anchor`) must be the anchor of a heading of that page, made the way
GitHub makes them: the heading's text lowercased, inline markup dropped,
every character but letters, digits, `-` and `_` removed, each space turned
into `-`; a repeated heading gets `-1`, `-2`, ... (`<a name="...">` and
`id="..."` count too). Links with a scheme (`http://`, `https://`,
`mailto:`, ...) are not checked: CI has no internet. Code blocks and code
spans are skipped.

Exits 1 listing every broken link (file:line: target: why), else prints a
one-line summary. Python 3 standard library only.
"""

from __future__ import annotations

import bisect
import os
import re
import subprocess
import sys
import unicodedata
from urllib.parse import unquote

ROOT = subprocess.run(
    ["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True
).stdout.strip()

SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
REFERENCE = re.compile(r"^ {0,3}\[([^\]]+)\]:[ \t]*(<[^>]*>|\S+)")
HTML_ANCHOR = re.compile(r"""<a\s[^>]*?\bname\s*=\s*["']([^"']+)["']|\bid\s*=\s*["']([^"']+)["']""")
HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)


def markdown_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "*.md"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    return sorted({path for path in listed.split("\0") if path and os.path.isfile(os.path.join(ROOT, path))})


def prose_lines(text: str) -> list[str | None]:
    """The file's lines, None for those inside fenced code blocks."""
    lines: list[str | None] = []
    fence: str | None = None
    for line in text.split("\n"):
        opening = FENCE.match(line)
        if fence is None:
            if opening:
                fence = opening.group(1)
                lines.append(None)
            else:
                lines.append(line)
        else:
            lines.append(None)
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence) \
                    and line.strip() == opening.group(1):
                fence = None
    return lines


def without_code_spans(line: str) -> str:
    """The line with each code span's content blanked (lengths kept)."""
    out = []
    i = 0
    while i < len(line):
        if line[i] == "`":
            run = len(line[i:]) - len(line[i:].lstrip("`"))
            ticks = line[i:i + run]
            end = line.find(ticks, i + run)
            while end != -1 and end + run < len(line) and line[end + run] == "`":
                end = line.find(ticks, end + run + 1)
            if end == -1:
                out.append(ticks)
                i += run
                continue
            out.append(" " * (end + run - i))
            i = end + run
        else:
            out.append(line[i])
            i += 1
    return "".join(out)


def heading_text(raw: str) -> str:
    """A heading's text as GitHub renders it, markup dropped."""
    text = re.sub(r"`+([^`]*)`+", r"\1", raw)  # code spans keep their text
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links and images keep their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    return text.strip()  # emphasis marks (* ~) are punctuation: slug() drops them


def slug(text: str) -> str:
    kept = []
    for ch in text.lower():
        category = unicodedata.category(ch)
        if ch in "-_" or ch == " " or category[0] in "LNM" or category == "Pc":
            kept.append("-" if ch == " " else ch)
    return "".join(kept)


def anchors_of(text: str) -> set[str]:
    """Every anchor GitHub gives the page's headings (and HTML anchors)."""
    seen: dict[str, int] = {}
    anchors: set[str] = set()

    def add(base: str) -> None:
        name = base
        while name in seen:
            seen[base] += 1
            name = f"{base}-{seen[base]}"
        seen[name] = 0
        anchors.add(name)

    lines = prose_lines(text)
    previous: str | None = None
    for line in lines:
        if line is None:
            previous = None
            continue
        atx = ATX.match(line)
        if atx:
            raw = re.sub(r"[ \t]+#+[ \t]*$", "", atx.group(2) or "")
            add(slug(heading_text(raw)))
            previous = None
            continue
        if SETEXT.match(line) and previous is not None and previous.strip() \
                and not previous.lstrip().startswith(("|", "-", "*", "+", ">")) \
                and not re.match(r"^ {0,3}\d+[.)]\s", previous):
            add(slug(heading_text(previous.strip())))
            previous = None
            continue
        for match in HTML_ANCHOR.finditer(line):
            anchors.add(match.group(1) or match.group(2))
        previous = line
    return anchors


def link_targets(text: str) -> list[tuple[int, str]]:
    """(line number, destination) of every inline link, image and reference definition."""
    text = HTML_COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    lines = prose_lines(text)
    found: list[tuple[int, str]] = []
    prose = "\n".join("" if line is None else without_code_spans(line) for line in lines)
    for number, line in enumerate(prose.split("\n"), start=1):
        reference = REFERENCE.match(line)
        if reference:
            found.append((number, reference.group(2).strip("<>")))
    starts = [0]
    for line in prose.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    for match in re.finditer(r"\]\(", prose):
        i = match.end()
        while i < len(prose) and prose[i] in " \t\n":
            i += 1
        if i < len(prose) and prose[i] == "<":
            end = prose.find(">", i)
            if end == -1:
                continue
            destination = prose[i + 1:end]
        else:
            depth = 0
            j = i
            while j < len(prose):
                ch = prose[j]
                if ch == "\\":
                    j += 2
                    continue
                if ch in " \t\n":
                    break
                if ch == "(":
                    depth += 1
                elif ch == ")":
                    if depth == 0:
                        break
                    depth -= 1
                j += 1
            destination = prose[i:j]
        if not destination:
            continue
        number = bisect.bisect_right(starts, match.start())
        found.append((number, destination))
    return found


def main() -> int:
    files = markdown_files()
    anchor_cache: dict[str, set[str]] = {}

    def anchors(path: str) -> set[str]:
        if path not in anchor_cache:
            with open(path, encoding="utf-8") as f:
                anchor_cache[path] = anchors_of(f.read())
        return anchor_cache[path]

    broken: list[str] = []
    checked = 0
    for relative in files:
        path = os.path.join(ROOT, relative)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for line, destination in link_targets(text):
            if SCHEME.match(destination) or destination.startswith("//"):
                continue
            checked += 1
            target, _, fragment = destination.partition("#")
            target = unquote(target.split("?", 1)[0])
            fragment = unquote(fragment)
            if target:
                if target.startswith("/"):
                    resolved = os.path.normpath(os.path.join(ROOT, target.lstrip("/")))
                else:
                    resolved = os.path.normpath(os.path.join(os.path.dirname(path), target))
                if not os.path.exists(resolved):
                    broken.append(f"{relative}:{line}: {destination}: no such file or folder")
                    continue
            else:
                resolved = path
            if fragment and resolved.endswith(".md") and os.path.isfile(resolved):
                if fragment not in anchors(resolved):
                    where = os.path.relpath(resolved, ROOT)
                    broken.append(f"{relative}:{line}: {destination}: no heading with the anchor #{fragment} in {where}")
    if broken:
        print("\n".join(broken))
        print(f"{len(broken)} broken of {checked} relative links in {len(files)} Markdown files", file=sys.stderr)
        return 1
    print(f"links: {checked} relative links and anchors in {len(files)} Markdown files, all found")
    return 0


if __name__ == "__main__":
    sys.exit(main())
