"""Policy ingestion: a document (Markdown, PDF or PageIndex JSON) becomes a stored, indexed tree.

A stored version is immutable: the same id and version uploaded again with the same document
(sha256) and the same criteria returns the stored policy; with anything else it is a
`ConflictError` (409). The bundled examples seeded at start-up follow the same rule, except that
a difference is a logged warning and the stored version is kept. Trees are bounded (node count
and depth, `TreeLimits`) so no document can stall indexing.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from reasoning_service.conditions import ConditionsLibrary
from reasoning_service.errors import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    PolicyFormatError,
)
from reasoning_service.models import CriteriaSet, Policy, PolicyUpload, SourceFormat
from reasoning_service.store import Store
from reasoning_service.tools.citations import find_quote
from retrieval.errors import TreeBuildError
from retrieval.markdown import build_tree_from_markdown
from retrieval.pageindex import tree_from_pageindex
from retrieval.pdf import build_tree_from_pdf
from retrieval.service import RetrievalService
from retrieval.tree import TreeNode, measure, walk

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TreeLimits:
    """Bounds on one policy tree (REASONING_MAX_POLICY_NODES, REASONING_MAX_POLICY_DEPTH)."""

    max_nodes: int = 5000
    max_depth: int = 32


@dataclass(frozen=True)
class Ingested:
    """An uploaded policy as stored; `created` is False when that exact version was there."""

    policy: Policy
    created: bool


class PolicyService:
    """Builds trees, checks criteria against the text, stores and indexes policies."""

    def __init__(
        self,
        store: Store,
        retrieval: RetrievalService,
        library: ConditionsLibrary | None = None,
        *,
        limits: TreeLimits | None = None,
    ) -> None:
        self._store = store
        self._retrieval = retrieval
        self._library = library or ConditionsLibrary()
        self._limits = limits or TreeLimits()

    async def ingest(self, upload: PolicyUpload) -> Ingested:
        """Index and store a new policy version, or return the identical stored one.

        Raises:
            ConflictError: this id and version are stored with another document or criteria.
            InvalidInputError, PolicyFormatError: the upload cannot be indexed.
        """
        document, tree = _build_tree(upload)
        _check_tree(tree, self._limits)
        criteria = upload.criteria
        if criteria is not None:
            _check_criteria(upload.policy_id, criteria, tree)
            criteria = self._library.attach(criteria)
        policy = Policy(
            policy_id=upload.policy_id,
            version=upload.version,
            sha256=hashlib.sha256(document).hexdigest(),
            title=upload.title or (tree[0].title if tree else upload.policy_id),
            source_format=upload.source_format,
            source_url=upload.source_url,
            license=upload.license,
            created_at=dt.datetime.now(dt.UTC),
            tree=tree,
            criteria=criteria,
            criteria_count=len(criteria.criteria) if criteria else 0,
        )
        stored = await self._store.get_policy(policy.policy_id, policy.version)
        if stored is None and await self._store.save_policy(policy):
            await self._retrieval.index_policy(policy.policy_id, policy.tree)
            logger.info(
                "policy indexed", extra={"policy_id": policy.policy_id, "version": policy.version}
            )
            return Ingested(policy, created=True)
        stored = stored or await self._store.get_policy(policy.policy_id, policy.version)
        assert stored is not None  # save_policy found it stored
        _check_same(stored, policy)
        return Ingested(stored, created=False)

    def with_reviewed_conditions(self, policy: Policy) -> Policy:
        """`policy` with the reviewed conditions of criteria that carry none of their own."""
        if policy.criteria is None:
            return policy
        return policy.model_copy(update={"criteria": self._library.attach(policy.criteria)})

    async def get(self, policy_id: str, version: str | None = None) -> Policy:
        """The stored policy, latest version unless one is named."""
        policy = await self._store.get_policy(policy_id, version)
        if policy is None:
            suffix = f" version {version!r}" if version else ""
            raise NotFoundError(f"policy {policy_id!r}{suffix} is not known")
        return self.with_reviewed_conditions(policy)

    async def index_stored(self) -> int:
        """Rebuild the search index from the store (it lives in memory); returns the count."""
        summaries = await self._store.list_policies()
        for summary in summaries:
            policy = await self.get(summary.policy_id, summary.version)
            await self._retrieval.index_policy(policy.policy_id, policy.tree)
        return len(summaries)

    async def seed_from_folder(self, folder: Path) -> list[str]:
        """Ingest the policies of a folder laid out like `examples/` that are not stored yet.

        The folder holds `policies/manifest.json` with the Markdown files beside it and
        `criteria/<policy_id>.json`. A version already stored is never replaced: when its text
        differs from the folder's, a warning is logged and the stored one is kept.
        """
        manifest = json.loads((folder / "policies" / "manifest.json").read_text())
        added = []
        for entry in manifest["policies"]:
            text = (folder / "policies" / entry["file"]).read_text(encoding="utf-8")
            stored = await self._store.get_policy(entry["policy_id"], entry["version"])
            if stored is not None:
                if stored.sha256 != hashlib.sha256(text.encode()).hexdigest():
                    logger.warning(
                        "bundled policy differs from the stored version; keeping the stored one",
                        extra={"policy_id": stored.policy_id, "version": stored.version},
                    )
                continue
            criteria_path = folder / "criteria" / f"{entry['policy_id']}.json"
            criteria = (
                CriteriaSet.model_validate_json(criteria_path.read_text())
                if criteria_path.exists()
                else None
            )
            await self.ingest(
                PolicyUpload(
                    policy_id=entry["policy_id"],
                    version=entry["version"],
                    title=entry.get("title"),
                    source_format=SourceFormat.MARKDOWN,
                    content=text,
                    source_url=entry.get("source_url"),
                    license=entry.get("license"),
                    criteria=criteria,
                )
            )
            added.append(entry["policy_id"])
        return added


def _build_tree(upload: PolicyUpload) -> tuple[bytes, list[TreeNode]]:
    """Return the document's bytes (what sha256 covers) and its tree."""
    content = upload.content
    try:
        match upload.source_format:
            case SourceFormat.MARKDOWN:
                if not isinstance(content, str) or not content.strip():
                    raise InvalidInputError("content: Markdown policies need non-empty text")
                return content.encode("utf-8"), build_tree_from_markdown(content)
            case SourceFormat.PDF:
                if not isinstance(content, str):
                    raise InvalidInputError("content: PDF policies are sent as base64 text")
                data = _decode_base64(content)
                return data, build_tree_from_pdf(data)
            case SourceFormat.PAGEINDEX:
                if isinstance(content, str):
                    content = _parse_json(content)
                canonical = json.dumps(content, sort_keys=True, separators=(",", ":"))
                return canonical.encode("utf-8"), tree_from_pageindex(content)
    except TreeBuildError as exc:
        raise PolicyFormatError(f"content: {exc}") from exc
    raise InvalidInputError(f"source_format: unsupported {upload.source_format!r}")


