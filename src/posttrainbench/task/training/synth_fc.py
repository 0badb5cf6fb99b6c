"""Seeded synthetic function-calling data (no benchmark test data involved).

Each example invents a function schema in BFCL's JSON style (typed params: integers,
floats, strings, booleans, arrays; optional params), a natural-language request that
mentions the values, and the target answer in the hermes tool-call format that
PostTrainBench's BFCL run parses (vLLM's ``hermes`` parser)::

    <tool_call>
    {"name": "func", "arguments": {"a": 1, "b": "x"}}
    </tool_call>

the layout the forced chat templates ask for (qwen3.jinja, smollm.jinja). Names and
phrasings come from small hand-written vocabularies below, not from any benchmark file.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

VERBS = {
    "calculate": "Calculate",
    "compute": "Compute",
    "get": "Get",
    "find": "Find",
    "estimate": "Estimate",
    "fetch": "Fetch",
    "search": "Search for",
    "convert": "Convert",
    "predict": "Predict",
    "check": "Check",
    "generate": "Generate",
    "analyze": "Analyze",
    "lookup": "Look up",
    "book": "Book",
    "list": "List",
    "count": "Count",
}
OBJECTS = [
    "loan_payment",
    "travel_time",
    "weather_forecast",
    "stock_price",
    "recipe",
    "hotel",
    "flight",
    "population",
    "average_score",
    "distance",
    "tax",
    "calories",
    "route",
    "movie",
    "book_rating",
    "exchange_rate",
    "interest",
    "volume",
    "area",
    "speed",
    "energy",
    "event",
    "restaurant",
    "playlist",
    "shipping_cost",
    "salary",
    "discount",
    "rainfall",
    "elevation",
    "gene_sequence",
    "probability",
    "median",
    "force",
    "museum_hours",
    "concert",
    "vaccine_stock",
    "air_quality",
    "sales_report",
    "lyrics",
]
MODULES = ["", "", "", "math.", "finance.", "geo.", "weather.", "stats.", "physics.", "travel."]

CITIES = [
    "Paris",
    "Tokyo",
    "New York",
    "Berlin",
    "Cairo",
    "Lima",
    "Sydney",
    "Toronto",
    "Mumbai",
    "Oslo",
    "Austin",
    "Nairobi",
]
COUNTRIES = ["France", "Japan", "Brazil", "Canada", "India", "Kenya", "Spain", "Mexico", "Norway"]
PEOPLE = ["Alice", "Bob Smith", "Maria Garcia", "Chen Wei", "Omar", "John Doe", "Priya Patel"]
WORDS = {
    "genre": ["jazz", "comedy", "thriller", "rock", "drama", "pop"],
    "unit": ["meters", "kilograms", "celsius", "miles", "liters", "seconds"],
    "currency": ["USD", "EUR", "JPY", "GBP", "INR"],
    "category": ["electronics", "books", "sports", "garden", "toys"],
    "language": ["English", "Spanish", "German", "Hindi", "French"],
    "ticker": ["AAPL", "MSFT", "TSLA", "AMZN", "NVDA"],
    "cuisine": ["Italian", "Thai", "Mexican", "Indian", "Greek"],
    "sort_order": ["ascending", "descending"],
    "mode": ["walking", "driving", "cycling", "transit"],
    "company": ["Google", "Apple", "Tesla", "Amazon", "Netflix"],
}


@dataclass(frozen=True)
class ParamKind:
    name: str
    type: str
    desc: str
    sample: Callable[[random.Random], Any]
    items: str | None = None


def _int(lo: int, hi: int) -> Callable[[random.Random], int]:
    return lambda r: r.randint(lo, hi)


def _float(lo: float, hi: float, nd: int = 2) -> Callable[[random.Random], float]:
    return lambda r: round(r.uniform(lo, hi), nd)


def _choice(options: list) -> Callable[[random.Random], Any]:
    return lambda r: r.choice(options)


def _list(
    sampler: Callable[[random.Random], Any], unique: bool = True
) -> Callable[[random.Random], list]:
    def f(r: random.Random) -> list:
        out: list = []
        for _ in range(r.randint(2, 4)):
            v = sampler(r)
            if not (unique and v in out):
                out.append(v)
        return out

    return f


PARAMS = [
    ParamKind("amount", "integer", "The amount of money.", _int(100, 50000)),
    ParamKind("years", "integer", "Number of years.", _int(1, 30)),
    ParamKind("count", "integer", "How many results to return.", _int(1, 20)),
    ParamKind("year", "integer", "The year.", _int(1950, 2024)),
    ParamKind("age", "integer", "Age in years.", _int(1, 90)),
    ParamKind("days", "integer", "Number of days.", _int(1, 14)),
    ParamKind("radius", "integer", "The radius.", _int(1, 50)),
    ParamKind("number", "integer", "The input number.", _int(2, 500)),
    ParamKind("quantity", "integer", "Number of items.", _int(1, 12)),
    ParamKind("width", "integer", "The width.", _int(2, 300)),
    ParamKind("rate", "float", "The rate as a decimal.", _float(0.01, 0.2, 3)),
    ParamKind("price", "float", "The price.", _float(1, 900, 2)),
    ParamKind("weight", "float", "The weight in kilograms.", _float(0.5, 120, 1)),
    ParamKind("distance", "float", "The distance in kilometers.", _float(0.5, 500, 1)),
    ParamKind("temperature", "float", "The temperature.", _float(-20, 45, 1)),
    ParamKind("probability", "float", "A probability between 0 and 1.", _float(0.05, 0.95, 2)),
    ParamKind("city", "string", "The city name.", _choice(CITIES)),
    ParamKind("country", "string", "The country.", _choice(COUNTRIES)),
    ParamKind("name", "string", "The person's name.", _choice(PEOPLE)),
    ParamKind(
        "start_date",
        "string",
        "Date in YYYY-MM-DD format.",
        lambda r: f"20{r.randint(20, 26)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}",
    ),
    *[ParamKind(k, "string", f"The {k.replace('_', ' ')}.", _choice(v)) for k, v in WORDS.items()],
    ParamKind("include_details", "boolean", "Whether to include details.", _choice([True, False])),
    ParamKind("round_result", "boolean", "Whether to round the result.", _choice([True, False])),
    ParamKind(
        "numbers", "array", "A list of numbers.", _list(_int(1, 99), unique=False), "integer"
    ),
    ParamKind(
        "values",
        "array",
        "A list of decimal values.",
        _list(_float(0.1, 50, 1), unique=False),
        "float",
    ),
    ParamKind("cities", "array", "List of city names.", _list(_choice(CITIES)), "string"),
    ParamKind(
        "tags", "array", "List of keywords.", _list(_choice(sum(WORDS.values(), []))), "string"
    ),
]


def _words(name: str) -> str:
    return name.replace("_", " ")


def _mention(r: random.Random, p: ParamKind, v: Any) -> str:
    w = _words(p.name)
    if p.type == "boolean":
        return r.choice([f"with {w} set to {str(v).lower()}", f"{w}: {'yes' if v else 'no'}"])
    if p.type == "array":
        items = [str(x) for x in v]
        joined = ", ".join(items[:-1]) + " and " + items[-1]
        return r.choice([f"for the {w} {joined}", f"using {w} [{', '.join(items)}]"])
    if p.type == "string":
        if p.name in ("city", "country"):
            return r.choice([f"in {v}", f"for {v}"])
        return r.choice([f"with {w} {v}", f"where the {w} is {v}", f"for {w} '{v}'"])
    return r.choice([f"with a {w} of {v}", f"where {w} is {v}", f"for {v} {w}", f"{w} = {v}"])


def make_example(r: random.Random) -> dict:
    """One example: ``functions`` (BFCL-style JSON), ``question`` turns, ``answer`` text."""
    verb = r.choice(list(VERBS))
    obj = r.choice(OBJECTS)
    fname = r.choice(MODULES) + f"{verb}_{obj}"
    kinds = r.sample(PARAMS, r.randint(1, 4))
    required = [p for p in kinds if r.random() < 0.7] or kinds[:1]
    props: dict[str, dict] = {}
    for p in kinds:
        spec: dict[str, Any] = {"type": p.type, "description": p.desc}
        if p.items:
            spec["items"] = {"type": p.items}
        if p not in required:
            spec["description"] += " Optional."
        props[p.name] = spec
    function = {
        "name": fname,
        "description": f"{VERBS[verb]} the {_words(obj)}.",
        "parameters": {"type": "dict", "properties": props, "required": [p.name for p in required]},
    }
    used = [p for p in kinds if p in required or r.random() < 0.5]
    values = {p.name: p.sample(r) for p in used}
    mentions = [_mention(r, p, values[p.name]) for p in used]
    r.shuffle(mentions)
    lead = r.choice(
        [
            f"{VERBS[verb]} the {_words(obj)}",
            f"Can you {VERBS[verb].lower()} the {_words(obj)}",
            f"I need to {VERBS[verb].lower()} the {_words(obj)}",
            f"Please {VERBS[verb].lower()} the {_words(obj)}",
        ]
    )
    text = (
        lead
        + " "
        + ", ".join(mentions[:-1])
        + (" and " if len(mentions) > 1 else "")
        + mentions[-1]
    )
    text += "?" if lead.startswith("Can") else "."
    args = {p.name: values[p.name] for p in kinds if p.name in values}
    return {
        "functions": [function],
        "question": [{"role": "user", "content": text}],
        "answer": tool_call_text(fname, args),
    }


def tool_call_text(name: str, arguments: dict[str, Any]) -> str:
    """One call as the hermes format writes it (what vLLM's hermes parser extracts)."""
    call = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>\n{call}\n</tool_call>"


def make_dataset(n: int, seed: int = 0) -> list[dict]:
    r = random.Random(seed)
    return [make_example(r) for _ in range(n)]
