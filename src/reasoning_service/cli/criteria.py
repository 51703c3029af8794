"""`reasoning-service criteria draft`: the configured LLM proposes `conditions` for a reviewer.

One request per criterion (its text, quote, section and the policy text around the quote, plus
the schema in compact form); the reply must be JSON. Each proposal is validated with the
`Conditions` schema; an invalid one is sent back once with the validation error. Criteria whose
proposal is still invalid are written without conditions and listed on stderr. The draft goes
to `--out`, never over an input file: a clinician reviews it (docs/conditions.md).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from reasoning_service.errors import ConfigError, InvalidInputError
from reasoning_service.llm.base import LLMClient
from reasoning_service.llm.factory import build_llm_client
from reasoning_service.models import LLMRequest, Message
from reasoning_service.models.conditions import Conditions
from reasoning_service.settings import Settings
from retrieval.markdown import build_tree_from_markdown
from retrieval.tree import walk

__all__ = ["DRAFT_PROMPT", "add_criteria_commands", "draft_conditions", "run_criteria"]

DRAFT_PROMPT = """\
You turn one criterion of a medical coverage policy into checkable conditions (JSON).
Reply with one JSON object {"conditions": {...}} and nothing else.

conditions: {"applies_if": node|null, "when_applicability_unknown": "evaluate"|"not_applicable",
"require": node}. applies_if: the situation the criterion is restricted to ("for continued
coverage"); require: what must hold for the criterion to be met.
node: {"all_of": [node, ...]} | {"any_of": [node, ...]} | {"not": node} | atom.
Every atom has "kind", "id" ([a-z][a-z0-9_]*, unique in the criterion), "label" (one short
statement), "concept", "aliases" (abbreviations, spellings, lay terms, fact field names) and
optionally "question" (a narrow yes/no question; yes = the atom holds).
kinds:
- "quantity": "comparator" (">=", ">", "<=", "<", "=="), "value" (number), "unit" (pint:
  percent, kg/m**2, kg, year, hour, event/hour, count, mmHg); optional "derive"
  {"formula": "weight / height ** 2", "inputs": {"weight": {"concept", "aliases", "unit"}}},
  "select" ("all" | "latest"), "not_when" [words right before the name that mark another
  measurement, e.g. "residual", "goal"].
- "finding": "expect" ("present" | "absent"), optional "denied_by" [broader names whose denial
  covers it, e.g. "no surgical history"], "topic" [words one of which must share the sentence
  for a mention to count], "not_when" [words right before the name that mark another thing].
- "time_window": "relation" ("within" | "at_least" | "between" with "amount_max"), "amount",
  "unit" ("days" | "weeks" | "months" | "years"), optional "reference" {"concept", "aliases"}.
- "category": "values" {value: [words that name it]}, "allowed" [values], optional
  "min_count", "value_anywhere", "in_documents_naming" [words a document must name for
  its text to count, e.g. the ordered treatment for an "ordering physician"],
  "author_of_documents_naming" [words of the note whose signer is the concept, e.g. "ordered"
  for an "ordering physician"], "not_when" [words right before the name that mark another
  person or thing, e.g. "supervising"].
Thresholds and comparators exactly as written; every conjunct an atom of its own; negations
as "expect": "absent" or "not"."""
RETRY_PROMPT = (
    "That JSON does not fit the schema: {error}\n"
    'Reply with the corrected {{"conditions": {{...}}}} object only.'
)
_EXCERPT_CHARS = 1500
_DRAFT_OUTPUT_TOKENS = 2000
_JSON_OBJECT = re.compile(r"\{.*\}", re.S)


def add_criteria_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register `criteria draft`."""
    parser = commands.add_parser("criteria", help="author criteria conditions")
    sub = parser.add_subparsers(dest="criteria_command", required=True)
    draft = sub.add_parser("draft", help="ask the configured LLM to draft conditions")
    draft.add_argument("policy", type=Path, help="policy document (.md)")
    draft.add_argument("--criteria", type=Path, required=True, help="criteria set JSON")
    draft.add_argument("--out", type=Path, required=True, help="where to write the draft")
    draft.add_argument("--policy-id", help="policy id of the draft (default: the criteria's)")


async def run_criteria(settings: Settings, args: argparse.Namespace) -> int:
    """Run `criteria draft` with the LLM the settings configure.

    Raises:
        ConfigError: no LLM provider is configured.
        InvalidInputError: `--out` names an input file.
    """
    for source in (args.policy, args.criteria):
        if args.out.resolve() == source.resolve():
            raise InvalidInputError(f"--out {args.out} would overwrite the input {source}")
    policy_text = args.policy.read_text(encoding="utf-8")
    criteria = json.loads(args.criteria.read_text(encoding="utf-8"))
    llm = build_llm_client(settings)
    if llm is None:
        raise ConfigError("criteria draft needs an LLM: set REASONING_LLM_PROVIDER")
    try:
        drafted, problems = await draft_conditions(llm, policy_text, criteria)
    finally:
        await llm.aclose()
    if args.policy_id:
        drafted["policy_id"] = args.policy_id
    args.out.write_text(json.dumps(drafted, indent=1, ensure_ascii=False) + "\n", "utf-8")
    for criterion_id, error in problems.items():
        print(f"{criterion_id}: no valid conditions: {error}", file=sys.stderr)
    total = len(drafted.get("criteria", []))
    print(
        f"drafted conditions for {total - len(problems)} of {total} criteria into {args.out}; "
        "review every atom against the policy text before use",
        file=sys.stderr,
    )
    return 0


async def draft_conditions(
    llm: LLMClient, policy_text: str, criteria: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, str]]:
    """The criteria set with proposed conditions, and the error of each criterion left without.

    Criteria are asked one at a time, in order; other keys of the set are kept as they are."""
    excerpts = [node.text for node in walk(build_tree_from_markdown(policy_text))]
    drafted: list[dict[str, Any]] = []
    problems: dict[str, str] = {}
    for criterion in criteria.get("criteria", []):
        conditions, error = await _draft_one(llm, criterion, excerpts)
        updated = {key: value for key, value in criterion.items() if key != "conditions"}
        if conditions is not None:
            updated["conditions"] = conditions.model_dump(
                mode="json", by_alias=True, exclude_defaults=True
            )
        else:
            problems[str(criterion.get("criterion_id", "?"))] = error
        drafted.append(updated)
    return {**criteria, "criteria": drafted}, problems


