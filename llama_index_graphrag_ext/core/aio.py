"""Async index writes that never block the caller's event loop.

Building is CPU work whose LLM calls already run on the suite's own loop, so the
async twins run the sync method in a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from llama_index.core.schema import BaseNode, Document

__all__ = ["OffLoopWrites"]


class OffLoopWrites:
    """Mixin placed before a LlamaIndex index class: ``ainsert`` and friends off the loop."""

    insert: Any
    insert_nodes: Any
    delete_ref_doc: Any
    delete_nodes: Any

    async def ainsert(self, document: Document, **insert_kwargs: Any) -> None:
        """Async :meth:`insert` (runs off the caller's event loop)."""
        await asyncio.to_thread(self.insert, document, **insert_kwargs)

    async def ainsert_nodes(self, nodes: Sequence[BaseNode], **insert_kwargs: Any) -> None:
        """Async :meth:`insert_nodes` (runs off the caller's event loop)."""
        await asyncio.to_thread(self.insert_nodes, nodes, **insert_kwargs)

    async def adelete_ref_doc(
        self, ref_doc_id: str, delete_from_docstore: bool = True, **kwargs: Any
    ) -> None:
        """Async :meth:`delete_ref_doc` (runs off the caller's event loop)."""
        await asyncio.to_thread(
            self.delete_ref_doc, ref_doc_id, delete_from_docstore=delete_from_docstore, **kwargs
        )

    async def adelete_nodes(
        self, node_ids: list[str], delete_from_docstore: bool = False, **kwargs: Any
    ) -> None:
        """Async :meth:`delete_nodes` (runs off the caller's event loop)."""
        await asyncio.to_thread(
            self.delete_nodes, node_ids, delete_from_docstore=delete_from_docstore, **kwargs
        )
