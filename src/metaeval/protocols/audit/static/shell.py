"""Shell scripts read through tree-sitter-bash, with the words a command will really see.

`parse_script(path, text, script_path, cwd)` returns a `ShellScript`: one `ShellCommand` per
statement (a pipeline or `&&`/`||` list, the condition and body statements of `if`, `for`,
`while`, `case` and functions), each with the source text and line range it came from, and
its simple commands as resolved word lists:

- redirections are set apart (`2>/dev/null` is a redirection to /dev/null, not an
  argument), and `> FILE` targets are kept as `redirects`;
- `$VAR`, `${VAR}` and `${VAR:-default}` (`${1:-x}` too) take the script's own assignments
  or the default; `$0` and `${BASH_SOURCE[0]}` are the script's runtime path (`/tests/test.sh`
  for tests/test.sh), so `$(dirname "$0")/x.py` is `/tests/x.py`; `$(pwd)`,
  `$(cd DIR && pwd)`, `$(realpath X)` and `$(dirname X)` are computed;
- `cd DIR` moves the working directory of the commands that follow (`cwd`);
- whatever cannot be known stays as written (`$HOME/x`, `$(date)`), so no check mistakes
  it for an absolute path;
- heredoc bodies are kept with their line numbers and a kind (python, shell, data); a shell
  heredoc (`bash <<EOF`) is parsed in turn.

Parsing never fails: tree-sitter recovers from syntax errors, and the statements it could
not read are skipped.
"""

from __future__ import annotations

import re
from functools import lru_cache

from tree_sitter import Language, Node, Parser

from metaeval.protocols.audit.static.shell_script import (
    Heredoc,
    ShellCommand,
    ShellScript,
    SimpleCommand,
    runtime_path,
)
from metaeval.protocols.audit.static.shell_words import WordResolver

_PY_CMD = re.compile(r"^python[\d.]*$")


@lru_cache(maxsize=1)
def _parser() -> Parser:
    import tree_sitter_bash

    return Parser(Language(tree_sitter_bash.language()))


