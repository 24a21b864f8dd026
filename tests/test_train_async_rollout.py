"""Asynchronous partial rollouts (rlbatch.train.async_rollout): the schedule, the recorded behaviour log-probs, the
importance ratio against them, staleness / partial metrics and exact resume (tiny random model)."""

import json
import math
import shutil

import pytest

torch = pytest.importorskip("torch")

from rlbatch.train.async_rollout import Schedule, decode_piece, run_round  # noqa: E402
from rlbatch.train.grpo import accumulate_gradients, token_logprobs  # noqa: E402
from rlbatch.train.rollout import Rollout, left_pad  # noqa: E402
from rlbatch.runstore import TIME_KEYS  # noqa: E402
from rlbatch.train.config import make_config  # noqa: E402
from rlbatch.train.trainer import train  # noqa: E402

from _train_helpers import Kill, coin_task, fresh, killing_task  # noqa: E402

torch.set_num_threads(1)
ASYNC_KEYS = ("time/overlap_s", "time/gen_busy_s")


def _lines(p):
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]


def _strip(rows):
    return [{k: v for k, v in r.items() if k not in TIME_KEYS + ASYNC_KEYS} for r in rows]


def test_schedule_hand_computed():
    # K = 1, max_new 8, T = 3 -> n = 3 pieces; batch b: first piece in round b - 4, last in round b - 2
    s = Schedule.of(make_config(async_rollouts=1, partial_rollout_tokens=3, max_new_tokens=8))
    assert (s.lag, s.chunks, s.chunk_tokens) == (1, 3, 3)
    assert s.first_round(10) == 6 and s.new_batch(6) == 10
    assert s.pieces(6) == [(10, 0), (9, 1), (8, 2)]  # round 6 (version 6) works on batches 10, 9, 8
    assert s.pieces(-2) == [(2, 0), (1, 1)]  # warm-up rounds on version 0
    assert [s.staleness(b) for b in (1, 2, 3, 4, 5, 6, 10)] == [0, 1, 2, 3, 3, 3, 3]  # (b-1) - max(0, b-4)
    s0 = Schedule.of(make_config(max_new_tokens=8))  # K = 0, no pieces: the synchronous schedule
    assert (s0.chunks, s0.staleness(1), s0.staleness(7)) == (1, 0, 0)
    s1 = Schedule.of(make_config(async_rollouts=1, max_new_tokens=8))
    assert [s1.staleness(b) for b in (1, 2, 9)] == [0, 1, 1]


def test_recorded_logprobs_are_the_behaviour_policy(tiny):
    model, tok = tiny
    prefixes = [tok("12+34=", add_special_tokens=False)["input_ids"], tok("5+", add_special_tokens=False)["input_ids"]]
    g = torch.Generator().manual_seed(3)
    new, lps, _ = decode_piece(model, prefixes, [4, 2], tok.eos_token_id, tok.pad_token_id, 0.7, g)
    assert [len(t) <= lim for t, lim in zip(new, [4, 2])] == [True, True] and len(new[0]) >= 1
    # the same tokens re-scored by the loss's function at the same temperature
    p_ids, p_mask = left_pad(prefixes, tok.pad_token_id)
    T = max(len(t) for t in new)
    r_ids = torch.full((2, T), tok.pad_token_id)
    r_mask = torch.zeros((2, T), dtype=torch.long)
    for i, t in enumerate(new):
        r_ids[i, :len(t)] = torch.tensor(t)
        r_mask[i, :len(t)] = 1
    with torch.no_grad():
        ref = token_logprobs(model, Rollout(p_ids, p_mask, r_ids, r_mask, ["", ""]), 0.7)
    for i, lp in enumerate(lps):
        assert ref[i, :len(lp)].tolist() == pytest.approx(lp, abs=1e-4)


def test_round_continues_pieces_under_newer_versions(tiny):
    model, tok = tiny
    s = Schedule(1, 2, 2, 4)  # K = 1, pieces of 2 tokens, max 4
    ids = tok("7+", add_special_tokens=False)["input_ids"]
    inflight, prompts = {}, {s.new_batch(r): [ids, ids] for r in (-2, -1, 0)}
    got = {}
    for r in (-2, -1, 0):
        got.update(run_round(model, s, r, max(0, r), inflight, prompts, -1, tok.pad_token_id, 1.0, 0))  # no EOS
    assert sorted(got) == [1, 2]  # batch 3 still has its second piece to do (round 1)
    assert all(len(x) == 4 for x in got[1]["resp"]) and got[1]["round"] == -1
    assert list(inflight) == [3] and all(len(x) == 2 for x in inflight[3]["resp"])
    fin = dict(run_round(model, s, 1, 1, inflight, {s.new_batch(1): [ids, ids]}, -1, tok.pad_token_id, 1.0, 0))
    assert fin[3]["ver"][0] == [0, 0, 1, 1]  # first piece on version 0, second on version 1


