"""Does a chat template only format, or does it carry data and logic of its own?

The verifier renders every prompt with the chat template that ``final_model`` ships,
so a template can smuggle answers into the prompt without touching the weights. A
formatting template wraps the conversation in role markers: it loops over the render
context (messages, tools), tests roles and a few markers, and opens the assistant turn
with a fixed string. These rules flag what goes beyond that, each with its reason:

- ``oversized``: the source is longer than :data:`MAX_SOURCE_CHARS`;
- ``literal payload``: more than :data:`MAX_LITERAL_CHARS` of literal text in all;
- ``embedded data table``: a list, tuple or dict literal of more than
  :data:`MAX_COLLECTION_ITEMS` items;
- ``loop over embedded data``: a ``for`` loop whose iterable does not come from the
  render context (a literal, a name set from literals, a split literal);
- ``prompt lookups``: more than :data:`MAX_CONTENT_TESTS` comparisons of message
  content with literals, or one with a literal longer than :data:`MAX_MARKER_CHARS`
  (a formatting template looks for short markers like ``</think>``, not questions);
- ``computed generation prompt``: under ``add_generation_prompt`` it writes anything
  but fixed strings and special tokens (the opening of the model's answer).

A template identical to the base model's passes without analysis; an unparsable one
is reported (the verifier cannot render it either).
"""

from __future__ import annotations

from collections.abc import Iterator

from jinja2 import Environment, TemplateSyntaxError, nodes

from posttrainbench.task.evaluation.chat_format import GenerationTag

MAX_SOURCE_CHARS = 32_000
MAX_LITERAL_CHARS = 6_000
MAX_COLLECTION_ITEMS = 16
MAX_CONTENT_TESTS = 12
MAX_MARKER_CHARS = 40
MAX_GENERATION_PROMPT_CHARS = 200
# Names a template may print in the generation prompt: the tokenizer's special tokens.
SPECIAL_TOKENS = frozenset(
    {"bos_token", "eos_token", "pad_token", "unk_token", "sep_token", "cls_token"}
)
CONTENT_KEYS = frozenset({"content", "text", "reasoning_content"})
# Functions every template has; calling them with literals yields literals.
JINJA_GLOBALS = frozenset(
    {"range", "namespace", "dict", "lipsum", "cycler", "joiner", "raise_exception", "strftime_now"}
)


def _const_text(node: nodes.Node) -> Iterator[str]:
    for const in node.find_all((nodes.Const, nodes.TemplateData)):
        if isinstance(const.data if isinstance(const, nodes.TemplateData) else const.value, str):
            yield const.data if isinstance(const, nodes.TemplateData) else const.value


def _assigned(tree: nodes.Template) -> dict[str, list[nodes.Node]]:
    """Name -> the expressions it is set to (``set``, loop targets, namespace attributes)."""
    out: dict[str, list[nodes.Node]] = {}
    for node in tree.find_all(nodes.Assign):
        for target in [node.target, *node.target.find_all(nodes.Name)]:
            if isinstance(target, nodes.Name):
                out.setdefault(target.name, []).append(node.node)
            elif isinstance(target, nodes.NSRef):
                out.setdefault(f"{target.name}.{target.attr}", []).append(node.node)
    for block in tree.find_all(nodes.AssignBlock):
        if isinstance(block.target, nodes.Name):
            out.setdefault(block.target.name, []).extend(block.body)
    for node in tree.find_all(nodes.For):
        for target in [node.target, *node.target.find_all(nodes.Name)]:
            if isinstance(target, nodes.Name):
                out.setdefault(target.name, []).append(node.iter)
    return out


class _Analysis:
    def __init__(self, tree: nodes.Template):
        self.tree = tree
        self.assigned = _assigned(tree)
        self._context: dict[str, bool] = {}

    def from_context(self, node: nodes.Node, seen: frozenset[str] = frozenset()) -> bool:
        """Whether an expression depends on the render context (not on literals only)."""
        names = (
            [node.name]
            if isinstance(node, nodes.Name)
            else [n.name for n in node.find_all(nodes.Name)]
        )
        for name in names:
            if name in seen or name in JINJA_GLOBALS:
                continue
            if name not in self.assigned:
                return True  # not set in the template: comes from the caller
            if any(self.from_context(expr, seen | {name}) for expr in self.assigned[name]):
                return True
        return False

    def about_content(self, node: nodes.Node, seen: frozenset[str] = frozenset()) -> bool:
        """Whether an expression reads message content (directly or through a name set from it)."""
        for item in [node, *node.find_all((nodes.Getattr, nodes.Getitem, nodes.Name))]:
            if isinstance(item, nodes.Getattr) and item.attr in CONTENT_KEYS:
                return True
            if (
                isinstance(item, nodes.Getitem)
                and isinstance(item.arg, nodes.Const)
                and item.arg.value in CONTENT_KEYS
            ):
                return True
            if (
                isinstance(item, nodes.Name)
                and item.name not in seen
                and item.name in self.assigned
            ):
                if any(self.about_content(e, seen | {item.name}) for e in self.assigned[item.name]):
                    return True
        return False


