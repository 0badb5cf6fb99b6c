"""The static HTML report: leaderboard, charts and one page per run, in a single offline file."""

from posttrainbench.host.results.report.render import render_report, write_report

__all__ = ["render_report", "write_report"]
