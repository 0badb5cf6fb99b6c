"""`ptb report`: the static HTML report rendered from a real-shaped results store."""

from __future__ import annotations

import os
import re
from html.parser import HTMLParser

import pytest

from posttrainbench.host.cli.results_cmd import build_leaderboard
from posttrainbench.host.results.export import export
from posttrainbench.host.results.record import ResultRecord
from posttrainbench.host.results.report import charts
from posttrainbench.host.results.report.render import ReportOutputError, render_report, write_report
from posttrainbench.host.results.store import ResultsStore
from tests.helpers import run_ptb
from tests.report_fixtures import EVIL_AGENT, IDS, Built, build_results
from tests.results_fixtures import TrialSpec, sql, unpack_to_run_dir, write_job


class Dom(HTMLParser):
    """Every start tag with its attributes, in order, and the text under chosen ids."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data):
        self.text.append(data)

    def with_class(self, cls: str) -> list[dict[str, str]]:
        return [a for _, a in self.tags if cls in a.get("class", "").split()]

    def ids(self) -> list[str]:
        return [a["id"] for _, a in self.tags if "id" in a]


def section(html: str, element_id: str) -> str:
    """The HTML of the element with *element_id* (sections and run pages do not nest)."""
    start = html.index(f'id="{element_id}"')
    tag = html.rfind("<", 0, start)
    name = re.match(r"<(\w+)", html[tag:]).group(1)
    return html[tag : html.index(f"</{name}>", start)]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    return build_results(tmp_path_factory.mktemp("report"))


@pytest.fixture(scope="module")
def html(built) -> str:
    return render_report(
        built.board, built.records, built.results_dir, max_events=50, max_chars=300
    )


def test_leaderboard_lists_agents_in_rank_order(built, html):
    board_html = section(html, "leaderboard")
    names = [a["data-agent"] for a in Dom(board_html).with_class("agent")]
    assert names == ["claude-code:anthropic/claude-opus-4-1", EVIL_AGENT, "codex:openai/gpt-5"]
    assert [a.agent for a in built.board.agents][0] == "claude-code:anthropic/claude-opus-4-1"
    ranks = re.findall(r'<td class="num rank">(\d+)</td>', board_html)
    assert ranks == ["1", "2", "3"]
    top = built.board.agents[0]
    assert f'<td class="num strong">{top.weighted_average:.3f}</td>' in board_html


def test_leaderboard_shows_cost_tokens_and_time(built, html):
    board_html = section(html, "leaderboard")
    top = built.board.agents[0]
    assert f"${top.cost_usd:,.2f}" in board_html
    assert f"{top.gpu_hours:.1f}" in board_html and f"{top.time_fraction:.0%}" in board_html
    for header in (
        "weighted avg",
        "normalized",
        "baseline cells",
        "flagged",
        "errored",
        "GPU\u2011h",
        "time used",
    ):
        assert header in board_html


def test_the_wide_tables_fit_a_laptop_screen(html):
    """At most 10 columns in the leaderboard (with 2 benchmarks) and 9 in the runs table:
    secondary figures sit on a second line of the same cell."""
    board_head = section(html, "leaderboard").split("</thead>")[0]
    runs_head = section(html, "runs").split("</thead>")[0]
    columns = re.compile(r"<th[\s>]")
    assert len(columns.findall(board_head)) <= 10 and len(columns.findall(runs_head)) <= 9


def test_fallback_cells_are_marked_with_their_reason(html):
    cells = section(html, "cells")
    dom = Dom(cells)
    reasons = sorted(
        c["class"].split("fallback-")[1].split()[0] for c in dom.with_class("fallback")
    )
    # codex: gsm8k flagged, humaneval errored; evil agent: gsm8k missing; smollm3-3b column absent.
    assert reasons == ["errored", "flagged", "missing"]
    assert (
        "baseline · flagged" in cells
        and "baseline · errored" in cells
        and "baseline · missing" in cells
    )
    flagged_td = next(c for c in dom.with_class("fallback-flagged"))
    assert "every run was flagged by a judge" in flagged_td["title"]


def test_cell_with_several_runs_shows_mean_and_stderr(built, html):
    cell = built.board.cell("claude-code:anthropic/claude-opus-4-1", "gsm8k", "qwen3-1.7b")
    assert cell.n_runs == 2 and cell.stderr
    assert f'{cell.score:.3f}</span><span class="pm"> ± {cell.stderr:.3f}' in section(html, "cells")


def test_reference_scores_are_listed(built, html):
    refs = section(html, "references")
    assert built.board.baselines
    for b in built.board.baselines:
        assert f"{b.score:.3f}" in refs
    assert "instruct" in refs and "base model" in refs


def test_each_run_has_a_linked_page_with_metadata(built, html):
    dom = Dom(html)
    ids = dom.ids()
    runs_html = section(html, "runs")
    for row in built.board.runs:
        assert ids.count(f"run-{row.id}") == 1
        assert f'href="#run-{row.id}"' in runs_html
    # Leaderboard cells link to the run behind them, also fallback cells (the flagged run).
    cells = section(html, "cells")
    assert f'href="#run-{IDS["flagged"]}"' in cells and f'href="#run-{IDS["strong1"]}"' in cells
    page = section(html, f"run-{IDS['strong2']}")
    assert (
        "attempt 2" in page
        and "selected" in page
        and "$9.00" in page
        and "4.0 h of 10.0 h (40%)" in page
    )
    assert 'href="#runs"' in page  # the way back


def test_run_page_shows_verdicts_with_evidence(html):
    page = section(html, f"run-{IDS['flagged']}")
    assert page.count('class="verdict ') == 5
    assert "contamination: planted finding" in page and "contamination_check" in page
    assert "verdict-flagged" in page and "decided by detector" in page
    assert page.index("contamination") < page.index("anomaly")  # the flagging judge comes first


def test_errored_run_page_shows_the_error(html):
    page = section(html, f"run-{IDS['errored']}")
    assert "AgentTimeoutError" in page and "agent error" in page
    assert "No judge has looked at this run." in page


def test_trace_is_readable_and_capped(html):
    page = section(html, f"run-{IDS['strong1']}")
    assert "$ python train.py --epochs 2" in page and "epoch 2 loss 0.41 &lt;done&gt;" in page
    long_page = section(html, f"run-{IDS['long']}")
    assert "showing the first 50 of" in long_page
    assert long_page.count('<li class="event') == 50
    assert "characters cut" in long_page and "x" * 301 not in long_page


def test_markup_in_traces_and_names_is_escaped(html):
    assert "<script" not in html.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section(html, f"run-{IDS['evil']}")
    assert not any(tag == "img" for tag, _ in Dom(html).tags)


def test_report_is_self_contained(html):
    dom = Dom(html)
    refs = [
        (tag, k, v)
        for tag, a in dom.tags
        for k, v in a.items()
        if k in ("src", "href", "xlink:href", "action")
    ]
    assert refs, "the report should contain links"
    assert all(v.startswith("#") for _, _, v in refs), [r for r in refs if not r[2].startswith("#")]
    assert not any(tag in ("link", "script", "iframe", "img") for tag, _ in dom.tags)
    style = html[html.index("<style>") : html.index("</style>")]
    assert "url(" not in style and "@import" not in style


def test_charts_one_per_benchmark_plus_two_scatters(built, html):
    assert html.count("<svg") == len(built.board.benchmarks) + 2
    charts_html = section(html, "charts")
    assert charts_html.count('class="bar fallback"') == 3  # the three baseline cells
    scatter = section(html, "cost-time")
    # Five scored runs (the flagged one among them) against time; four against cost.
    assert scatter.count('class="point"') == 5 + 4
    assert "agent time (hours)" in scatter and "LLM cost (USD)" in scatter
    assert "1 scored run(s) not shown" in scatter  # the evil agent's run has no cost


def test_a_store_of_the_previous_layout_still_shows_its_traces(built, tmp_path):
    """Stores exported before traces moved into the run directory name `trace/00-<name>` in
    their records: the report reads whatever path the record names."""
    import shutil

    copy = tmp_path / "results"
    shutil.copytree(built.results_dir, copy)
    run_dir = unpack_to_run_dir(copy, IDS["strong1"])
    record = ResultRecord.model_validate_json((run_dir / "record.json").read_bytes())
    (run_dir / "trace").mkdir()
    old_names = []
    for relative in record.trace_files:
        old = f"trace/{relative.removeprefix('trace-')}"
        os.replace(run_dir / relative, run_dir / old)
        old_names.append(old)
    record.trace_files = old_names
    record.write(run_dir)
    sql(copy, "UPDATE runs SET record = ? WHERE run_id = ?", record.model_dump_json(), record.id)
    board, records = build_leaderboard(copy, "mean", None, None)
    page = section(render_report(board, records, copy), f"run-{IDS['strong1']}")
    assert "cannot read trace" not in page and old_names[0] in page


@pytest.mark.parametrize("layout", ["rows", "run dir"])
def test_missing_trace_file_does_not_stop_the_report(built, tmp_path, layout):
    import shutil

    copy = tmp_path / "results"
    shutil.copytree(built.results_dir, copy)
    if layout == "run dir":
        run_dir = unpack_to_run_dir(copy, IDS["strong1"])
        for relative in ResultRecord.model_validate_json(
            (run_dir / "record.json").read_bytes()
        ).trace_files:
            (run_dir / relative).unlink()
    else:
        record = ResultsStore(copy).record(IDS["strong1"])
        assert record is not None
        for relative in record.trace_files:
            sql(copy, "DELETE FROM files WHERE run_id = ? AND name = ?", record.id, relative)
    board, records = build_leaderboard(copy, "mean", None, None)
    page = section(render_report(board, records, copy), f"run-{IDS['strong1']}")
    assert "cannot read trace" in page


def test_write_report_is_atomic(tmp_path, monkeypatch):
    out = tmp_path / "report.html"
    out.write_text("old report")

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(ReportOutputError, match="No space left"):
        write_report("<html>new</html>", out)
    assert out.read_text() == "old report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]  # no temp file left
    monkeypatch.undo()
    write_report("<html>new</html>", out)
    assert out.read_text() == "<html>new</html>"


def test_nice_ticks_cover_the_range():
    assert charts.nice_ticks(1.0) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert charts.nice_ticks(0.07)[-1] >= 0.07 and len(charts.nice_ticks(0.07)) <= 7
    assert charts.nice_ticks(0) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert charts.nice_ticks(37)[-1] == 40


def test_bar_chart_marks_fallback_and_escapes_labels():
    colors = charts.series_colors(["<a>", "b"])
    svg = charts.grouped_bar_chart(
        "t<1>",
        ["m"],
        ["<a>", "b"],
        [
            charts.Bar("m", "<a>", 0.5, err=0.1, href="#run-1"),
            charts.Bar("m", "b", 0.2, fallback="missing"),
        ],
        [charts.RefLine("m", "base", 0.2)],
        colors,
    )
    assert (
        "<a>" not in svg.replace('<a href="#run-1">', "")
        and "&lt;a&gt;" in svg
        and "t&lt;1&gt;" in svg
    )
    assert svg.count('class="bar"') == 1 and svg.count('class="bar fallback"') == 1
    assert "baseline stands in" in svg and "base model (baseline)" in svg


def test_scatter_draws_flagged_points_as_rings():
    colors = charts.series_colors(["a"])
    svg = charts.scatter_plot(
        "s",
        [charts.Point(1, 0.5, "a"), charts.Point(2, 0.7, "a", flagged=True)],
        ["a"],
        colors,
        "hours",
    )
    assert svg.count('class="point"') == 2 and 'fill="#fff"' in svg and "flagged by a judge" in svg


def test_cli_writes_the_report(built, tmp_path):
    out = tmp_path / "report.html"
    proc = run_ptb("report", str(built.results_dir), "-o", str(out), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"report written to {out}" in proc.stdout.replace("\n", "")
    assert out.read_text().count('class="run-page"') == len(built.records)


def test_cli_user_errors_exit_2_and_keep_the_old_report(tmp_path):
    out = tmp_path / "report.html"
    out.write_text("previous report")
    proc = run_ptb("report", str(tmp_path / "not-a-store"), "-o", str(out), timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error:") and "not a results store" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert out.read_text() == "previous report"
    proc = run_ptb("report", str(tmp_path), "-o", str(tmp_path), timeout=120)
    assert proc.returncode == 2 and "is a directory" in proc.stderr


def test_agent_names_split_from_labels_with_mixed_budgets(tmp_path):
    from posttrainbench.host.results.report.render import agent_parts
    from tests.results_fixtures import TrialSpec, write_job

    write_job(
        tmp_path / "jobs", "j", [TrialSpec(hours=1.0, agent_hours=0.5), TrialSpec(hours=10.0)]
    )
    export([tmp_path / "jobs"], tmp_path / "res")
    board, records = build_leaderboard(tmp_path / "res", "mean", None, None)
    assert agent_parts(board, records) == {
        "claude-code:anthropic/claude-opus-4-1@1h": ("claude-code", "anthropic/claude-opus-4-1@1h"),
        "claude-code:anthropic/claude-opus-4-1@10h": (
            "claude-code",
            "anthropic/claude-opus-4-1@10h",
        ),
    }


def test_run_page_answers_the_researchers_questions(html):
    """The base model on the same questions, and no fake '± 0.000' for a run without a score."""
    page = section(html, f"run-{IDS['strong2']}")
    assert "base model, same questions" in page and "0.200" in page and "+0.500" in page
    errored = section(html, f"run-{IDS['errored']}")
    assert "± " not in errored.split("<h2>Judges</h2>")[0]


def test_an_errored_agent_never_ranks_above_a_scored_one_on_a_tie(tmp_path):
    """Equal averages: the agent whose cells are its own scores ranks first."""
    from posttrainbench.host.results.collect import collect

    write_job(
        tmp_path / "jobs",
        "job",
        [
            TrialSpec(agent="aaa-errored", error="AgentTimeoutError", score=None),
            # Exactly the baseline: PostTrainBench's zero-shot GSM8K score of Qwen3-1.7B-Base.
            TrialSpec(agent="zzz-scored", score=0.12661106899166036),
        ],
    )
    export([tmp_path / "jobs"], tmp_path / "res")
    records, _ = ResultsStore.open(tmp_path / "res", create=False).load()
    board = collect(records, results_dir=tmp_path, policy="mean", weights={})
    assert [a.weighted_average for a in board.agents] == [0.12661106899166036] * 2
    assert [a.agent.split(":")[0] for a in board.agents] == ["zzz-scored", "aaa-errored"]


def test_an_agent_without_a_trace_shows_its_plain_log(tmp_path):
    """oracle, nop or a custom agent: the head of its plain log stands in for a trace."""
    job = write_job(tmp_path / "jobs", "job", [TrialSpec(agent="oracle", trace=False)])
    (trial,) = [p for p in job.iterdir() if p.is_dir()]
    log = (
        "step 1: training <b>20 steps</b>\n" * 3 + "step 10 loss 0.50 30s\nstep 20 loss 0.25 60s\n"
    )
    (trial / "agent" / "oracle.txt").write_text(log)
    export([tmp_path / "jobs"], tmp_path / "res")
    board, records = build_leaderboard(tmp_path / "res", "mean", None, None)
    (record,) = records
    assert record.trace_files == [] and record.agent_log == "agent-log.txt"
    page = section(render_report(board, records, tmp_path / "res"), f"run-{record.id}")
    assert "the agent's plain log" in page and "&lt;b&gt;20 steps&lt;/b&gt;" in page
    # The loss its log shows, drawn (issue 38 item 10).
    assert "Training curve" in page and page.count('class="point"') == 2


def test_a_run_page_lists_each_question_with_its_verdict_and_completion(tmp_path):
    """Issue 38 item 10: which questions the model got right and wrong, with what it wrote."""
    import json

    job = write_job(tmp_path / "jobs", "job", [TrialSpec()])
    (trial,) = [p for p in job.iterdir() if p.is_dir()]
    rows = [
        {"id": "q1", "seed": 0, "score": 1.0, "error_type": None, "completion": "ANSWER: 72"},
        {"id": "q2", "seed": 0, "score": 0.0, "error_type": None, "completion": "<b>no</b>"},
    ]
    (trial / "verifier" / "samples.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows) + '{"id": "cut'
    )
    export([tmp_path / "jobs"], tmp_path / "res")
    board, records = build_leaderboard(tmp_path / "res", "mean", None, None)
    (record,) = records
    assert record.samples_file == "samples.jsonl"
    page = section(render_report(board, records, tmp_path / "res"), f"run-{record.id}")
    assert "<h2>Questions</h2>" in page and "1 right of 2 shown" in page
    assert "ANSWER: 72" in page and "&lt;b&gt;no&lt;/b&gt;" in page and "<b>no</b>" not in page


def test_run_page_shows_posttrainbenchs_judges_beside_ours(built):
    from posttrainbench.task.integrity.agentic.verdicts import (
        AgenticStatus,
        ContaminationJudgement,
        JudgeRun,
        aggregate,
    )

    runs = [
        JudgeRun(
            name="gpt5_4",
            cli="codex",
            model="gpt-5.4",
            kind="data_and_model",
            status="decided",
            seconds=61.0,
            judgement=ContaminationJudgement(
                contamination=True,
                disallowed_model=False,
                justification_contamination="<b>train.jsonl</b> holds 12 test items",
                justification_disallowed_model="base model only",
            ),
        ),
        JudgeRun(
            name="api",
            cli="codex",
            model="gpt-5.4",
            kind="api",
            status="undecided",
            reason="judgement.json is not valid JSON",
        ),
    ]
    status = AgenticStatus(status="ran", judges=runs, result=aggregate(runs))
    records = [
        r.model_copy(update={"ptb_judges": status}) if r.id == IDS["flagged"] else r
        for r in built.records
    ]
    html = render_report(built.board, records, built.results_dir, max_events=5, max_chars=100)
    page = section(html, f"run-{IDS['flagged']}")
    ours = page.index("PostTrainBench's judges")
    assert page.index("decided by detector") < ours  # ours first, theirs beside
    theirs = page[ours:]
    assert "gpt5_4" in theirs and "codex · gpt-5.4 · 61.0 s" in theirs
    assert "contamination: flagged" in theirs and "API use: undecided" in theirs
    assert "judgement.json is not valid JSON" in theirs
    assert "&lt;b&gt;train.jsonl&lt;/b&gt;" in theirs  # a judge's text is escaped
    other = section(html, f"run-{IDS['errored']}")
    assert "Not run for this trial" in other