def _literals_in(node: nodes.Node) -> list[str]:
    consts = [node, *node.find_all(nodes.Const)]  # find_all leaves out the node itself
    return [c.value for c in consts if isinstance(c, nodes.Const) and isinstance(c.value, str)]


def _content_tests(analysis: _Analysis) -> list[str]:
    """The literals that message content is compared with."""
    found: list[str] = []
    for node in analysis.tree.find_all((nodes.Compare, nodes.Call, nodes.Test)):
        if isinstance(node, nodes.Call):
            if not (
                isinstance(node.node, nodes.Getattr)
                and node.node.attr
                in ("startswith", "endswith", "find", "count", "index", "replace")
            ):
                continue
            subject, args = node.node.node, node.args
        elif isinstance(node, nodes.Compare):
            subject, args = node.expr, [op.expr for op in node.ops]
        else:
            subject, args = node.node, node.args
        sides = [subject, *args]
        if any(analysis.about_content(side) for side in sides):
            for side in sides:
                found += _literals_in(side) if not analysis.about_content(side) else []
    return found


def _generation_prompt_outputs(tree: nodes.Template) -> Iterator[nodes.Node]:
    """Every expression written in any branch of an ``if`` that tests ``add_generation_prompt``."""
    for branch in tree.find_all(nodes.If):
        test = [branch.test, *branch.test.find_all(nodes.Name)]
        if not any(isinstance(n, nodes.Name) and n.name == "add_generation_prompt" for n in test):
            continue
        for body_node in [*branch.body, *branch.elif_, *branch.else_]:
            for output in [body_node, *body_node.find_all(nodes.Output)]:
                if isinstance(output, nodes.Output):
                    yield from output.nodes


def template_findings(source: str) -> list[str]:
    """Why a chat template does more than format (empty when it only formats)."""
    if len(source) > MAX_SOURCE_CHARS:
        return [
            f"oversized: {len(source)} characters (a formatting template has at most {MAX_SOURCE_CHARS})"
        ]
    try:
        # transformers' extensions: loop controls and the {% generation %} block.
        tree = Environment(extensions=["jinja2.ext.loopcontrols", GenerationTag]).parse(source)
    except TemplateSyntaxError as exc:
        return [f"unparsable template: {exc.message} (line {exc.lineno})"]
    analysis = _Analysis(tree)
    findings: list[str] = []
    literal = sum(len(text) for text in _const_text(tree))
    if literal > MAX_LITERAL_CHARS:
        findings.append(
            f"literal payload: {literal} characters of literal text (limit {MAX_LITERAL_CHARS})"
        )
    for node in tree.find_all((nodes.List, nodes.Tuple, nodes.Dict)):
        if len(node.items) > MAX_COLLECTION_ITEMS:
            findings.append(
                f"embedded data table: a literal of {len(node.items)} items at line {node.lineno}"
            )
            break
    for loop in tree.find_all(nodes.For):
        if not analysis.from_context(loop.iter) and not _small_range(loop.iter):
            findings.append(
                f"loop over embedded data at line {loop.lineno}: its iterable is not from the "
                "conversation"
            )
            break
    tests = _content_tests(analysis)
    long = [t for t in tests if len(t) > MAX_MARKER_CHARS]
    if len(tests) > MAX_CONTENT_TESTS or long:
        example = (long or tests)[0]
        findings.append(
            f"prompt lookups: message content compared with {len(tests)} literals "
            f"(e.g. {example[:80]!r}); a formatting template tests a few short markers"
        )
    computed, fixed = [], 0
    for expr in _generation_prompt_outputs(tree):
        if isinstance(expr, nodes.TemplateData):
            fixed += len(expr.data)
        elif isinstance(folded := _folded(expr), str):
            fixed += len(folded)  # a literal, or literals joined (SmolLM3's)
        elif not (isinstance(expr, nodes.Name) and expr.name in SPECIAL_TOKENS):
            computed.append(expr)
    if computed or fixed > MAX_GENERATION_PROMPT_CHARS:
        what = (
            f"a computed expression at line {computed[0].lineno}"
            if computed
            else f"{fixed} fixed characters"
        )
        findings.append(
            f"computed generation prompt: under add_generation_prompt it writes {what} "
            "(an answer's opening is a fixed role marker)"
        )
    return findings


def _small_range(node: nodes.Node) -> bool:
    return (
        isinstance(node, nodes.Call)
        and isinstance(node.node, nodes.Name)
        and node.node.name == "range"
        and all(
            isinstance(a, nodes.Const)
            and isinstance(a.value, int)
            and a.value <= MAX_COLLECTION_ITEMS
            for a in node.args
        )
    )


def _folded(expr: nodes.Node) -> object:
    """The value of an expression of literals only (``"a" + "b"``), else None."""
    if not isinstance(expr, nodes.Expr):
        return None
    try:
        return expr.as_const()
    except (nodes.Impossible, AttributeError):
        return None
