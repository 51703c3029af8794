"""Free text from users or an LLM turned into a safe FTS5 MATCH expression.

Only word tokens survive, each double-quoted, so no FTS5 operator, column filter or unbalanced
quote from the input can reach SQLite: the expression cannot have a syntax error.
"""

import re

MAX_QUERY_TOKENS = 32
"""Longer queries keep their first distinct tokens; more add cost, not precision."""

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_STOPWORD_TEXT = """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself nor now of off on once only or other our ours ourselves
    out over own same she should so some such than that the their theirs them themselves then
    there these they this those through to too under until up very was we were what when where
    which while who whom why will with would you your yours yourself yourselves
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def to_query_tokens(query: str) -> list[str]:
    """Distinct lower-cased word tokens of `query`, stopwords dropped, in order."""
    tokens: list[str] = []
    for token in _TOKEN.findall(query.lower()):
        if token not in _STOPWORDS and token not in tokens:
            tokens.append(token)
    return tokens[:MAX_QUERY_TOKENS]


def to_match_expression(query: str) -> str | None:
    """`"t1" OR "t2" …` for the query's tokens, or None when nothing searchable is left."""
    tokens = to_query_tokens(query)
    if not tokens:
        return None
    return " OR ".join(f'"{token}"' for token in tokens)
