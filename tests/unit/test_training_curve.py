"""The run page's training curve: the loss an agent's own output shows (issue 38 item 10)."""

from __future__ import annotations

import json

from posttrainbench.host.results.report.charts import loss_chart
from posttrainbench.host.results.report.training_curve import MAX_POINTS, training_curve


def test_step_lines_of_a_plain_log_give_the_curve() -> None:
    log = "Loading weights: 100%\nstep 2 loss 0.4852 43s\nstep 4 loss 0.1737 104s\nsaved\n"
    curve = training_curve(log)
    assert curve is not None and curve.x_label == "step"
    assert curve.points == [(2.0, 0.4852), (4.0, 0.1737)]


def test_trainer_dicts_inside_a_json_trace_give_it_by_epoch() -> None:
    output = "{'loss': 1.25, 'grad_norm': 3.1, 'learning_rate': 2e-05, 'epoch': 0.5}\n" * 2
    output = output.replace("1.25", "0.9", 1)
    trace = json.dumps({"type": "tool_result", "output": output}) + "\n"
    curve = training_curve(trace)
    assert curve is not None and curve.x_label == "epoch"
    assert [y for _, y in curve.points] == [0.9, 1.25]


def test_no_curve_below_two_points_and_a_long_one_is_thinned() -> None:
    assert training_curve("step 1 loss 0.5\n") is None
    assert training_curve("nothing about training here\n") is None
    long = "".join(f"Step {i}/5000 | loss: {1 / i:.4f}\n" for i in range(1, 5001))
    curve = training_curve(long)
    assert curve is not None and len(curve.points) <= MAX_POINTS and curve.points[0] == (1.0, 1.0)


def test_the_chart_escapes_and_draws_each_point() -> None:
    svg = str(loss_chart("step", [(2.0, 0.48), (4.0, 0.17)]))
    assert svg.count('class="point"') == 2 and "training loss" in svg
