"""What the verifier takes from ``final_model``: weights, and only what a model needs to load.

A model directory carries more than weights: ``tokenizer.json`` holds a text pipeline
(normalizer, pre-tokenizer, decoder, post-processor) that can rewrite every completion
(a chain of ``Replace`` decoder steps turned a base model's wrong answers into right
ones), added tokens can give a base token id new text, special-token roles make
ordinary tokens vanish from the output (``skip_special_tokens``), and generation
configs force, ban or bias tokens. None of that is training. So the files of
``final_model`` are checked against the base model's (:func:`check_model_files`) and
the verifier loads a *scored directory* (:func:`stage_scored_model`) that holds
final_model's ``config.json`` and weight files, its ``tokenizer.json`` only once
checked, and tokenizer and generation configs that are the base's with only the
allowed fields of final_model's laid over them. Every other file comes from the base.

Allowed to differ from the base, because none of it can carry text:

- **new special tokens** (a pad token, a chat or tool marker) with ids past the base
  vocabulary, whose content is a marker (``<...>`` or ``[...]``, no spaces) that is no
  base token: decoding skips special tokens, so they add no text to an answer;
- **special-token roles** (``eos_token``, ``pad_token``, ...) naming base special tokens
  or such markers (a fine-tune may end turns on ``<|im_end|>``): a role that names an
  ordinary token would delete that token from every answer, so it is rejected;
- **added-token flags** (``lstrip``, ``rstrip``, ``normalized``, ``single_word``): they
  only move whitespace around a special token in the prompt;
- **sampling scalars** vLLM reads from ``generation_config.json`` (temperature, top_p,
  top_k, min_p, repetition_penalty, max_new_tokens; do_sample, max_length), as
  PostTrainBench's vLLM server uses them: they pick among the model's own tokens;
- **stop and pad token ids** that are special tokens (as for roles);
- ``model_max_length``, padding and truncation sides (prompts are never truncated).

Rejected (the model scores 0, the file and field named): a tokenizer pipeline section,
the vocabulary or the merges unlike the base's; an added token that reuses a base id
with other text or is not a special marker; a role naming an ordinary token; a
tokenizer class or ``auto_map`` unlike the base's; a token-forcing, banning or biasing
generation field (:data:`DECODING_FIELDS`) unlike the base's, in
``generation_config.json`` or ``config.json``; a checked file that is a link, too large
or not JSON. Unknown fields of the tokenizer and generation configs are not carried
(the base's values are used) and are listed as notes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.core.weights import TRANSFORMERS_WEIGHT_SUFFIXES

from .sampling import VLLM_SAMPLING_FIELDS

CONFIG = "config.json"
GENERATION_CONFIG = "generation_config.json"
TOKENIZER = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"
# Files the staged directory builds itself (checked or merged); the rest come from the base.
CHECKED_FILES = (CONFIG, GENERATION_CONFIG, TOKENIZER, TOKENIZER_CONFIG, SPECIAL_TOKENS_MAP)
MAX_JSON_BYTES = 64 << 20  # the largest tokenizer.json of a catalog model is ~33 MB
# tokenizer.json sections that turn text into ids and ids into text: the base's, always.
PIPELINE_SECTIONS = ("normalizer", "pre_tokenizer", "post_processor", "decoder", "truncation")
# A special token a fine-tune may add: a marker, e.g. <pad>, <|pad|>, <tool_call>, [PAD].
MARKER = re.compile(r"^(<[^<>\s]{1,62}>|\[[A-Za-z0-9_]{1,30}\])$")
ROLE_KEYS = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
)
ROLE_LIST_KEYS = ("additional_special_tokens", "extra_special_tokens")
# tokenizer_config.json fields that change the text and must equal the base's.
TOKENIZER_TEXT_FIELDS = (
    "tokenizer_class",
    "auto_map",
    "clean_up_tokenization_spaces",
    "spaces_between_special_tokens",
    "add_prefix_space",
    "add_bos_token",
    "add_eos_token",
    "legacy",
    "do_lower_case",
    "split_special_tokens",
    "errors",
)
# ... and those that may differ (taken from final_model).
TOKENIZER_FREE_FIELDS = ("model_max_length", "padding_side", "truncation_side")
# Generation fields that force, ban, bias or reshape tokens, with their neutral values:
# a value other than the base's (None or neutral counts as unset) rejects the model.
DECODING_FIELDS: dict[str, tuple[Any, ...]] = {
    "no_repeat_ngram_size": (None, 0),
    "encoder_no_repeat_ngram_size": (None, 0),
    "min_length": (None, 0),
    "min_new_tokens": (None, 0),
    "bad_words_ids": (None, []),
    "force_words_ids": (None, []),
    "suppress_tokens": (None, []),
    "begin_suppress_tokens": (None, []),
    "forced_bos_token_id": (None,),
    "forced_eos_token_id": (None,),
    "forced_decoder_ids": (None, []),
    "sequence_bias": (None, {}, []),
    "constraints": (None, []),
    "stop_strings": (None, [], ""),
    "exponential_decay_length_penalty": (None,),
    "watermarking_config": (None,),
    "renormalize_logits": (None, False),
    "guidance_scale": (None, 1.0),
    "num_beams": (None, 1),
    "num_beam_groups": (None, 1),
    "penalty_alpha": (None,),
    "typical_p": (None, 1.0),
    "epsilon_cutoff": (None, 0.0),
    "eta_cutoff": (None, 0.0),
    "token_healing": (None, False),
}
TOKEN_ID_FIELDS = ("eos_token_id", "pad_token_id", "bos_token_id", "decoder_start_token_id")
GENERATION_FREE_FIELDS = (*VLLM_SAMPLING_FIELDS, "do_sample", "max_length")
WEIGHT_INDEX_SUFFIX = ".index.json"


class FileFinding(BaseModel):
    """One field of one file of final_model that differs from the base model's."""

    model_config = ConfigDict(extra="forbid")

    file: str
    field: str
    detail: str
    rejected: bool = Field(description="True: the model is not scored; False: a note")

    def line(self) -> str:
        """`file field: detail`."""
        return f"{self.file} {self.field}: {self.detail}"


