"""Trusted final scoring: auto-best keeps the baseline unless strictly beaten; reward.json always written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from posttrainbench.core.errors import PtbError
from posttrainbench.service.api.service import create_app
from posttrainbench.service.api.summary import read_state
from posttrainbench.service.verifier.final_score import final_score, main, rank_candidates
from tests.optimize_fixtures import PARTIAL, PERFECT, WRONG, commit, make_task, open_dir, solver

# Selection on the viewable train split (first-n samples), so recorded means are predictable.
AUTO = {
    "mode": "auto_best",
    "selection_split": "train",
    "top_k": 2,
    "targets": [{"split": "test", "key": "reward"}, {"split": "dev", "key": "dev_mean"}],
}
LUCKY = solver(
    "a + b if a < 4 else -1"
)  # perfect on train-0..3, then wrong: 0.5 on the full train split


@pytest.fixture
def world(tmp_path):
    with open_dir() as parent:
        config = make_task(tmp_path, reward=AUTO)  # baseline = PARTIAL: 0.5 on every split
        repo = tmp_path / "agent"
        commit(repo, {"solve.py": PARTIAL}, "start")
        client = TestClient(create_app(parent / "state", config, agent_repo=repo))
        yield config, repo, client, parent / "state", tmp_path / "out"


def _evaluate(
    client, repo: Path, code: str, limit: int | None = None, extra: dict[str, str] | None = None
) -> str:
    sha = commit(repo, {"solve.py": code, **(extra or {})}, "candidate")
    body = client.post("/eval", json={"commit": sha, "split": "train", "limit": limit}).json()
    assert body["tier"] == "viewable", body
    return sha


def _finish(config, state: Path, out: Path):
    report = final_score(config, read_state(config, state), state, out)
    final = json.loads((out / "final.json").read_text())
    return report, json.loads((out / "reward.json").read_text()), final


def test_no_candidate_gives_the_baseline_reward(world):
    config, _, _, state, out = world
    report, reward, final = _finish(config, state, out)
    assert reward == {"reward": 0.5, "dev_mean": 0.5}
    assert final["chosen"] == "baseline" and "no candidate was evaluated" in final["reason"]
    assert report.considered == []


def test_tie_on_the_full_selection_split_keeps_the_baseline(world):
    config, repo, client, state, out = world
    _evaluate(client, repo, LUCKY, limit=4)  # recorded 1.0 on 4 samples, only 0.5 on all 8
    report, reward, final = _finish(config, state, out)
    assert [(c.recorded_mean, c.rescored_mean) for c in report.considered] == [(1.0, 0.5)]
    assert final["chosen"] == "baseline" and final["baseline_selection_mean"] == 0.5
    assert "strictly beat" in final["reason"] and reward == {"reward": 0.5, "dev_mean": 0.5}


def test_strictly_better_candidate_wins_among_top_k(world):
    config, repo, client, state, out = world
    _evaluate(client, repo, WRONG)
    lucky = _evaluate(client, repo, LUCKY, limit=4)
    perfect = _evaluate(client, repo, PERFECT)
    ranked = rank_candidates(read_state(config, state), "train")
    assert [c.sha for c, _ in ranked] == [perfect, lucky, ranked[2][0].sha]  # mean, then samples
    report, reward, final = _finish(config, state, out)
    assert [c.sha for c in report.considered] == [perfect, lucky]  # top_k = 2
    assert final["chosen"] == "candidate-3" and final["chosen_sha"] == perfect
    assert reward == {"reward": 1.0, "dev_mean": 1.0}


def test_tampered_scorer_in_candidate_has_no_effect_on_reward(world):
    config, repo, client, state, out = world
    evil = "SCORE = 1.0\ndef score(*args, **kwargs):\n    return 1.0\nprint('{\"reward\": 1.0}')\n"
    _evaluate(
        client,
        repo,
        WRONG,
        extra={"scorer.py": evil, "evaluate.py": evil, "reward.json": '{"reward": 1.0}'},
    )
    report, reward, final = _finish(config, state, out)
    assert report.considered[0].rescored_mean == 0.0
    assert final["chosen"] == "baseline" and reward == {"reward": 0.5, "dev_mean": 0.5}


def test_submit_mode_scores_the_submission_or_the_baseline(tmp_path):
    submit = {"mode": "submit", "targets": [{"split": "test", "key": "reward"}]}
    with open_dir() as parent:
        config = make_task(tmp_path, reward=submit)
        repo = tmp_path / "agent"
        commit(repo, {"solve.py": PERFECT})
        client = TestClient(create_app(parent / "state", config, agent_repo=repo))
        _, reward, final = _finish(config, parent / "state", tmp_path / "none")
        assert reward == {"reward": 0.5} and final["chosen"] == "baseline"
        client.post("/submit", json={"commit": "main"})
        _, reward, final = _finish(config, parent / "state", tmp_path / "sub")
        assert reward == {"reward": 1.0} and final["chosen"] == "candidate-1"


@pytest.mark.parametrize(
    "files, status, reason",
    [
        (
            {
                "solve.py": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
            },
            "timeout",
            "no answer within",
        ),  # a fork bomb
        (
            {"solve.py": PERFECT, "blob.bin": "0" * (3 << 20)},  # a huge file
            "limit",
            "the candidate's code is too large to unpack",
        ),
    ],
)
def test_a_submission_that_cannot_be_scored_gives_the_baseline_reward_and_says_why(
    tmp_path, files, status, reason
):
    submit = {"mode": "submit", "targets": [{"split": "test", "key": "reward"}]}
    with open_dir() as parent:
        config = make_task(
            tmp_path,
            reward=submit,
            timeouts={"per_sample_s": 1, "per_eval_s": 2},
            limits={"max_code_mb": 1, "max_processes": 32},
        )
        repo = tmp_path / "agent"
        commit(repo, files)
        client = TestClient(create_app(parent / "state", config, agent_repo=repo))
        client.post("/submit", json={"commit": "main"})
        _, reward, final = _finish(config, parent / "state", tmp_path / "out")
    assert (
        reward == {"reward": 0.5} and final["chosen"] == "baseline"
    )  # the baseline's score on test
    assert f"candidate-1 could not be scored on 'test' ({status}: {reason}" in final["reason"], (
        final["reason"]
    )
    assert final["reason"].endswith("the baseline is scored instead")


def test_reward_json_is_written_even_when_scoring_fails(world):
    config, _, _, state, out = world
    shutil.rmtree(config.baseline)  # the baseline cannot be exported any more
    with pytest.raises(PtbError, match="baseline could not be scored on 'test'"):
        final_score(config, read_state(config, state), state, out)
    assert json.loads((out / "reward.json").read_text()) == {"reward": 0.0, "dev_mean": 0.0}
    assert json.loads((out / "final.json").read_text())["error"]


def test_cli_reads_a_finalize_summary_or_a_missing_state(world, tmp_path, capsys):
    config, repo, client, state, out = world
    _evaluate(client, repo, PERFECT)
    summary = client.post(
        "/finalize", headers={"Authorization": f"Bearer {client.app.state.service.token}"}
    ).json()
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    import yaml

    cfg = tmp_path / "task.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                **config.model_dump(mode="json"),
                "baseline": str(config.baseline),
                "dataset": str(config.dataset),
            }
        )
    )
    assert (
        main(
            [
                "--config",
                str(cfg),
                "--state-dir",
                str(state),
                "--summary",
                str(tmp_path / "summary.json"),
                "--out-dir",
                str(out),
            ]
        )
        == 0
    )
    assert json.loads((out / "reward.json").read_text()) == {"reward": 1.0, "dev_mean": 1.0}
    assert (
        main(
            [
                "--config",
                str(cfg),
                "--state-dir",
                str(tmp_path / "never-started"),
                "--out-dir",
                str(tmp_path / "o2"),
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "o2" / "reward.json").read_text())["reward"] == 0.5
    assert (
        main(
            [
                "--config",
                str(tmp_path / "absent.yaml"),
                "--state-dir",
                str(state),
                "--out-dir",
                str(out),
            ]
        )
        == 2
    )
    assert "error:" in capsys.readouterr().err
