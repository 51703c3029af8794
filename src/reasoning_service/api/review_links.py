"""Short-lived signed links to the reviewer's page, for a browser that cannot send a header.

`POST /v1/evaluations/{id}/review-link` (with an API key that may read the evaluation) returns
`/review/{id}?expires=<unix seconds>&sig=<hex>`, where `sig` is HMAC-SHA256 over the evaluation
id and the expiry with the app's link secret (`REASONING_REVIEW_LINK_SECRET`, else a random one
per process: links then stop working at a restart). A link works until it expires
(`REASONING_REVIEW_LINK_TTL_S`, 15 minutes by default) and only for that evaluation.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import re
from urllib.parse import quote, urlencode

from reasoning_service.errors import Unauthenticated

__all__ = ["check_review_link", "signed_review_path"]


def _signature(secret: bytes, evaluation_id: str, expires: int) -> str:
    message = f"{evaluation_id}\n{expires}".encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def signed_review_path(secret: bytes, evaluation_id: str, expires_at: dt.datetime) -> str:
    """`/review/{id}?expires=…&sig=…` for one evaluation until `expires_at`."""
    expires = int(expires_at.timestamp())
    query = urlencode({"expires": expires, "sig": _signature(secret, evaluation_id, expires)})
    return f"/review/{quote(evaluation_id, safe='')}?{query}"


def check_review_link(
    secret: bytes, evaluation_id: str, expires: int, sig: str, *, now: dt.datetime
) -> None:
    """Raise Unauthenticated unless `sig` signs this evaluation and `expires` has not passed."""
    well_formed = re.fullmatch(r"[0-9a-f]{64}", sig) is not None
    if not well_formed or not hmac.compare_digest(_signature(secret, evaluation_id, expires), sig):
        raise Unauthenticated("the review link is not valid for this evaluation")
    if now.timestamp() > expires:
        raise Unauthenticated("the review link has expired; ask for a new one")