class ModelFilesVerdict(BaseModel):
    """What :func:`check_model_files` found."""

    model_config = ConfigDict(extra="forbid")

    findings: list[FileFinding] = Field(default_factory=list)

    @property
    def rejections(self) -> list[FileFinding]:
        """The findings that reject the model."""
        return [f for f in self.findings if f.rejected]

    @property
    def rejected(self) -> bool:
        return bool(self.rejections)

    def reason(self) -> str:
        """One line for metrics.json: the first rejections, file and field named."""
        shown = "; ".join(f.line() for f in self.rejections[:3])
        more = len(self.rejections) - 3
        return "final_model rejected: " + shown + (f" (and {more} more)" if more > 0 else "")

    def add(self, file: str, field: str, detail: str, rejected: bool = True) -> None:
        self.findings.append(FileFinding(file=file, field=field, detail=detail, rejected=rejected))


class _Unreadable(ValueError):
    """A checked file is a link, too large or not a JSON object."""


def _read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object file (None when absent); _Unreadable when it cannot be checked."""
    if path.is_symlink():
        raise _Unreadable("is a link")
    if not path.exists():
        return None
    if not path.is_file():
        raise _Unreadable("is not a file")
    if path.stat().st_size > MAX_JSON_BYTES:
        raise _Unreadable(f"is larger than {MAX_JSON_BYTES >> 20} MiB")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise _Unreadable(f"is not readable JSON ({exc})"[:200]) from None
    if not isinstance(data, dict):
        raise _Unreadable("is not a JSON object")
    return data


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _content(value: Any) -> str | None:
    """A token's text, whether given as a string or as an AddedToken dict."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _merges(model: dict[str, Any]) -> list[tuple[str, ...]]:
    """BPE merges as pairs, whether saved as "a b" strings or [a, b] lists."""
    merges = model.get("merges") or []
    return [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in merges]


