"""The two reference points of every cell: the base model's score and the instruct model's.

Base model (the fallback where a run is missing or flagged), first found wins:
1. ``--baselines FILE`` entries of kind zero_shot, else few_shot, for this benchmark and model;
2. the catalog's for this exact model, zero_shot before few_shot: PostTrainBench's
   fallback, which replaces a contaminated or errored cell by the base model's
   ``zeroshot`` score in its ``baselines.json`` (its scripts/collect.py:123-140 with
   utils.py:129-138, branch qol_multigpu);
3. measured here with ``ptb baseline`` on the whole test set, for this exact model
   (posttrainbench.host.data.measured_baselines): for a model PostTrainBench has no number for;
4. measured in the store: the mean of the base-model scores the verifiers measured next
   to the runs (``metrics.base_model``, on the same questions as those runs);
5. the catalog's mean over the base models (model ``"*"``).

Instruct model (the normalization target): the file's, else the catalog's, exact model
before ``"*"``.

Under the ``ptb`` policy the fallback is PostTrainBench's alone (`ptb_zero_shot`): its
``zeroshot`` score of this exact model, or nothing, as its collect.py leaves such a cell
empty.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from posttrainbench.core.errors import PtbError
from posttrainbench.host.catalog.baselines import BaselineEntry, list_baselines, ptb_baselines
from posttrainbench.host.catalog.weights import default_weights
from posttrainbench.host.data.measured_baselines import measured_entries
from posttrainbench.host.results.record import ResultRecord
from posttrainbench.host.results.table import BaselineUsed

_ENTRIES = TypeAdapter(list[BaselineEntry])


class WeightsFile(BaseModel):
    """A user's weights file (`--weights FILE`): a weight per benchmark id."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    about: str | None = Field(default=None, alias="_about")
    weights: dict[str, float]


def load_weights(path: Path | None = None) -> dict[str, float]:
    """Per-benchmark weights: PostTrainBench's factors.json by default, or the user's file."""
    if path is None:
        return default_weights()
    source = path
    try:
        parsed = WeightsFile.model_validate_json(Path(source).read_text(encoding="utf-8"))
    except OSError as exc:
        raise PtbError(f"cannot read weights file {source}: {exc.strerror or exc}") from None
    except ValidationError as exc:
        raise PtbError(
            f"weights file {source} is not valid: {str(exc).splitlines()[0]} "
            '(expected {"weights": {"<benchmark>": <number>}})'
        ) from None
    negative = [b for b, w in parsed.weights.items() if w < 0]
    if negative:
        raise PtbError(f"weights file {source}: negative weight for {', '.join(negative)}")
    return parsed.weights


def load_baseline_file(path: Path) -> list[BaselineEntry]:
    """A user's baselines: a JSON list of catalog-style entries."""
    try:
        return _ENTRIES.validate_python(json.loads(Path(path).read_text(encoding="utf-8")))
    except OSError as exc:
        raise PtbError(f"cannot read baselines file {path}: {exc.strerror or exc}") from None
    except (ValueError, ValidationError) as exc:
        raise PtbError(f"baselines file {path} is not valid: {str(exc).splitlines()[0]}") from None


class ReferenceScores:
    """Looks up base and instruct scores per (benchmark, base model), remembering what it used."""

    def __init__(
        self,
        records: Iterable[ResultRecord],
        extra: Iterable[BaselineEntry] = (),
        measured: Iterable[BaselineEntry] | None = None,
    ):
        self._extra = list(extra)
        self._here = list(measured_entries() if measured is None else measured)
        self._catalog = list(list_baselines())
        sums: dict[tuple[str, str], list[float]] = {}
        for record in records:
            base = record.metrics.base_model if record.metrics else None
            if base is not None and base.error is None and base.n > 0:
                sums.setdefault((record.benchmark, record.base_model), []).append(base.accuracy)
        self._measured = {key: sum(v) / len(v) for key, v in sums.items()}
        self._measured_n = {key: len(v) for key, v in sums.items()}
        self.used: dict[tuple[str, str, str], BaselineUsed] = {}

    def base(self, benchmark: str, model: str) -> BaselineUsed | None:
        """The base model's score, or None when nothing is known."""
        kinds = ("zero_shot", "few_shot")
        found = (
            self._entry(self._extra, benchmark, model, kinds, "baselines file", exact=False)
            or self._entry(self._catalog, benchmark, model, kinds, "catalog", exact=True)
            or self._entry(self._here, benchmark, model, kinds, "ptb baseline", exact=True)
        )
        if found is None and (benchmark, model) in self._measured:
            n = self._measured_n[(benchmark, model)]
            found = BaselineUsed(
                benchmark=benchmark,
                base_model=model,
                kind="base",
                score=self._measured[(benchmark, model)],
                source=f"measured by the verifier next to {n} run(s)",
            )
        found = found or self._entry(self._catalog, benchmark, model, kinds, "catalog", exact=False)
        return self._remember(found)

    def ptb_zero_shot(self, benchmark: str, model: str) -> BaselineUsed | None:
        """PostTrainBench's fallback: its baselines.json ``zeroshot`` score of this exact
        base model (its utils.py get_baseline_fallback_data), or None."""
        data = ptb_baselines()
        for row in data.models:
            if row.model == model and benchmark in row.zero_shot:
                return self._remember(
                    BaselineUsed(
                        benchmark=benchmark,
                        base_model=model,
                        kind="base",
                        score=row.zero_shot[benchmark],
                        source=f"catalog (PostTrainBench zeroshot[{row.ptb_base!r}], "
                        f"{data.source.cite()})",
                    )
                )
        return None

    def instruct(self, benchmark: str, model: str) -> BaselineUsed | None:
        """The official instruct model's score, or None."""
        kinds = ("instruct",)
        found = self._entry(
            self._extra, benchmark, model, kinds, "baselines file", exact=False
        ) or self._entry(self._catalog, benchmark, model, kinds, "catalog", exact=False)
        return self._remember(found)

    def _remember(self, found: BaselineUsed | None) -> BaselineUsed | None:
        if found is not None:
            self.used[(found.benchmark, found.base_model, found.kind)] = found
        return found

    @staticmethod
    def _entry(
        entries: list[BaselineEntry],
        benchmark: str,
        model: str,
        kinds: tuple[str, ...],
        origin: str,
        *,
        exact: bool,
    ) -> BaselineUsed | None:
        allowed = (model,) if exact else (model, "*")
        # The kinds in the order given: a zero-shot number before a few-shot one.
        for wanted in allowed:
            for kind in kinds:
                for entry in entries:
                    if entry.benchmark != benchmark or entry.model != wanted or entry.kind != kind:
                        continue
                    label = "mean over the base models, " if wanted == "*" else ""
                    return BaselineUsed(
                        benchmark=benchmark,
                        base_model=model,
                        kind="instruct" if entry.kind == "instruct" else "base",
                        score=entry.score,
                        source=f"{origin} ({label}{entry.provenance})",
                    )
        return None
