"""The offline evaluation harness: labeled data, metrics, a resumable runner, reports, the
`eval` commands and GEPA prompt optimisation (`optimize.py`, needs the `eval` extra).

```python
examples = load_labeled_examples("data/eval/dev.jsonl")
policies = {s.entry.policy_id: to_policy(s) for s in load_data_dir("data")}
summary = await run_eval(examples, policies, evaluate, out_dir=Path("runs/dev-heuristic"),
                         run_info={"controller": "heuristic", "dataset": "data/eval/dev.jsonl"})
print(render_comparison(compare_runs(Path("runs/a"), Path("runs/b"))))
```

Metric definitions are in `metrics.py`'s docstring.
"""

from reasoning_service.harness.datasets import (
    DatasetError,
    LabeledExample,
    ManifestEntry,
    PolicySource,
    load_data_dir,
    load_labeled_examples,
    load_trialgpt,
    to_policy,
)
from reasoning_service.harness.metrics import (
    EvalMetrics,
    compute_metrics,
    example_score,
    feedback_for,
)
from reasoning_service.harness.records import EvalRecord, EvalSummary, read_records
from reasoning_service.harness.report import (
    Comparison,
    compare_runs,
    render_comparison,
    render_report,
    write_report,
)
from reasoning_service.harness.runner import EvaluateFn, run_eval

__all__ = [
    "Comparison",
    "DatasetError",
    "EvalMetrics",
    "EvalRecord",
    "EvalSummary",
    "EvaluateFn",
    "LabeledExample",
    "ManifestEntry",
    "PolicySource",
    "compare_runs",
    "compute_metrics",
    "example_score",
    "feedback_for",
    "load_data_dir",
    "load_labeled_examples",
    "load_trialgpt",
    "read_records",
    "render_comparison",
    "render_report",
    "run_eval",
    "to_policy",
    "write_report",
]