class _BaseTokens:
    """The base model's tokens: its vocabulary, its special tokens and where new ids start."""

    def __init__(self, tokenizer: dict[str, Any], configs: list[dict[str, Any]]):
        model = tokenizer.get("model") or {}
        vocab = model.get("vocab") or {}
        self.vocab: set[str] = set(vocab) if isinstance(vocab, dict) else set()
        self.added: dict[int, dict[str, Any]] = {
            int(t["id"]): t for t in tokenizer.get("added_tokens") or [] if "id" in t
        }
        ids = [v for v in vocab.values() if isinstance(v, int)] if isinstance(vocab, dict) else []
        self.size = max([*ids, *self.added, -1]) + 1
        self.special: set[str] = {t["content"] for t in self.added.values() if t.get("special")}
        self.special_ids: set[int] = {i for i, t in self.added.items() if t.get("special")}
        for config in configs:
            self.special |= {c for c in _role_contents(config) if c is not None}

    def allowed_special(self, content: str) -> bool:
        """A base special token, or a marker that is no base token."""
        if content in self.special:
            return True
        ordinary = content in self.vocab or any(
            t["content"] == content for t in self.added.values()
        )
        return bool(MARKER.match(content)) and not ordinary


def _role_contents(config: dict[str, Any]) -> list[str | None]:
    found: list[str | None] = [_content(config[k]) for k in ROLE_KEYS if config.get(k) is not None]
    for key in ROLE_LIST_KEYS:
        value = config.get(key)
        items = (
            value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
        )
        found.extend(_content(v) for v in items)
    return found


def _check_added(
    verdict: ModelFilesVerdict, file: str, field: str, tokens: dict[int, dict], base: _BaseTokens
) -> set[int]:
    """Added tokens against the base's; returns the ids of the new special markers."""
    new_ids: set[int] = set()
    for token_id, token in sorted(tokens.items()):
        content, special = _content(token), bool(token.get("special"))
        where = f"{field}[{token_id}]"
        if token_id in base.added:
            old = base.added[token_id]
            if content != old.get("content") or special != bool(old.get("special")):
                verdict.add(
                    file,
                    where,
                    f"{_short(content)} replaces the base's {_short(old.get('content'))}",
                )
        elif token_id < base.size:
            verdict.add(file, where, f"{_short(content)} gives base token id {token_id} other text")
        elif not special or content is None or not base.allowed_special(content):
            verdict.add(
                file,
                where,
                f"new token {_short(content)} is not a special marker (<...> or [...]): "
                "its text would reach the answers",
            )
        else:
            new_ids.add(token_id)
    return new_ids


def _check_tokenizer_json(
    verdict: ModelFilesVerdict, final: dict[str, Any], base: dict[str, Any], tokens: _BaseTokens
) -> set[int]:
    for section in PIPELINE_SECTIONS:
        if final.get(section) != base.get(section):
            verdict.add(
                TOKENIZER, section, f"differs from the base model's ({_short(final.get(section))})"
            )
    fm, bm = final.get("model") or {}, base.get("model") or {}
    for key in sorted(set(fm) | set(bm)):
        if key == "merges":
            if _merges(fm) != _merges(bm):
                verdict.add(TOKENIZER, "model.merges", "differ from the base model's")
        elif fm.get(key) != bm.get(key):
            what = (
                "differs" if key != "vocab" else f"differs ({len(fm.get('vocab') or {})} entries)"
            )
            verdict.add(TOKENIZER, f"model.{key}", f"{what} from the base model's")
    added = {
        int(t["id"]): t
        for t in final.get("added_tokens") or []
        if isinstance(t, dict) and "id" in t
    }
    missing = sorted(set(tokens.added) - set(added))
    if missing:
        verdict.add(TOKENIZER, "added_tokens", f"drops the base's added tokens {missing[:5]}")
    return _check_added(verdict, TOKENIZER, "added_tokens", added, tokens)


