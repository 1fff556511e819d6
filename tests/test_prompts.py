"""Every prompt the suite sends reads as intended once formatted.

LlamaIndex formats templates with a forgiving formatter that leaves unknown
``{...}`` spans as they are and does not unescape ``{{``: a template written
for ``str.format`` escaping would show doubled braces to the model.
"""

from __future__ import annotations

import importlib
import re

import pytest
from llama_index.core.prompts import BasePromptTemplate

MODULES = (
    "llama_index_graphrag_ext.core.prompts",
    "llama_index_graphrag_ext.qcg.prompts",
    "llama_index_graphrag_ext.cue.prompts",
    "llama_index_graphrag_ext.chainrag.prompts",
    "llama_index_graphrag_ext.fgrag.prompts",
    "llama_index_graphrag_ext.lprag.prompts",
)


def templates():
    for name in MODULES:
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if isinstance(value, BasePromptTemplate):
                yield pytest.param(value, id=f"{name.rsplit('.', 2)[-2]}.{attr}")


@pytest.mark.parametrize("template", list(templates()))
def test_formatted_prompt_has_no_escaped_braces_or_unfilled_variables(template):
    values = {var: f"<{var}>" for var in template.template_vars}
    text = template.format(**values)
    assert "{{" not in text  # (valid JSON can end "}}" but never holds "{{")
    for var in template.template_vars:
        if re.fullmatch(r"\w+", var):  # a real variable, not a JSON example's key
            assert f"{{{var}}}" not in text and f"<{var}>" in text
