"""docs/settings.md lists every environment variable the settings read, and nothing else.

The settings modules are parsed, not imported: every call of a reading helper
(notify/env.py's, and any function in a settings module that passes its own first
argument to one) and every `os.environ` lookup with a literal name counts. A name built
with an f-string in a comprehension over a dict literal (`NOTIFY_RATE_{provider.upper()}`)
is expanded over that dict's keys.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
SETTINGS = ROOT / "config" / "settings"
DOC = ROOT / "docs" / "settings.md"

# notify/env.py's helpers whose first argument is a variable's name.
ENV_READERS = {
    "env_str",
    "env_int",
    "env_int_or_none",
    "env_float",
    "env_bool",
    "env_list",
    "env_origins",
    "env_float_list",
    "env_url",
    "database_from_url",
    "secret_text",
}
VARIABLE_HEADER = "| Variable | Default | Meaning |"
CONSTANT_HEADER = "| Setting | Value | Meaning |"
NAME = re.compile(r"`([A-Z][A-Z0-9_]+)`")


def settings_modules() -> list[Path]:
    """The settings modules, one per topic (the package's __init__ only imports them)."""
    return sorted(path for path in SETTINGS.glob("*.py") if path.name != "__init__.py")


def _called(node: ast.Call) -> str:
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return ""


def _delegating_readers(tree: ast.Module, readers: set[str]) -> set[str]:
    """Functions of a module that pass their first parameter on to a reader as its name."""
    found = set()
    for function in tree.body:
        if not isinstance(function, ast.FunctionDef) or not function.args.args:
            continue
        parameter = function.args.args[0].arg
        for node in ast.walk(function):
            if (
                isinstance(node, ast.Call)
                and _called(node) in readers
                and node.args
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id == parameter
            ):
                found.add(function.name)
    return found


def _expanded(name: ast.JoinedStr, keys: dict[str, list[str]]) -> list[str]:
    """An f-string name over the keys its loop variable takes; [] if it is not that shape."""
    variables = {
        part.value.id if isinstance(part.value, ast.Name) else part.value.func.value.id
        for part in name.values
        if isinstance(part, ast.FormattedValue)
        and (
            isinstance(part.value, ast.Name)
            or (
                isinstance(part.value, ast.Call)
                and isinstance(part.value.func, ast.Attribute)
                and isinstance(part.value.func.value, ast.Name)
            )
        )
    }
    if len(variables) != 1 or next(iter(variables)) not in keys:
        return []
    results = []
    for key in keys[next(iter(variables))]:
        text = ""
        for part in name.values:
            if isinstance(part, ast.Constant):
                text += part.value
            elif isinstance(part.value, ast.Name):
                text += key
            else:
                text += getattr(key, part.value.func.attr)()
        results.append(text)
    return results


def _comprehension_keys(tree: ast.AST) -> dict[ast.AST, dict[str, list[str]]]:
    """For each comprehension over `{literal dict}.items()`: its key variable's values."""
    scopes = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.DictComp | ast.ListComp | ast.SetComp | ast.GeneratorExp):
            continue
        for generator in node.generators:
            source = generator.iter
            if (
                isinstance(source, ast.Call)
                and isinstance(source.func, ast.Attribute)
                and source.func.attr == "items"
                and isinstance(source.func.value, ast.Dict)
                and isinstance(generator.target, ast.Tuple)
                and isinstance(generator.target.elts[0], ast.Name)
                and all(
                    isinstance(key, ast.Constant) and isinstance(key.value, str)
                    for key in source.func.value.keys
                )
            ):
                keys = [key.value for key in source.func.value.keys]
                for inner in ast.walk(node):
                    scopes[inner] = {generator.target.elts[0].id: keys}
    return scopes


def _environ_name(node: ast.AST) -> str | None:
    """The literal name of an `os.environ[...]`, `os.environ.get(...)`, `os.getenv(...)` or
    `"..." in os.environ`."""

    def is_environ(value: ast.AST) -> bool:
        return isinstance(value, ast.Attribute) and value.attr == "environ"

    literal = None
    if isinstance(node, ast.Subscript) and is_environ(node.value):
        literal = node.slice
    elif isinstance(node, ast.Call) and node.args:
        func = node.func
        if isinstance(func, ast.Attribute) and (
            (func.attr in ("get", "setdefault") and is_environ(func.value))
            or (func.attr == "getenv" and isinstance(func.value, ast.Name))
        ):
            literal = node.args[0]
    elif isinstance(node, ast.Compare) and any(is_environ(c) for c in node.comparators):
        literal = node.left
    if isinstance(literal, ast.Constant) and isinstance(literal.value, str):
        return literal.value
    return None


def variables_read(path: Path) -> list[str]:
    """Every environment variable a settings module reads, in the order it reads them."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    readers = ENV_READERS | _delegating_readers(tree, ENV_READERS)
    delegated = {f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name in readers}
    inside_delegates = {id(node) for f in delegated for node in ast.walk(f)}
    comprehension_keys = _comprehension_keys(tree)
    names: list[str] = []
    for node in ast.walk(tree):
        environ = _environ_name(node)
        if environ:
            names.append(environ)
            continue
        if not (isinstance(node, ast.Call) and _called(node) in readers and node.args):
            continue
        if id(node) in inside_delegates:
            continue  # the delegate's own call reads the name its caller gave
        first = node.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            names.append(first.value)
        elif isinstance(first, ast.JoinedStr):
            expanded = _expanded(first, comprehension_keys.get(node, {}))
            assert expanded, f"{path.name}:{node.lineno}: a variable name the test cannot read"
            names.extend(expanded)
    return list(dict.fromkeys(names))


def documented(header: str) -> set[str]:
    """The names in the first column of docs/settings.md's tables under `header`."""
    names, inside = set(), False
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.strip() == header:
            inside = True
        elif inside and line.startswith("|"):
            names.update(NAME.findall(line.split("|")[1]))
        else:
            inside = False
    return names


def module_constants() -> set[str]:
    """Every name a settings module assigns at its top level."""
    names = set()
    for path in settings_modules():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def test_every_environment_variable_the_settings_read_is_documented():
    read = {name for path in settings_modules() for name in variables_read(path)}
    missing = sorted(read - documented(VARIABLE_HEADER))
    assert not missing, f"read by config/settings/ but not in docs/settings.md: {missing}"


def test_docs_list_no_variable_the_settings_no_longer_read():
    read = {name for path in settings_modules() for name in variables_read(path)}
    stale = sorted(documented(VARIABLE_HEADER) - read)
    assert not stale, f"in docs/settings.md but read by no settings module: {stale}"


def test_the_named_constants_documented_still_exist():
    stale = sorted(documented(CONSTANT_HEADER) - module_constants())
    assert not stale, f"in docs/settings.md but defined by no settings module: {stale}"


def test_the_reader_finds_variables_of_every_kind():
    # The shapes the settings use: a helper's literal name, a name given to a local
    # function that passes it on, a name built over a dict's keys, and `in os.environ`.
    channels = variables_read(SETTINGS / "channels.py")
    assert {"NOTIFY_RATE_SMTP", "NOTIFY_RATE_POSTMARK", "SMPP_HOST"} <= set(channels)
    assert "WORKER_CONCURRENCY" in variables_read(SETTINGS / "flow.py")
    assert "CELERY_BROKER_URL" in variables_read(SETTINGS / "queues.py")
    assert "DATABASE_URL" in variables_read(SETTINGS / "database.py")