async def _draft_one(
    llm: LLMClient, criterion: dict[str, Any], excerpts: list[str]
) -> tuple[Conditions | None, str]:
    quote = str(criterion.get("quote", ""))
    excerpt = next((text for text in excerpts if quote and quote in text), "")
    task = {
        "criterion_id": criterion.get("criterion_id"),
        "text": criterion.get("text"),
        "section": criterion.get("section", ""),
        "quote": quote,
        "policy_text": excerpt[:_EXCERPT_CHARS],
    }
    messages = [
        Message(role="system", content=DRAFT_PROMPT),
        Message(role="user", content=json.dumps(task, ensure_ascii=False)),
    ]
    error = ""
    for attempt in range(2):
        request = LLMRequest(messages=tuple(messages), max_output_tokens=_DRAFT_OUTPUT_TOKENS)
        reply = await llm.complete(request)
        conditions, error = parse_conditions(reply.content)
        if conditions is not None or attempt == 1:
            break
        messages += [
            Message(role="assistant", content=reply.content),
            Message(role="user", content=RETRY_PROMPT.format(error=error)),
        ]
    return conditions, error


def parse_conditions(content: str) -> tuple[Conditions | None, str]:
    """A reply's `{"conditions": …}` (or bare conditions) validated, else None and why."""
    found = _JSON_OBJECT.search(content or "")
    if found is None:
        return None, "the reply has no JSON object"
    try:
        value = json.loads(found.group(0))
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc}"
    if isinstance(value, dict) and "conditions" in value:
        value = value["conditions"]
    try:
        return Conditions.model_validate(value), ""
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}"
            for e in exc.errors(include_url=False)[:5]
        )
        return None, problems
