"""The README and docs/: the README stays a five-minute read, every command page's option table is what the CLI's
``--help`` says (docs/gen_cli.py), and every relative link resolves."""

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]


def _gen_cli():
    spec = importlib.util.spec_from_file_location("gen_cli", DOCS / "gen_cli.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces -> ``-``."""
    h = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return h.replace(" ", "-")


def _links(text: str) -> list[str]:
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks and inline code hold no links
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_readme_is_under_12_kb():
    size = len(README.read_bytes())
    assert size < 12 * 1024, f"README.md is {size} bytes; move detail to docs/"


def test_every_command_has_a_page_whose_option_table_is_the_clis():
    gen = _gen_cli()
    cmds = gen.commands()
    assert {"lr", "account", "train", "sweep", "demo", "analyze", "plan", "inspect", "watch", "launch",
            "profile"} <= set(cmds)
    for cmd in cmds:
        page = DOCS / "commands" / f"{cmd}.md"
        assert page.is_file(), f"no page for rlbatch {cmd}: run .venv/bin/python docs/gen_cli.py"
        text = page.read_text(encoding="utf-8")
        assert gen.render(text, gen.option_table(cmd)) == text, \
            f"{page.name}: option table differs from `rlbatch {cmd} --help`; run .venv/bin/python docs/gen_cli.py"


def test_option_table_lists_every_visible_option_and_no_other():
    gen = _gen_cli()
    table = gen.option_table("lr")
    rows = [r for r in table.splitlines()[2:]]
    # rlbatch lr: --base-batch, --base-lr, --batches, --rule, --format (src/rlbatch/cli.py), --help left out
    assert [r.split("`")[1].split()[0] for r in rows] == ["--base-batch", "--base-lr", "--batches", "--rule",
                                                         "--format"]
    assert "[required]" in rows[0] and "[default: sqrt]" in rows[3]
    page = "# x\n\nhand-written\n\n" + gen.BEGIN + "\nold\n" + gen.END + "\n\nmore hand-written\n"
    out = gen.render(page, table)
    assert out.startswith("# x\n\nhand-written\n\n") and out.endswith("\n\nmore hand-written\n") and "old" not in out
    with pytest.raises(ValueError):
        gen.render("# no markers\n", table)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_resolve(page):
    bad = []
    for link in _links(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", link):  # http(s), mailto: not checked (no network)
            continue
        target, _, frag = link.partition("#")
        dest = (page.parent / target).resolve() if target else page
        if not dest.exists():
            bad.append(link)
            continue
        if frag and dest.suffix == ".md":
            heads = [_slug(h) for h in re.findall(r"^#+ (.*)$", dest.read_text(encoding="utf-8"), flags=re.M)]
            if frag not in heads:
                bad.append(link)
    assert not bad, f"{page.relative_to(ROOT)}: links that point nowhere: {bad}"


def _command_lines(text: str) -> list[str]:
    """Every ``rlbatch COMMAND ...`` line of the fenced code blocks in ``text`` (backslash continuations joined,
    comments cut)."""
    out = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip()
            if line.startswith("rlbatch "):
                out.append(line)
    return out


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_examples_use_options_the_cli_has(page):
    import typer

    from rlbatch.cli import app

    cmds = typer.main.get_command(app).commands
    bad = []
    for line in _command_lines(page.read_text(encoding="utf-8")):
        words = line.split()
        if words[1:] in (["--version"], ["-h"], ["--help"]):  # the program's own options
            continue
        cmd = cmds.get(words[1])
        if cmd is None:
            bad.append(f"{line[:60]}: no command {words[1]!r}")
            continue
        known = {o for p in cmd.params for o in (*p.opts, *getattr(p, "secondary_opts", ()))} | {"--help"}
        for w in words[2:]:
            flag = w.split("=", 1)[0]
            if flag.startswith("-") and not re.fullmatch(r"-?\d[\d.e-]*", flag) and flag not in known:
                bad.append(f"rlbatch {words[1]} {flag}")
    assert not bad, f"{page.relative_to(ROOT)}: examples with options the CLI does not have: {bad}"