def test_importance_ratio_uses_behaviour_logprobs(tiny):
    model, tok = tiny
    ids = tok("3+4=", add_special_tokens=False)["input_ids"]
    p_ids, p_mask = left_pad([ids] * 4, tok.pad_token_id)
    g = torch.Generator().manual_seed(0)
    new, lps, _ = decode_piece(model, [ids] * 4, [3] * 4, -1, tok.pad_token_id, 1.0, g)
    ro = Rollout(p_ids, p_mask, torch.tensor(new), torch.ones((4, 3), dtype=torch.long), [""] * 4)
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0])
    behaviour = torch.tensor(lps)
    on = accumulate_gradients(model, ro, adv, 4, 0.2, old_logp=behaviour)
    assert on.stats["clipped"] == 0  # behaviour == current policy: ratio 1 up to float error
    # a behaviour policy that gave each token 0.5 nats less: ratio e^0.5 = 1.65 > 1.2 -> every positive-advantage
    # token is clipped (rows 0 and 2: 6 tokens), none of the negative ones (min picks the unclipped term)
    off = accumulate_gradients(model, ro, adv, 4, 0.2, old_logp=behaviour - 0.5)
    assert off.stats["clipped"] == 6
    assert off.loss == pytest.approx(-(6 * 1.2 - 6 * math.exp(0.5)) / 12, rel=1e-3)


def test_async_partial_run_logs_staleness_and_resumes_exactly(tiny, tmp_path):
    kw = dict(model="tiny-random", prompts_per_step=2, group_size=8, lr=3e-3, samples=10_000, max_steps=7,
              max_new_tokens=4, eval_every=40, checkpoint_every=3, async_rollouts=1, partial_rollout_tokens=2)
    full = train(make_config(**kw), tmp_path / "full", model_tok=fresh(tiny), task=coin_task())
    rows = _lines(full / "metrics.jsonl")
    assert [r["rollout/staleness_max"] for r in rows] == [0, 1, 2, 2, 2, 2, 2]  # K + n - 1 = 2 from step 3 on
    assert all(r["rollout/partial_frac"] > 0 for r in rows[2:]) and rows[0]["rollout/partial_frac"] == 0
    assert all(0 < r["rollout/staleness_token_mean"] < 2 for r in rows[2:])
    assert rows[0]["clip_frac"] == 0 and any(r["clip_frac"] > 0 for r in rows[1:])  # ratio != 1 once stale
    assert all(r["time/overlap_s"] >= 0 and r["time/gen_s"] >= 0 for r in rows)
    # killed during step 6 (after the checkpoint of step 3, whose generation state is saved with it)
    with pytest.raises(Kill):
        train(make_config(**kw), tmp_path / "killed", model_tok=fresh(tiny), task=killing_task(5 * 16 + 3))
    killed = tmp_path / "killed"
    assert len(_lines(killed / "metrics.jsonl")) == 5
    shutil.copytree(killed, tmp_path / "other")
    train(make_config(**kw), killed, resume=True, model_tok=fresh(tiny), task=coin_task())
    assert _strip(_lines(killed / "metrics.jsonl")) == _strip(rows)
    assert _strip(_lines(killed / "eval.jsonl")) == _strip(_lines(full / "eval.jsonl"))
    with pytest.raises(Exception, match="async"):  # resuming with other asynchronous settings is refused
        train(make_config(**{**kw, "partial_rollout_tokens": None}), tmp_path / "other", resume=True,
              model_tok=fresh(tiny), task=coin_task())


def test_one_step_off_policy_run(tiny, tmp_path):
    cfg = make_config(model="tiny-random", prompts_per_step=2, group_size=8, lr=3e-3, samples=10_000, max_steps=4,
                      max_new_tokens=4, eval_every=1000, async_rollouts=1)
    rows = _lines(train(cfg, tmp_path / "k1", model_tok=fresh(tiny), task=coin_task()) / "metrics.jsonl")
    assert [r["rollout/staleness_mean"] for r in rows] == [0, 1, 1, 1]
    assert [r["rollout/partial_frac"] for r in rows] == [0, 0, 0, 0]
    assert [r["rollout/policy_version_min"] for r in rows] == [0, 0, 1, 2]  # batch s decoded on version s - 2


def test_generator_prepares_rewards_and_layout_with_the_same_results(tiny, tmp_path, monkeypatch):
    """With a task that can be sent to the generation process, it scores each batch and lays out its update
    (retained rows, trim bounds, packing plans) while the trainer updates; the run is the same as when the trainer
    does that itself (a closure scorer, or preparation off), and the trainer then computes no packing plan."""
    import rlbatch.train.async_rollout as ar
    import rlbatch.train.grpo as grpo

    from _train_helpers import coin_task_picklable

    calls = []
    real = grpo.packing_plan

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(grpo, "packing_plan", counted)
    kw = dict(model="tiny-random", prompts_per_step=4, group_size=4, lr=3e-3, samples=10_000, max_steps=5,
              max_new_tokens=4, eval_every=1000, async_rollouts=1, micro_batch_size=4, threads=1)
    ahead = _lines(train(make_config(**kw), tmp_path / "ahead", model_tok=fresh(tiny),
                         task=coin_task_picklable()) / "metrics.jsonl")
    n_ahead = len(calls)
    prep_options = ar._prep_options
    assert prep_options(make_config(**kw), coin_task(), tiny[1], 4) is None  # a closure scorer: the trainer scores
    monkeypatch.setattr(ar, "_prep_options", lambda *a, **k: None)
    calls.clear()
    here = _lines(train(make_config(**kw), tmp_path / "here", model_tok=fresh(tiny),
                        task=coin_task_picklable()) / "metrics.jsonl")
    assert sum(r["batch/retained"] for r in here) > 0 and any(r.get("loss") for r in here)
    assert n_ahead == 0 and len(calls) > 0  # the trainer laid out nothing itself when the generator did
    assert _strip(ahead) == _strip(here)
