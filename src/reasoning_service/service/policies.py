"""Policy ingestion: a document (Markdown, PDF or PageIndex JSON) becomes a stored, indexed tree."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import json
import logging
from pathlib import Path

from reasoning_service.conditions import ConditionsLibrary
from reasoning_service.errors import InvalidInputError, NotFoundError, PolicyFormatError
from reasoning_service.models import CriteriaSet, Policy, PolicyUpload, SourceFormat
from reasoning_service.store import Store
from reasoning_service.tools.citations import find_quote
from retrieval.errors import TreeBuildError
from retrieval.markdown import build_tree_from_markdown
from retrieval.pageindex import tree_from_pageindex
from retrieval.pdf import build_tree_from_pdf
from retrieval.service import RetrievalService
from retrieval.tree import TreeNode, walk

logger = logging.getLogger(__name__)


class PolicyService:
    """Builds trees, checks criteria against the text, stores and indexes policies."""

    def __init__(
        self,
        store: Store,
        retrieval: RetrievalService,
        library: ConditionsLibrary | None = None,
    ) -> None:
        self._store = store
        self._retrieval = retrieval
        self._library = library or ConditionsLibrary()

    async def ingest(self, upload: PolicyUpload) -> Policy:
        """Index and store a policy; the same id and version uploaded again replaces it."""
        document, tree = _build_tree(upload)
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
        await self._store.save_policy(policy)
        await self._retrieval.index_policy(policy.policy_id, policy.tree)
        logger.info(
            "policy indexed", extra={"policy_id": policy.policy_id, "version": policy.version}
        )
        return policy

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
        `criteria/<policy_id>.json`. A policy already stored with the same sha256 is skipped.
        """
        manifest = json.loads((folder / "policies" / "manifest.json").read_text())
        added = []
        for entry in manifest["policies"]:
            text = (folder / "policies" / entry["file"]).read_text(encoding="utf-8")
            stored = await self._store.get_policy(entry["policy_id"], entry["version"])
            if stored and stored.sha256 == hashlib.sha256(text.encode()).hexdigest():
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
