"""inspect-ai's ``match(numeric=True)`` scorer for one completion and target (stdlib only).

A port of inspect-ai 0.3.150 (the version of PostTrainBench's image), files
``inspect_ai/scorer/_match.py`` (``match``, location ``"end"``, ``ignore_case=True``),
``inspect_ai/scorer/_common.py`` (``match_str``, ``first_number_normalized``,
``normalize_number``), ``inspect_ai/_util/text.py`` (``strip_punctuation``,
``strip_numeric_punctuation``, ``str_to_float``) and ``inspect_ai/scorer/_unicode.py``
(``unicode_number_to_float``, for the inputs it can receive here). Its quirks are kept on
purpose, since they decide PostTrainBench's verdicts:

* only a target for which ``str.isnumeric()`` holds is compared as a number: the last
  whitespace-separated word of the completion that is a number (after ``$ , £ € * _``
  and sentence dots are removed), formatted with 5 significant digits, must END with the
  target so formatted (``118`` matches ``18``);
* any other target (``2,125``, ``-3``) is compared as text: the whole completion,
  stripped of whitespace and punctuation at both ends, must end with the target so
  stripped (``-3`` becomes ``3``);
* ``ANSWER:`` itself plays no part; the last number counts wherever it is.

tests/task/test_gsm8k.py checks this module against inspect's own scorer.
"""

from __future__ import annotations

import re
import string
import unicodedata

PRECISION = 5  # normalize_number's default


def strip_punctuation(s: str) -> str:
    return s.strip(string.whitespace + string.punctuation)


def strip_numeric_punctuation(s: str) -> str:
    """Remove ``$ , £ € * _`` and every ``.`` not followed by a digit."""
    return re.sub(r"\.(?=\s|$|\D)", "", re.sub(r"[$,£,€,*,_]", "", s))


def match_end(completion: str, target: str) -> tuple[str, bool]:
    """``match_str(completion, target, location="end", ignore_case=True, numeric=True)``:
    (the answer inspect reports, whether it matched)."""
    v = completion.strip()
    t = target.strip()
    answer = v
    v = v.casefold()
    t = t.casefold()
    if t.isnumeric():
        v = strip_numeric_punctuation(v)
        t = normalize_number(strip_numeric_punctuation(t))
        words = re.split(r"\s+", v)
        words.reverse()
        v = first_number_normalized(words)
        answer = v
    else:  # ignore_punctuation
        v = strip_punctuation(v)
        t = strip_punctuation(t)
    return answer, v.endswith(t)


def _is_number(word: str) -> bool:
    return word.replace(".", "").isnumeric()


def first_number_normalized(words: list[str]) -> str:
    return normalize_number(next((w for w in words if _is_number(w)), words[0]))


def normalize_number(number: str, precision: int = PRECISION) -> str:
    """A number formatted with *precision* significant digits; any other text unchanged.

    Raises ValueError (or OverflowError) where inspect's does: its scorer then fails.
    """
    if not _is_number(number):
        return number
    try:
        num = str_to_float(number)
    except ValueError:
        num = unicode_number_to_float(number)
    return format(num, f".{precision}g")


_FRACTIONS = {
    "½": 1 / 2,
    "⅓": 1 / 3,
    "⅔": 2 / 3,
    "¼": 1 / 4,
    "¾": 3 / 4,
    "⅕": 1 / 5,
    "⅖": 2 / 5,
    "⅗": 3 / 5,
    "⅘": 4 / 5,
    "⅙": 1 / 6,
    "⅚": 5 / 6,
    "⅐": 1 / 7,
    "⅛": 1 / 8,
    "⅜": 3 / 8,
    "⅝": 5 / 8,
    "⅞": 7 / 8,
    "⅑": 1 / 9,
    "⅒": 1 / 10,
}
_SUPERSCRIPTS = "⁰¹²³⁴⁵⁶⁷⁸⁹"
_FROM_SUPERSCRIPT = str.maketrans(_SUPERSCRIPTS, "0123456789")
_LEADING_FLOAT = re.compile(r"^([+-]?\d+(?:\.\d+)?)")


def str_to_float(s: str) -> float:
    """inspect's ``str_to_float``: a leading decimal number, one vulgar fraction
    (added), an exponent in superscript digits (everything from the first one)."""
    if not s:
        raise ValueError("Input string is empty.")
    if len(s) == 1 and s in _FRACTIONS:
        return _FRACTIONS[s]
    base, fraction, exponent = "", None, ""
    for i, ch in enumerate(s):
        if ch in _FRACTIONS:
            if fraction is not None:
                raise ValueError(f"Multiple fraction characters in '{s}'")
            fraction = ch
        elif ch in _SUPERSCRIPTS:
            exponent = s[i:]
            break
        else:
            base += ch
    value = 0.0
    if base:
        m = _LEADING_FLOAT.match(base)
        if m is None:
            raise ValueError(f"Value could not be parsed as a float: {s}")
        value = float(m.group(1))
    if fraction:
        value = value - _FRACTIONS[fraction] if value < 0 else value + _FRACTIONS[fraction]
    elif not base:
        value = 1.0
    if exponent:
        try:
            power = int(exponent.translate(_FROM_SUPERSCRIPT))
        except ValueError:
            raise ValueError(f"Invalid exponent in '{s}'") from None
        return value**power
    return value


