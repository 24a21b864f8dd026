"""What a person sees in a terminal or a log file: tables not cut at 80 columns when piped, the recommendation as
text (no literal Markdown), one-line command summaries in --help, and defaults that work (profile lengths fitted
to the model's context, per-task --max-new-tokens)."""

import io

import pytest
from rich.console import Console

from rlbatch.output import PIPE_WIDTH, console, markdown_text, rich_table


def render(table, width):
    buf = io.StringIO()
    Console(file=buf, width=width).print(table)
    return buf.getvalue()


def test_piped_console_is_wide_and_tables_never_truncate(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    con = console()  # pytest captures stdout: not a terminal
    assert con.width == PIPE_WIDTH == 200
    rows = [{"run": "B1024-G8-sqrt-seed-averaged", "rN": "1.97 (1.50–2.45)", "verdict": "within noise"}] * 2
    cols = [("run", "configuration", None), ("rN", "rN (95% CI)", None), ("verdict", "verdict", None)]
    wide = render(rich_table(rows, cols), 200)
    assert "B1024-G8-sqrt-seed-averaged" in wide and "1.97 (1.50–2.45)" in wide and "…" not in wide
    narrow = render(rich_table(rows, cols), 30)  # a narrow terminal: one block per row, never "…"
    assert "…" not in narrow and "B1024-" in narrow.replace(" ", "")
    # issue 38: at 80 columns the accounting's eight columns broke names and intervals mid-word ("B16-G8-sq / rt-s0",
    # "(1.00–1.0 / 0)"); too narrow for the table, each row is a block of "header: value" lines with whole values
    acc = [{"run": f"B{b}-G8-sqrt-s0", "B": str(b), "S": "1,037", "rN": "1.44 (0.67–2.98)", "X": "1.95 (1.78–2.16)",
            "T": "0.74 (0.34–1.64)", "v": "within noise"} for b in (16, 64, 256)]
    acols = [("run", "configuration", None), ("B", "B", None), ("S", "samples-to-target", None),
             ("rN", "rN (95%)", None), ("X", "rel. throughput (95%)", None), ("T", "rel. time (95%)", None),
             ("v", "verdict", None)]
    text = render(rich_table(acc, acols), 80)
    assert max(len(ln) for ln in text.splitlines()) <= 80
    for r in acc:
        for v in r.values():
            assert any(v in ln for ln in text.splitlines()), v  # every value whole on one line
    assert "B256-G8-sqrt-s0" in render(rich_table(acc, acols), 200).splitlines()[-2]  # wide enough: a table
    monkeypatch.setenv("COLUMNS", "123")
    assert console().width == 123


def test_markdown_text_is_plain_with_bold():
    t = markdown_text("**B=64 and B=128 are within noise** (rN [1.02, 1.26], `eval/score`).")
    assert t.plain == "B=64 and B=128 are within noise (rN [1.02, 1.26], eval/score)."
    assert [(s.start, s.end, str(s.style)) for s in t.spans] == [(0, 31, "bold")]


def test_command_help_is_flowing_text():
    from typer.main import get_command

    from rlbatch.cli import app

    group = get_command(app)
    for name, cmd in group.commands.items():
        assert "\n" not in (cmd.help or ""), name  # no source line breaks mid-sentence
        assert cmd.short_help and cmd.short_help.endswith((".", ")")), (name, cmd.short_help)
    assert group.commands["train"].short_help.startswith("Train with GRPO")


@pytest.mark.parametrize("given, ctx, want", [
    ((None, None, 32), None, (15, 16)),      # the tiny preset's 32 positions
    ((None, None, 2048), None, (64, 64)),    # room for the defaults
    ((None, None, None), None, (64, 64)),    # unknown context
    ((10, None, 32), None, (10, 21)),
    ((None, 20, 32), None, (11, 20)),
    ((40, 40, 32), None, (40, 40)),          # given explicitly: kept (run_profile then says it does not fit)
])
def test_profile_lengths_fit_the_context(given, ctx, want):
    from rlbatch.profile import fit_lengths

    assert fit_lengths(*given) == want


def test_profile_tiny_with_defaults_runs(tmp_path):
    from rlbatch.profile import run_profile

    p = run_profile("tiny-random", [1, 2], device="cpu", bandwidth_gbs=10.0, peak_tflops=0.1, update=False)
    assert (p["prompt_tokens"], p["new_tokens"]) == (15, 16) and len(p["batches"]) == 2


def test_max_new_tokens_default_per_task():
    from rlbatch.train.tasks import default_max_new_tokens, score_description

    assert default_max_new_tokens("arithmetic") == 5  # 3-digit reversed sum + EOS
    assert default_max_new_tokens("chain_sum") == 256
    assert default_max_new_tokens("gsm8k") == default_max_new_tokens("data/train.parquet") == 512
    assert "two-digit additions" in score_description("arithmetic")
    assert "GSM8K" in score_description("gsm8k")


def test_a_long_stage_is_never_silent():
    # researcher tryout, finding 10: analyze printed one line at 2 s, then nothing for 21 s; plan nothing for 14 s.
    # A stage under way is said again every ``every`` seconds ("still ..."); a quick command prints nothing.
    import io
    import time

    from rlbatch.output import Stages

    quick = io.StringIO()
    with Stages("plan", delay=30.0, stream=quick) as st:
        st("predicting")
    assert quick.getvalue() == ""
    out = io.StringIO()
    with Stages("analyze", delay=0.01, every=0.02, stream=out) as st:
        st("computing the accounting")
        deadline = time.monotonic() + 60
        while out.getvalue().count("\n") < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        st("writing the report")
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("analyze: computing the accounting (")
    assert lines[1].startswith("analyze: still computing the accounting (")
    assert any(x.startswith("analyze: writing the report (") for x in lines[2:])
    n = len(lines)
    time.sleep(0.1)
    assert len(out.getvalue().splitlines()) == n  # nothing after the command's end
