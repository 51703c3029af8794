"""Errors the retrieval package raises on purpose.

```
ValueError
└── TreeBuildError    a document or tree JSON could not be turned into a policy tree
```
"""


class TreeBuildError(ValueError):
    """A policy document or PageIndex JSON could not be turned into a tree; the message says why."""
