"""Tasks: fixed seeded splits and scorers (arithmetic, reasoning-gym, verl-schema parquet/jsonl with math-verify)."""

import json

import numpy as np
import pytest

from rlbatch.errors import UserError
from rlbatch.train.tasks import Item, extract_answer, get_task, math_verify_score


def test_arithmetic_split_and_scorer():
    t = get_task("arithmetic", seed=0)
    assert len(t.eval_items) == 512 and t.train_size == 90 * 90 - 512
    assert not {it.prompt for it in t.eval_items} & {it.prompt for it in t.train}
    assert [it.prompt for it in get_task("arithmetic", seed=0).eval_items[:5]] == [it.prompt for it in t.eval_items[:5]]
    it = Item(prompt="47+85=", answer="231")  # 132 reversed
    assert t.score(it, "231") == 1.0 and t.score(it, "132") == 0.0
    a = t.sample(np.random.default_rng(3), 4)
    b = t.sample(np.random.default_rng(3), 4)
    assert [x.prompt for x in a] == [x.prompt for x in b]


def test_reasoning_gym_chain_sum_scorer():
    t = get_task("chain_sum", seed=0, eval_size=8)
    e = t.eval_items[0]
    assert t.score(e, f"The answer is {e.answer}.") == 1.0
    assert t.score(e, "no idea") == 0.0
    with pytest.raises(UserError, match="unknown task"):
        get_task("no_such_generator")


def test_verl_jsonl_and_math_verify(tmp_path):
    rows = [{"prompt": [{"role": "user", "content": f"What is {i}+{i}?"}],
             "reward_model": {"ground_truth": str(2 * i), "style": "rule"}} for i in range(20)]
    p = tmp_path / "data.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    t = get_task(str(p), eval_size=5)
    assert len(t.eval_items) == 5 and t.train_size == 15
    it = Item(prompt="", answer="18")
    assert math_verify_score(it, "so 9 + 9 = 18.\n#### 18") == 1.0
    assert math_verify_score(it, "the result is \\boxed{18}") == 1.0
    assert math_verify_score(it, "#### 17") == 0.0
    assert extract_answer("<answer> 42 </answer>") == "42"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "x"}\n')
    with pytest.raises(UserError, match="ground_truth"):
        get_task(str(bad))


def test_gsm8k_parquet(data_dir, monkeypatch):
    # tests/data/gsm8k: the first 200 train and 32 test rows of verl's GSM8K parquet (SOURCE.md)
    monkeypatch.setenv("RLBATCH_GSM8K", str(data_dir / "gsm8k"))
    t = get_task("gsm8k", eval_size=16)
    assert len(t.eval_items) == 16 and t.train_size == 200
    assert t.eval_items[0].answer == "18" and t.eval_items[0].prompt[0]["role"] == "user"
    assert t.score(t.eval_items[0], "She makes 9 * 2 = $18.\n#### 18") == 1.0