def _check_tokenizer_config(
    verdict: ModelFilesVerdict,
    file: str,
    final: dict[str, Any],
    base: dict[str, Any],
    tokens: _BaseTokens,
    new_ids: set[int],
) -> None:
    for key in TOKENIZER_TEXT_FIELDS:
        if key in final and final[key] != base.get(key):
            verdict.add(
                file, key, f"{_short(final[key])}, the base model's {_short(base.get(key))}"
            )
    decoder = final.get("added_tokens_decoder")
    if isinstance(decoder, dict):
        entries = {
            int(k): v for k, v in decoder.items() if str(k).isdigit() and isinstance(v, dict)
        }
        new_ids |= _check_added(verdict, file, "added_tokens_decoder", entries, tokens)
    for key in (*ROLE_KEYS, *ROLE_LIST_KEYS):
        value = final.get(key)
        if value is None or value == base.get(key):
            continue
        items = (
            value.values()
            if isinstance(value, dict) and _content(value) is None
            else (value if isinstance(value, list) else [value])
        )
        for item in items:
            content = _content(item)
            if content is None or not tokens.allowed_special(content):
                verdict.add(
                    file,
                    key,
                    f"{_short(item)} is no special token of the base nor a new marker: "
                    "decoding would delete it from every answer",
                )
    for key in sorted(set(final) - set(base) - {*TOKENIZER_TEXT_FIELDS, *TOKENIZER_FREE_FIELDS}):
        if key not in ("added_tokens_decoder", "chat_template", *ROLE_KEYS, *ROLE_LIST_KEYS):
            verdict.add(
                file, key, "not carried (the base model's settings are used)", rejected=False
            )


def _neutral(key: str, value: Any) -> bool:
    return value in DECODING_FIELDS.get(key, (None,))


def _check_generation(
    verdict: ModelFilesVerdict,
    file: str,
    final: dict[str, Any],
    base: dict[str, Any],
    tokens: _BaseTokens,
    new_ids: set[int],
) -> None:
    for key in DECODING_FIELDS:
        value, was = final.get(key), base.get(key)
        if value != was and not (_neutral(key, value) and _neutral(key, was)):
            verdict.add(
                file,
                key,
                f"{_short(value)}, the base model's {_short(was)}: it changes which tokens are chosen",
            )
    allowed_ids = tokens.special_ids | new_ids
    for key in TOKEN_ID_FIELDS:
        value = final.get(key)
        if value is None or value == base.get(key):
            continue
        ids = value if isinstance(value, list) else [value]
        bad = [
            i for i in ids if not isinstance(i, int) or isinstance(i, bool) or i not in allowed_ids
        ]
        if bad:
            verdict.add(
                file,
                key,
                f"{_short(bad)} are no special token ids: they would cut answers at ordinary tokens",
            )