def _check_tree(tree: list[TreeNode], limits: TreeLimits) -> None:
    count, depth = measure(tree)
    if count > limits.max_nodes:
        raise PolicyFormatError(
            f"content: the tree has more than {limits.max_nodes} sections "
            "(REASONING_MAX_POLICY_NODES)"
        )
    if depth > limits.max_depth:
        raise PolicyFormatError(
            f"content: the tree is nested more than {limits.max_depth} levels deep "
            "(REASONING_MAX_POLICY_DEPTH)"
        )


def _check_same(stored: Policy, upload: Policy) -> None:
    """A stored version may be uploaded again only unchanged: same document, same criteria."""
    name = f"policy {stored.policy_id!r} version {stored.version!r}"
    if stored.sha256 != upload.sha256:
        raise ConflictError(
            f"{name} is stored with another document (sha256 {stored.sha256}); "
            "a stored version never changes: upload it as a new version"
        )
    if _criteria_json(stored.criteria) != _criteria_json(upload.criteria):
        raise ConflictError(
            f"{name} is stored with other criteria; a stored version never changes: "
            "upload it as a new version"
        )


def _criteria_json(criteria: CriteriaSet | None) -> object:
    return criteria.model_dump(mode="json") if criteria is not None else None


def _decode_base64(content: str) -> bytes:
    try:
        return base64.b64decode(content, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidInputError("content: not valid base64") from exc


def _parse_json(content: str) -> dict | list:
    try:
        return json.loads(content)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"content: not valid PageIndex JSON ({exc.msg})") from exc


def _check_criteria(policy_id: str, criteria: CriteriaSet, tree: list[TreeNode]) -> None:
    """Criteria must belong to this policy and quote text the policy really contains."""
    if criteria.policy_id != policy_id:
        raise InvalidInputError(
            f"criteria.policy_id: {criteria.policy_id!r} does not match policy_id {policy_id!r}"
        )
    texts = [node.text for node in walk(tree)]
    unquoted = [
        c.criterion_id
        for c in criteria.criteria
        if c.quote and not any(find_quote(text, c.quote) for text in texts)
    ]
    if unquoted:
        raise InvalidInputError(
            f"criteria: the quote of {', '.join(unquoted)} is not found in the policy text"
        )
