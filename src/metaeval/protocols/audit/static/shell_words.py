"""The value a shell word will have at run time, as far as a static reading can know it.

`WordResolver` reads tree-sitter-bash word nodes: quotes and escapes removed, `$VAR` and
`${VAR:-default}` from the script's own assignments, `$0` as the script's runtime path, and
`$(pwd)`, `$(cd DIR && pwd)`, `$(dirname X)`, `$(realpath X)`, `$(basename X)` computed.
Whatever cannot be known stays as written. `shell.py` walks the statements on top of it.
"""

from __future__ import annotations

import posixpath
import re

from tree_sitter import Node

from metaeval.protocols.audit.static.shell_script import ShellScript

_SPECIAL_SOURCES = ("$0", "${BASH_SOURCE[0]}", "${BASH_SOURCE}", "$BASH_SOURCE")


class WordResolver:
    """Word values of one script's source, with the working directory known so far."""

    def __init__(self, script: ShellScript, source: bytes, script_path: str, cwd: str | None):
        self.script = script
        self.source = source
        self.script_path = script_path
        self.cwd = cwd

    def text(self, node: Node) -> str:
        return self.source[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def word(self, node: Node) -> str:
        """The value of a word node as far as it can be known."""
        kind = node.type
        if kind in ("word", "number", "string_content", "command_name"):
            if kind == "command_name":
                return "".join(self.word(c) for c in node.named_children) or self.text(node)
            text = self.text(node)
            return re.sub(r"\\(.)", r"\1", text) if kind == "word" else text
        if kind == "raw_string":
            return self.text(node)[1:-1]
        if kind == "ansi_c_string":
            return self.text(node)[2:-1]
        if kind in ("string", "translated_string"):
            parts = []
            inner = self.text(node)
            if not node.named_children:
                return inner[1:-1]
            # keep literal text between children (tree-sitter leaves some of it unnamed)
            pos = node.start_byte + 1
            for child in node.named_children:
                if child.start_byte > pos:
                    parts.append(self.source[pos : child.start_byte].decode("utf-8", "replace"))
                parts.append(self.word(child))
                pos = child.end_byte
            if node.end_byte - 1 > pos:
                parts.append(self.source[pos : node.end_byte - 1].decode("utf-8", "replace"))
            return "".join(parts)
        if kind == "concatenation":
            return "".join(self.word(c) for c in node.children)
        if kind == "simple_expansion":
            return self.simple_expansion(node)
        if kind == "expansion":
            return self.expansion(node)
        if kind == "command_substitution":
            return self.substitution(node)
        return self.text(node)

    def simple_expansion(self, node: Node) -> str:
        raw = self.text(node)
        if raw in _SPECIAL_SOURCES:
            return self.script_path
        name = raw[1:]
        return self.script.variables.get(name, raw)

    def expansion(self, node: Node) -> str:
        raw = self.text(node)
        if raw in _SPECIAL_SOURCES:
            return self.script_path
        match = re.match(r"^\$\{([A-Za-z_]\w*|\d+|[@*#?])(?:(:?[-=+?])(.*))?\}$", raw, re.S)
        if not match:
            return raw
        name, op, _ = match.groups()
        known = self.script.variables.get(name)
        if op is None:
            return known if known is not None else raw
        default_nodes = [
            c
            for c in node.named_children
            if c.type not in ("variable_name", "special_variable_name", "subscript")
        ]
        default = "".join(self.word(c) for c in default_nodes) if default_nodes else ""
        if not default_nodes and match.group(3):
            default = match.group(3)
        if op in (":-", "-", ":=", "="):
            if known is not None and (known or op in ("-", "=")):
                return known
            if op in (":=", "="):
                self.script.variables[name] = default
            return default
        if op in (":+", "+"):
            return default if known else ("" if known is not None else raw)
        return known if known is not None else raw

    def substitution(self, node: Node) -> str:
        raw = self.text(node)
        words = self.inner_words(list(node.named_children))
        if words is None:
            return raw
        # `cd X && pwd`, `cd X; pwd -P`
        cwd = self.cwd
        result: str | None = None
        for argv in words:
            if not argv:
                continue
            head = argv[0]
            if head == "cd" and len(argv) >= 2:
                cwd = self.join(cwd, argv[-1])
            elif head == "pwd":
                result = cwd
            elif head == "dirname" and len(argv) >= 2:
                target = argv[-1]
                result = posixpath.dirname(target.rstrip("/")) or "." if "$" not in target else None
            elif head in ("realpath", "readlink") and len(argv) >= 2:
                result = self.join(cwd, argv[-1])
            elif head == "basename" and len(argv) >= 2:
                result = posixpath.basename(argv[1].rstrip("/"))
            else:
                return raw
        if result is None or "$" in result:
            return raw
        return result

    def inner_words(self, nodes: list[Node]) -> list[list[str]] | None:
        """Words of the simple commands in a `$(...)`, or None when it has other shapes."""
        out: list[list[str]] = []
        for node in nodes:
            if node.type == "command":
                out.append(self.argv(node))
            elif node.type == "list":
                inner = self.inner_words(node.named_children)
                if inner is None:
                    return None
                out += inner
            else:
                return None
        return out

    def join(self, cwd: str | None, target: str) -> str | None:
        if "$" in target:
            return None
        if target.startswith("/"):
            return posixpath.normpath(target)
        if cwd is None:
            return None
        return posixpath.normpath(posixpath.join(cwd, target))

    def argv(self, node: Node) -> list[str]:
        words: list[str] = []
        for child in node.named_children:
            if child.type == "variable_assignment":
                continue
            if child.type.endswith("redirect"):
                continue
            words.append(self.word(child))
        return words
