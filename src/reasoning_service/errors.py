"""Every exception the service raises on purpose.

The tree follows what the caller can do about it::

    ReasoningError
    ├── LLMError(provider, model, status, retry_after_s)
    │   ├── TransientLLMError      retried: RateLimited (429), ProviderUnavailable (408/409/5xx/529,
    │   │                          overloaded mid-stream), LLMTimeout, LLMConnectionError
    │   └── PermanentLLMError      fail fast: AuthFailed (401/403), ModelNotFound (404),
    │                              BadLLMRequest (400), QuotaExhausted (429 insufficient_quota),
    │                              ContentRefused
    ├── NotFoundError              a policy, criterion or evaluation that does not exist (404)
    ├── InvalidInputError          a request the caller must fix (422)
    ├── PolicyFormatError          a policy document that cannot be indexed (422)
    ├── ConflictError              a stored policy version or an idempotency key that may not
    │                              change (409)
    ├── AuthError                  Unauthenticated (401: no or unknown API key),
    │                              Forbidden (403: the key may not do this)
    ├── Overloaded(retry_after_s)  too many evaluations at once: try again later (503)
    ├── StoreError                 the database failed; nothing half-written was kept
    └── ConfigError                a bug or a bad deployment: never retried, never a fallback
"""

from __future__ import annotations


class ReasoningError(Exception):
    """Base of every exception raised on purpose by this service."""


class LLMError(ReasoningError):
    """A provider call failed; `status` is the HTTP status when there was one."""

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        model: str,
        status: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.model = model
        self.status = status
        self.retry_after_s = retry_after_s

    @property
    def kind(self) -> str:
        """`transient` or `permanent`: the label used in metrics and interaction records."""
        return "transient" if isinstance(self, TransientLLMError) else "permanent"


class TransientLLMError(LLMError):
    """Worth retrying: the same request may succeed later."""


class RateLimited(TransientLLMError):
    """HTTP 429 that is not a quota problem."""


class ProviderUnavailable(TransientLLMError):
    """408, 409, 5xx, Anthropic 529, or an `overloaded_error` in a stream."""


class LLMTimeout(TransientLLMError):
    """The provider did not answer within the configured timeout."""


class LLMConnectionError(TransientLLMError):
    """The provider could not be reached."""


class PermanentLLMError(LLMError):
    """Retrying the same request cannot help."""


class AuthFailed(PermanentLLMError):
    """401 or 403: the key is missing, wrong or lacks permission."""


class ModelNotFound(PermanentLLMError):
    """404: the configured model does not exist at this provider."""


class BadLLMRequest(PermanentLLMError):
    """400: schema, context length or server misconfiguration (e.g. a tool-parser error)."""


class QuotaExhausted(PermanentLLMError):
    """429 with `insufficient_quota`: billing, not load."""


class ContentRefused(PermanentLLMError):
    """The provider refused to produce content for this request."""


class NotFoundError(ReasoningError):
    """A named policy, criterion or evaluation does not exist."""


class InvalidInputError(ReasoningError):
    """The request is well-formed JSON but cannot be evaluated as it is."""


class PolicyFormatError(ReasoningError):
    """A policy document could not be turned into a tree."""


class ConflictError(ReasoningError):
    """The request contradicts what is already stored (a policy version, an idempotency key)."""


class AuthError(ReasoningError):
    """The caller may not do this; the message says what to send instead (never the key)."""


class Unauthenticated(AuthError):
    """No API key, a malformed header, or a key that is not (or no longer) known: 401."""


class Forbidden(AuthError):
    """A known key without the right: another key's evaluation, or an admin-only route: 403."""


class Overloaded(ReasoningError):
    """The service is running as many evaluations as it may and its wait queue is full (or the
    wait ran out); `retry_after_s` is when a slot is likely free (service/admission.py)."""

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class StoreError(ReasoningError):
    """The store failed; the transaction was rolled back."""


class ConfigError(ReasoningError):
    """The deployment is misconfigured: never retried and never a reason to fall back."""
