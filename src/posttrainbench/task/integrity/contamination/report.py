"""Settings and result of a contamination check (the `--json` output)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class CheckSettings(BaseModel):
    """N-gram sizes and threshold, as in decon's SIMPLE method, on cl100k tokens."""

    model_config = ConfigDict(extra="forbid")

    tokenizer: str = "cl100k_base"
    question_n: int = Field(default=5, ge=1)
    answer_n: int = Field(default=3, ge=1)
    passage_n: int = Field(default=4, ge=1)
    threshold: float = Field(default=0.8, gt=0.0, le=1.0)


class RecordMatch(BaseModel):
    """One training record that contains (most of) one test item."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(description="file the record came from")
    locator: str = Field(
        description="where in the file: 'line 12', 'row 3', 'item 7', 'bytes 0-4096'"
    )
    test_index: int = Field(ge=0, description="index of the matched item in the reference")
    test_question: str = Field(description="start of the matched test question")
    score: float = Field(description="combined overlap score compared with the threshold")
    question_overlap: float
    answer_overlap: float | None = None
    passage_overlap: float | None = None
    snippet: str = Field(description="start of the training record")
    variant: str | None = Field(
        default=None,
        description="the form of the test item the record holds (variants.py): "
        "'ptb_clean', 'rot13', 'reversed'; None: as given",
    )


class ContaminationReport(BaseModel):
    """What `ptb contamination check --json` prints."""

    model_config = ConfigDict(extra="forbid")

    contaminated: bool
    reference: str
    n_reference_items: int
    settings: CheckSettings
    files: list[str] = Field(default_factory=list)
    n_records: int = 0
    bytes_scanned: int = 0
    seconds: float = 0.0
    matches: list[RecordMatch] = Field(default_factory=list)
    contaminated_test_items: list[int] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list, description="inputs that could not be read")
    incomplete: str | None = Field(default=None, description="what a deadline left unchecked")