class _Walker(WordResolver):
    """Walks a script's statements into `ShellCommand`s, heredocs and variables."""

    def __init__(self, script: ShellScript, source: bytes, script_path: str, cwd: str | None):
        super().__init__(script, source, script_path, cwd)
        self.current: ShellCommand | None = None

    def statements(self, node: Node) -> None:
        for child in node.named_children:
            self.statement(child)

    def statement(self, node: Node) -> None:
        kind = node.type
        if kind in ("comment", "heredoc_body", "heredoc_end", "heredoc_start"):
            return
        if kind in (
            "if_statement",
            "elif_clause",
            "else_clause",
            "while_statement",
            "for_statement",
            "c_style_for_statement",
            "case_statement",
            "case_item",
            "do_group",
            "compound_statement",
            "subshell",
            "function_definition",
        ):
            for child in node.named_children:
                if child.type in ("word", "variable_name", "string", "concatenation"):
                    continue  # for-loop values, case patterns, function names
                self.statement(child)
            return
        self.begin(node)
        self.collect(node)
        self.current = None

    def begin(self, node: Node) -> None:
        command = ShellCommand(
            self.script.file,
            node.start_point[0] + 1,
            node.end_point[0] + 1,
            self.text(node),
        )
        # A heredoc body belongs to the script, not the statement text.
        first_heredoc = next(iter(_descendants(node, "heredoc_body")), None)
        if first_heredoc is not None:
            command.text = (
                self.source[node.start_byte : first_heredoc.start_byte]
                .decode("utf-8", "replace")
                .rstrip()
            )
            command.end = first_heredoc.start_point[0]
        self.script.commands.append(command)
        self.current = command

    def collect(self, node: Node) -> None:
        kind = node.type
        if kind == "command":
            self.command(node, [])
        elif kind == "redirected_statement":
            body = node.child_by_field_name("body")
            redirects = [c for c in node.named_children if c is not body]
            if body is not None and body.type == "command":
                self.command(body, redirects)
            else:
                if body is not None:
                    if body.type in (
                        "if_statement",
                        "while_statement",
                        "for_statement",
                        "compound_statement",
                        "subshell",
                        "case_statement",
                    ):
                        self.current = None
                        self.statement(body)
                    else:
                        self.collect(body)
                for redirect in redirects:
                    self.redirect(redirect, None)
        elif kind in ("variable_assignment", "variable_assignments"):
            self.assign(node)
        elif kind == "declaration_command":
            for child in node.named_children:
                if child.type == "variable_assignment":
                    self.assign(child)
        elif kind in ("list", "pipeline", "negated_command"):
            for child in node.named_children:
                if child.type in (
                    "if_statement",
                    "while_statement",
                    "for_statement",
                    "compound_statement",
                    "subshell",
                    "case_statement",
                ):
                    self.statement(child)
                else:
                    self.collect(child)
        elif kind in ("test_command", "unset_command"):
            return
        elif kind in (
            "if_statement",
            "while_statement",
            "for_statement",
            "compound_statement",
            "subshell",
            "case_statement",
        ):
            self.statement(node)

    def assign(self, node: Node) -> None:
        name_node = node.child_by_field_name("name")
        value_node = node.child_by_field_name("value")
        if name_node is None:
            return
        name = self.text(name_node)
        value = self.word(value_node) if value_node is not None else ""
        self.script.variables[name] = value

    def command(self, node: Node, outer_redirects: list[Node]) -> None:
        words = self.argv(node)  # prefix assignments (`FOO=1 cmd`) only affect that command
        simple = SimpleCommand(words, node.start_point[0] + 1, self.cwd)
        if self.current is None:
            self.begin(node)
        assert self.current is not None
        self.current.simple.append(simple)
        for child in [*node.named_children, *outer_redirects]:
            if child.type.endswith("redirect"):
                self.redirect(child, simple)
        # `: "${VAR:=default}"` assigns through the expansion; words() did that already.
        if words and words[0] in ("cd", "pushd"):
            target = next((w for w in words[1:] if not w.startswith("-")), None)
            self.cwd = self.join(self.cwd, target) if target else "/root"
        elif words and words[0] == "export":
            for word in words[1:]:
                if "=" in word:
                    key, _, value = word.partition("=")
                    self.script.variables[key] = value

    def redirect(self, node: Node, simple: SimpleCommand | None) -> None:
        if node.type == "heredoc_redirect":
            self.heredoc(node, simple)
            return
        destination = node.child_by_field_name("destination")
        operator = next((c.type for c in node.children if not c.is_named), ">")
        if destination is None:
            named = [c for c in node.named_children if c.type != "file_descriptor"]
            destination = named[-1] if named else None
        if destination is None or simple is None:
            return
        target = self.word(destination)
        if operator in (">&", "<&", "&>", ">&-") and target.isdigit():
            return
        simple.redirects.append((operator, target))

    def heredoc(self, node: Node, simple: SimpleCommand | None) -> None:
        body = next(iter(_descendants(node, "heredoc_body")), None)
        if body is None:
            return
        start = body.start_point[0]  # 0-based line of the first body line
        end_node = next(iter(_descendants(node, "heredoc_end")), None)
        last = end_node.start_point[0] if end_node is not None else body.end_point[0]
        lines = self.source.decode("utf-8", "replace").split("\n")[start:last]
        words = simple.words if simple else []
        targets = [t for _, t in simple.redirects] if simple else []
        # The redirect that writes the heredoc out may follow the heredoc operator.
        for child in node.named_children:
            if child.type == "file_redirect":
                dest = child.child_by_field_name("destination")
                if dest is not None:
                    targets.append(self.word(dest))
        kind = "data"
        head = words[0].rsplit("/", 1)[-1] if words else ""
        if _PY_CMD.match(head) or any(t.endswith(".py") for t in targets):
            kind = "python"
        elif head in ("bash", "sh") or any(t.endswith((".sh", ".bash")) for t in targets):
            kind = "shell"
        heredoc = Heredoc(
            self.script.file,
            node.start_point[0] + 1,
            start + 1,
            lines,
            kind,
            targets[0] if targets else "",
        )
        self.script.heredocs.append(heredoc)
        if kind == "shell":
            inner = parse_script(
                self.script.file,
                "\n".join(lines),
                script_path=self.script_path,
                cwd=self.cwd,
                variables=dict(self.script.variables),
            )
            for command in inner.commands:
                command.line += start
                command.end += start
                for simple_command in command.simple:
                    simple_command.line += start
                self.script.commands.append(command)
            for name, value in inner.variables.items():
                self.script.variables.setdefault(name, value)
            for inner_doc in inner.heredocs:
                inner_doc.command_line += start
                inner_doc.first_body_line += start
                self.script.heredocs.append(inner_doc)


def _descendants(node: Node, kind: str) -> list[Node]:
    found: list[Node] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type == kind:
            found.append(current)
            continue
        stack.extend(reversed(current.children))
    return found


def parse_script(
    path: str,
    text: str,
    *,
    script_path: str | None = None,
    cwd: str | None = "/app",
    variables: dict[str, str] | None = None,
) -> ShellScript:
    """Parse one shell script (or a Dockerfile RUN line) into statements and resolved words.

    `script_path` is where the script lives at run time (default: `runtime_path(path)`),
    `cwd` the directory it starts in (None: unknown).
    """
    script = ShellScript(file=path, variables=dict(variables or {}))
    source = text.encode("utf-8", "replace")
    tree = _parser().parse(source)
    walker = _Walker(script, source, script_path or runtime_path(path), cwd)
    walker.statements(tree.root_node)
    script.commands.sort(key=lambda c: c.line)
    return script


def parse_shell(path: str, lines: list[str]) -> ShellScript:
    """`parse_script` over the lines of a task file (the old signature, kept for callers)."""
    return parse_script(path, "\n".join(lines))