def check_model_files(final: Path, base: Path) -> ModelFilesVerdict:
    """The fields of final_model's tokenizer, generation and model configs that differ
    from the base model's, each a rejection or a note (see the module docstring)."""
    verdict = ModelFilesVerdict()
    files: dict[str, tuple[dict[str, Any] | None, dict[str, Any] | None]] = {}
    for name in CHECKED_FILES:
        try:
            base_data = _read_json(base / name)
        except _Unreadable:
            base_data = None
        try:
            files[name] = (_read_json(final / name), base_data)
        except _Unreadable as exc:
            verdict.add(name, "(file)", str(exc))
            files[name] = (None, base_data)
    if verdict.rejected:
        return verdict
    base_tok = files[TOKENIZER][1] or {}
    base_configs = [files[TOKENIZER_CONFIG][1] or {}, files[SPECIAL_TOKENS_MAP][1] or {}]
    tokens = _BaseTokens(base_tok, base_configs)
    final_tok = files[TOKENIZER][0]
    new_ids: set[int] = set()
    if final_tok is not None and files[TOKENIZER][1] is None:
        verdict.add(TOKENIZER, "(file)", "not carried: the base model has none", rejected=False)
    elif final_tok is not None:
        new_ids = _check_tokenizer_json(verdict, final_tok, base_tok, tokens)
    for name in (TOKENIZER_CONFIG, SPECIAL_TOKENS_MAP):
        found, was = files[name]
        if found is not None:
            _check_tokenizer_config(verdict, name, found, was or {}, tokens, new_ids)
    config, base_config = files[CONFIG][0] or {}, files[CONFIG][1] or {}
    for key in ("tokenizer_class", "auto_map"):
        if key in config and config[key] != base_config.get(key):
            verdict.add(
                CONFIG,
                key,
                f"{_short(config[key])}, the base model's {_short(base_config.get(key))}",
            )
    for name, (found, was) in (
        (CONFIG, files[CONFIG]),
        (GENERATION_CONFIG, files[GENERATION_CONFIG]),
    ):
        if found is not None:
            _check_generation(verdict, name, found, was or {}, tokens, new_ids)
    return verdict


def _overlay(base: dict[str, Any], final: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    merged = dict(base)
    merged.update({k: final[k] for k in keys if k in final})
    return merged


def _weight_file(name: str) -> bool:
    return name.endswith(TRANSFORMERS_WEIGHT_SUFFIXES) or (
        name.endswith(WEIGHT_INDEX_SUFFIX)
        and name[: -len(WEIGHT_INDEX_SUFFIX)].endswith(TRANSFORMERS_WEIGHT_SUFFIXES)
    )


def stage_scored_model(final: Path, base: Path, out: Path) -> Path:
    """The directory the verifier loads: final_model's config.json and weight files
    (linked), its tokenizer.json, the tokenizer and generation configs of the base with
    final_model's allowed fields over them, and every other file from the base.

    Call only after :func:`check_model_files` found nothing to reject.
    """
    out.mkdir(parents=True, exist_ok=True)
    for entry in sorted(base.iterdir()):
        if entry.is_file() and entry.name not in CHECKED_FILES and not _weight_file(entry.name):
            shutil.copyfile(entry, out / entry.name)
    for entry in sorted(final.iterdir()):
        if entry.name == CONFIG or (
            _weight_file(entry.name) and entry.is_file() and not entry.is_symlink()
        ):
            os.symlink(entry.resolve(), out / entry.name)
    final_tok, base_tok = _read_json(final / TOKENIZER), _read_json(base / TOKENIZER)
    tokenizer = final_tok if final_tok is not None and base_tok is not None else base_tok
    if tokenizer is not None:
        (out / TOKENIZER).write_text(json.dumps(tokenizer), encoding="utf-8")
    role_keys = (*ROLE_KEYS, *ROLE_LIST_KEYS)
    for name, keys in (
        (TOKENIZER_CONFIG, (*TOKENIZER_FREE_FIELDS, *role_keys, "added_tokens_decoder")),
        (SPECIAL_TOKENS_MAP, role_keys),
        (GENERATION_CONFIG, (*GENERATION_FREE_FIELDS, *TOKEN_ID_FIELDS)),
    ):
        found, was = _read_json(final / name), _read_json(base / name)
        if found is None and was is None:
            continue
        merged = _overlay(was or {}, found or {}, keys)
        if name == TOKENIZER_CONFIG:  # the base's added tokens stay; new ones were checked
            merged["added_tokens_decoder"] = {
                **((was or {}).get("added_tokens_decoder") or {}),
                **((found or {}).get("added_tokens_decoder") or {}),
            }
            if not merged["added_tokens_decoder"]:
                del merged["added_tokens_decoder"]
        (out / name).write_text(json.dumps(merged), encoding="utf-8")
    return out
