"""Every tool schema the controller offers compiles into a llama.cpp grammar and samples.

llama.cpp turns a forced function's JSON schema into a grammar; a long `maxLength` or a regex
`pattern` made it fail ("failed to parse grammar") or crash the server, so this runs each schema
through the real runtime and model."""

from __future__ import annotations

import json

import pytest

from reasoning_service.conditions.atom_questions import answer_schema
from reasoning_service.llm.forced_tools import act_spec
from reasoning_service.llm.local_server import find_model, is_runtime_installed
from reasoning_service.settings import Settings
from reasoning_service.tools.executor import tool_specs
from reasoning_service.tools.tree_search import _SELECT

pytestmark = pytest.mark.local_llm
MODEL = find_model(Settings().models_dir, "qwen2.5-coder-0.5b")
SPECS = tool_specs()
SCHEMAS = {spec.name: spec.parameters for spec in SPECS} | {
    "act": act_spec(SPECS).parameters,
    "select_nodes": _SELECT.parameters,
    # The atom answer (response_format): the widest id set, sentences and facts.
    "atom_answer": answer_schema(["S1", "S2", "S3", "S4", "F1", "F2"]),
}


@pytest.fixture(scope="module")
def llama():
    if not is_runtime_installed() or MODEL is None:
        pytest.skip("llama.cpp runtime or model not installed (make setup-local)")
    from llama_cpp import Llama

    return Llama(str(MODEL), n_ctx=512, n_threads=2, verbose=False)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_the_schema_becomes_a_grammar_the_runtime_samples_from(llama, name):
    from llama_cpp import LlamaGrammar

    grammar = LlamaGrammar.from_json_schema(json.dumps(SCHEMAS[name]), verbose=False)
    text = llama.create_completion("JSON:", grammar=grammar, max_tokens=4)["choices"][0]["text"]
    assert text.startswith("{")
