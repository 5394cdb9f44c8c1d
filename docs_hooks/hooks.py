"""MkDocs hooks of the docs site (``mkdocs.yml``: ``hooks``).

* A page per ``orchestrace`` command, generated from the command itself (its typer app): usage, help,
  arguments and options with their defaults, and the example of its ``--help``; a command added to the CLI
  gets its page and its place in the nav with no edit here.
* Pages in ``docs/`` that the nav of ``mkdocs.yml`` does not list (topics other engineers add) are appended
  under "More topics", so that none is left out of the nav.
* Links from a page to files of the repository outside ``docs/`` (``../bench/results/scaling.png``,
  ``../semconv/README.md``) are served from ``repo/<path>`` in the site, with the files they reach in turn, so
  ``--strict`` checks them like any other link and the site works away from the repository.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

import typer
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

ROOT = Path(__file__).resolve().parent.parent
CLI_DIR = "cli"
REPO_DIR = "repo"
MORE = "More topics"
_LINK = re.compile(r"(\]\()([^)\s#]+)(#[^)\s]*)?(\))")


def _commands() -> dict[str, TyperCommand]:
    from orchestrace_collector.cli import app

    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    return {name: command for name in sorted(group.commands)
            if isinstance(command := group.commands[name], TyperCommand)}


def _listed(nav: Any) -> set[str]:
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, list):
        return set().union(*(_listed(item) for item in nav)) if nav else set()
    if isinstance(nav, dict):
        return set().union(*(_listed(item) for item in nav.values())) if nav else set()
    return set()


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    nav = config.nav or []
    listed = _listed(nav)
    cli = [{"Overview": f"{CLI_DIR}/index.md"}, *({name: f"{CLI_DIR}/{name}.md"} for name in _commands())]
    nav = [item for item in nav if not (isinstance(item, dict) and "CLI" in item)] + [{"CLI": cli}]
    docs = Path(config.docs_dir)
    others = sorted(p.relative_to(docs).as_posix() for p in docs.rglob("*.md"))
    more = [page for page in others if page not in listed and not page.startswith(f"{CLI_DIR}/")]
    if more:
        nav.append({MORE: more})
    config.nav = nav
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for name, command in _commands().items():
        files.append(File.generated(config, f"{CLI_DIR}/{name}.md", content=command_page(name, command)))
    docs = Path(config.docs_dir).resolve()
    pending = [(p, p.read_text(encoding="utf-8")) for p in docs.rglob("*.md")]
    added: set[Path] = set()
    while pending:
        page, text = pending.pop()
        for target in _repo_targets(page, text, docs):
            if target in added:
                continue
            added.add(target)
            uri = f"{REPO_DIR}/{target.relative_to(ROOT).as_posix()}"
            files.append(File.generated(config, uri, abs_src_path=str(target)))
            if target.suffix == ".md":
                pending.append((target, target.read_text(encoding="utf-8")))
    return files


def _repo_targets(page: Path, text: str, docs: Path) -> list[Path]:
    """Files of the repository outside ``docs/`` that ``page`` links to (relative links only)."""
    found = []
    for match in _LINK.finditer(text):
        link = match.group(2)
        if "://" in link or link.startswith(("/", "mailto:")):
            continue
        target = (page.parent / link).resolve()
        inside_docs = target.is_relative_to(docs)
        if target.is_file() and target.is_relative_to(ROOT) and not inside_docs:
            found.append(target)
    return found


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Links out of ``docs/`` point at the ``repo/`` copy; links inside ``repo/`` copies stay as written."""
    if page.file.src_uri.startswith(f"{REPO_DIR}/"):
        return markdown
    docs = Path(config.docs_dir).resolve()
    source = docs / page.file.src_uri

    def rewrite(match: re.Match[str]) -> str:
        link = match.group(2)
        if "://" in link or link.startswith(("/", "mailto:")):
            return match.group(0)
        target = (source.parent / link).resolve()
        if not target.is_file() or target.is_relative_to(docs) or not target.is_relative_to(ROOT):
            return match.group(0)
        uri = f"{REPO_DIR}/{target.relative_to(ROOT).as_posix()}"
        relative = posixpath.relpath(uri, posixpath.dirname(page.file.src_uri) or ".")
        return f"{match.group(1)}{relative}{match.group(3) or ''}{match.group(4)}"

    return _LINK.sub(rewrite, markdown)


def command_page(name: str, command: TyperCommand) -> str:
    """The Markdown page of ``orchestrace <name>``."""
    help_text = _escaped((command.help or "").strip())
    lines = [f"# orchestrace {name}", "", help_text.split("\n\n")[0].replace("\n", " "), ""]
    rest = help_text.split("\n\n")[1:]
    lines += [paragraph.replace("\n", " ") + "\n" for paragraph in rest]
    usage = " ".join(["[OPTIONS]", *(f"{(p.name or '').upper()}{'...' if p.nargs == -1 else ''}"
                                     for p in command.params if isinstance(p, TyperArgument))])
    lines += ["```", f"orchestrace {name} {usage}", "```", ""]
    if command.epilog:
        example = command.epilog.removeprefix("Example: ")
        lines += ["Example:", "", "```sh", *example.split("  |  "), "```", ""]
    arguments = [p for p in command.params if isinstance(p, TyperArgument)]
    options = [p for p in command.params if isinstance(p, TyperOption) and p.name != "help"]
    if arguments:
        lines += ["## Arguments", "", "| argument | description |", "|---|---|"]
        for argument in arguments:
            described = _cell(getattr(argument, "help", "") or "")
            lines.append(f"| `{(argument.name or '').upper()}` | {described} |")
        lines.append("")
    if options:
        lines += ["## Options", "", "| option | default | description |", "|---|---|---|"]
        for option in options:
            names = ", ".join(f"`{opt}`" for opt in [*option.opts, *option.secondary_opts])
            default = "" if option.required else _default(option)
            required = "required. " if option.required else ""
            lines.append(f"| {names} | {default} | {required}{_cell(option.help or '')} |")
        lines.append("")
    return "\n".join(lines)


def _default(option: TyperOption) -> str:
    value = option.default
    if value is None or value == () or value == []:
        return ""
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"`{value}`"


def _cell(text: str) -> str:
    return _escaped(" ".join(text.split()).replace("|", "\\|"))


def _escaped(text: str) -> str:
    """Help text as Markdown text: ``[--port]`` is not a link (nor a cross-reference to resolve)."""
    return text.replace("[", "\\[").replace("]", "\\]")