# --- inspect's unicode_number_to_float, for what normalize_number can pass it: a word
# of Unicode numeric characters and dots (so no signs, spaces, group separators or
# e-notation, which that function also handles).
_CH_DIGITS = dict(zip("零〇○一二三四五六七八九", (0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9)))
_CH_DIGITS |= dict(
    zip("壹贰貳叁參肆伍陆陸柒捌玖两兩幺", (1, 2, 2, 3, 3, 4, 5, 6, 6, 7, 8, 9, 2, 2, 1))
)
_CH_ALT_TENS = {"廿": 20, "卅": 30, "卌": 40}
_CH_SMALL_UNITS = {"十": 10, "拾": 10, "百": 100, "佰": 100, "千": 1000, "仟": 1000}
_CH_LARGE_UNITS = {"万": 10**4, "萬": 10**4, "亿": 10**8, "億": 10**8, "兆": 10**12}
_CH_UNITS = {*_CH_ALT_TENS, *_CH_SMALL_UNITS, *_CH_LARGE_UNITS}
_CH_POOL = {*_CH_DIGITS, *_CH_ALT_TENS, *_CH_SMALL_UNITS, *_CH_LARGE_UNITS, *"点點负負正"}


def _char_numeric(ch: str) -> float | None:
    try:
        return float(unicodedata.numeric(ch))
    except (TypeError, ValueError):
        return None


def _char_digit(ch: str) -> str | None:
    if "0" <= ch <= "9":
        return ch
    for lookup in (unicodedata.decimal, unicodedata.digit):
        try:
            return str(lookup(ch))
        except (TypeError, ValueError):
            pass
    return str(_CH_DIGITS[ch]) if ch in _CH_DIGITS else None


def unicode_number_to_float(s: str) -> float:
    text = s.strip()
    if not text:
        raise ValueError("Empty string")
    if len(text) == 1 and (single := _char_numeric(text)) is not None:
        return single
    base, exponent = text, None
    tail = len(text)
    while tail > 0 and text[tail - 1] in _SUPERSCRIPTS:
        tail -= 1
    if 0 < tail < len(text):  # a superscript exponent after a non-empty base
        base, exponent = text[:tail], int(text[tail:].translate(_FROM_SUPERSCRIPT))
    value = _number_with_fraction(base)
    if value is None:
        raise ValueError(f"Could not parse number from {s!r}")
    if exponent is None:
        return float(value)
    try:
        return float(value**exponent)
    except Exception as exc:
        raise ValueError(f"Invalid exponent operation for {s!r}: {exc}") from exc


def _number_with_fraction(s: str) -> float | None:
    numerics = ((i, _char_numeric(ch)) for i, ch in enumerate(s))
    hits = [(i, v) for i, v in numerics if v is not None and 0.0 < v < 1.0]
    if not hits:
        return _core_number(s)
    if len(hits) > 1:
        raise ValueError(f"Multiple fraction characters in {s!r}")
    ((at, fraction),) = hits
    if s[at + 1 :]:
        raise ValueError(f"Unexpected characters after fraction in {s!r}")
    if not s[:at]:
        return fraction
    head = _core_number(s[:at])
    if head is None:
        raise ValueError(f"Invalid base part in {s!r}")
    return head + fraction


def _core_number(s: str) -> float | None:
    if not s:
        return None
    if any(ch in _CH_POOL for ch in s):
        value = _chinese_number(s)
        if value is not None:
            return value
    value = _generic_digits(s)
    if value is not None:
        return value
    return _char_numeric(s) if len(s) == 1 else None


def _generic_digits(s: str) -> float | None:
    out: list[str] = []
    for ch in s:
        if ch == ".":
            if "." in out:
                return None
            out.append(".")
            continue
        digit = _char_digit(ch)
        if digit is None:
            return None
        out.append(digit)
    if all(c == "." for c in out):
        return None
    try:
        return float("".join(out))
    except ValueError:
        return None


def _chinese_number(s: str) -> float | None:
    integer, _, fraction = s.partition(".")
    if not any(ch in _CH_UNITS for ch in integer):
        digits = [_char_digit(ch) for ch in integer]
        if None in digits:
            return None
        whole = int("".join(d for d in digits if d is not None)) if digits else 0
    else:
        with_units = _chinese_integer(integer)
        if with_units is None:
            return None
        whole = with_units
    value, place = 0.0, 0.1
    for ch in fraction:
        digit = _char_digit(ch)
        if digit is None:
            return None
        value += int(digit) * place
        place /= 10.0
    return float(whole) + value


def _chinese_integer(s: str) -> int | None:
    total = section = number = 0
    for ch in s:
        if ch in _CH_ALT_TENS:
            section += _CH_ALT_TENS[ch]
        elif ch in "零〇○":
            continue
        elif ch in _CH_DIGITS:
            number = _CH_DIGITS[ch]
        elif (digit := _char_digit(ch)) is not None:
            number = int(digit)
        elif ch in _CH_SMALL_UNITS:
            section += (number or 1) * _CH_SMALL_UNITS[ch]
            number = 0
        elif ch in _CH_LARGE_UNITS:
            total += (section + number) * _CH_LARGE_UNITS[ch]
            section = number = 0
        else:
            return None
    return total + section + number
