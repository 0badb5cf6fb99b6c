"""Agent-task config: the shipped example loads, and every bad config is one clear error line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from posttrainbench.core.errors import PtbError
from posttrainbench.service.api.scoring import load_config
from posttrainbench.service.shared.config import Tier
from posttrainbench.service.shared.dataset import check_dataset, load_split
from posttrainbench.service.shared.errors import AgentTaskConfigError
from tests.helpers import REPO
from tests.optimize_fixtures import config_dict, make_task

EXAMPLE = REPO / "examples" / "agent-task-gsm8k" / "task.yaml"


def test_example_config_loads_with_real_dataset():
    config = load_config(EXAMPLE)
    assert (
        config.baseline == EXAMPLE.parent / "baseline" and (config.baseline / "solve.py").is_file()
    )
    assert config.tier("train") == Tier.VIEWABLE and config.tier("dev") == Tier.AGGREGATE
    assert config.tier("test") == Tier.HIDDEN  # unlisted
    assert config.secrets == [] and config.scoring.argv() == ["python3", "solve.py"]
    assert check_dataset(config) == {"train": 10, "dev": 10, "test": 10}
    assert load_split(config.dataset, "test")[0].answer == "18"


def test_optimize_package_never_reads_shared_data():
    source = REPO / "src" / "posttrainbench" / "service"
    for path in source.glob("*.py"):
        assert "shared" not in path.read_text(), path


def test_unlisted_split_is_hidden(tmp_path):
    config = make_task(tmp_path)
    assert config.tier("extra") == Tier.HIDDEN and config.tier("nope") == Tier.HIDDEN
    assert config.evaluable_splits() == ["train", "dev"]


def _write(tmp_path: Path, data: object) -> Path:
    make_task(tmp_path)  # the dataset and baseline the config points at
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _bad(tmp_path: Path, data: object) -> str:
    with pytest.raises(AgentTaskConfigError) as info:
        load_config(_write(tmp_path, data))
    message = str(info.value)
    assert "\n" not in message and isinstance(info.value, PtbError)
    return message


def test_valid_config_file_loads(tmp_path):
    config = load_config(_write(tmp_path, config_dict()))
    assert config.dataset == tmp_path / "data" and config.reward.selection_split == "dev"


@pytest.mark.parametrize(
    "change, expected",
    [
        (
            {"splits": {"train": {"tier": "viewable"}}},
            "splits.train: a viewable split needs max_runs and/or max_samples",
        ),
        (
            {"secrets": {"OPENAI_API_KEY": "sk-123"}},
            "secrets: secrets lists variable names only, never values",
        ),
        ({"secrets": ["not a name"]}, "is not an environment variable name"),
        (
            {
                "reward": {
                    "mode": "auto_best",
                    "selection_split": "test",
                    "targets": [{"split": "test", "key": "r"}],
                }
            },
            "selection split 'test' must be viewable or aggregate",
        ),
        (
            {"reward": {"mode": "auto_best", "targets": [{"split": "test", "key": "r"}]}},
            "auto_best needs a selection_split",
        ),
        (
            {"reward": {"mode": "best", "targets": [{"split": "test", "key": "r"}]}},
            "reward.mode: Input should be",
        ),
        ({"bogus": 1}, "bogus: Extra inputs are not permitted"),
        ({"scoring": {"mode": "A", "entry_command": "  "}}, "entry_command is empty"),
        (
            {
                "scoring": {
                    "mode": "A",
                    "entry_command": "python3 x.py",
                    "pass_env": ["PTB_TEST_SECRET"],
                }
            },
            "would give secrets to the candidate",
        ),
        (
            {"splits": {"dev": {"tier": "aggregate", "max_runs": 3, "min_samples": 50}}},
            "min_samples 50 exceeds its 8 samples",
        ),
        (
            {"splits": {**config_dict()["splits"], "missing": {"tier": "viewable", "max_runs": 1}}},
            "cannot read split 'missing'",
        ),
        ({"baseline": "nowhere"}, "is not a directory"),
    ],
)
def test_bad_config_is_one_clear_line(tmp_path, change, expected):
    assert expected in _bad(tmp_path, config_dict(**change))


def test_bad_yaml_and_non_mapping(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(AgentTaskConfigError, match="not valid YAML"):
        load_config(path)
    assert "expected a mapping" in _bad(tmp_path, ["a", "list"])
    with pytest.raises(AgentTaskConfigError, match="cannot read"):
        load_config(tmp_path / "absent.yaml")


def test_bad_dataset_lines(tmp_path):
    make_task(tmp_path)
    (tmp_path / "data" / "train.jsonl").write_text(
        '{"id": "a", "question": "q", "answer": "1"}\n{"id": "a", "question": "q", "answer": 2}\n'
    )
    with pytest.raises(AgentTaskConfigError, match=r"train.jsonl:2: duplicate id 'a'"):
        load_split(tmp_path / "data", "train")
    (tmp_path / "data" / "train.jsonl").write_text('{"id": "a", "question": "q"}\nnot json\n')
    with pytest.raises(AgentTaskConfigError, match=r"train.jsonl:1: needs string fields"):
        load_split(tmp_path / "data", "train")


def test_example_baseline_scores_real_but_low(tmp_path):
    """The shipped baseline really runs under the trusted scorer: 1 of 10 hidden test problems right."""
    from posttrainbench.service.api.summary import StatePaths, read_state
    from posttrainbench.service.verifier.final_score import final_score

    config = load_config(EXAMPLE)
    state = tmp_path / "never-started"
    report = final_score(
        config, read_state(config, state), StatePaths(state).repo, tmp_path / "out"
    )
    assert report.chosen == "baseline" and report.rewards == {"reward": 0.1}
    assert report.targets[0].status == "ok" and report.targets[0].n == 10
