"""Everything the suite does with LLMs, split by concern.

| module | what it gives |
|---|---|
| :mod:`.resolve` | the one rule that picks a component's LLM; tiers; what an LLM can do |
| :mod:`.steps` | each component's step ledger: LLM and tier per step, fallbacks counted, ``on_llm_failure`` |
| :mod:`.settings` | the settings every LLM-using component shares (concurrency, retries, time-out, cache, ``on_llm_failure``) |
| :mod:`.calls` (:mod:`.structured`, :mod:`.streams`, :mod:`.target`) | `LLMCaller`: retries, structured output, length limits, cache, streams, concurrency |
| :mod:`.reasoning` | how each model shows its reasoning (learned), and the stream filter |
| :mod:`.lists` | line lists and free text: preambles, sign-offs, fences, JSON arrays and loops are not content |
| :mod:`.parse` | reading replies as real models write them (reasoning, fences, wrappers, yes/no) |
| :mod:`.retry` | which errors are retried and how long to wait (tenacity) |
| :mod:`.loop` | the one event loop every LLM call runs on |
| :mod:`.usage` | the usage meter, fed by LlamaIndex's instrumentation |
| :mod:`.cache` | the persistent response cache |

Example:
    >>> from llama_index.core.llms import MockLLM
    >>> caller = LLMCaller(MockLLM())
    >>> parse_answer("<think>hmm</think>Answer: Paris")
    'Paris'
"""

from ..._lazy import lazy_exports

#: Public name -> the module defining it, imported on first use (see ``_lazy``).
_EXPORTS = {
    "LLMCache": ".cache",
    "cache_key": ".cache",
    "llm_fingerprint": ".cache",
    "LLMCaller": ".calls",
    "LLMTruncatedError": ".calls",
    "Reply": ".calls",
    "call_copy": ".calls",
    "is_degenerate": ".lists",
    "parse_list": ".lists",
    "strip_chatter": ".lists",
    "on_suite_loop": ".loop",
    "run_sync": ".loop",
    "suite_loop": ".loop",
    "LLMOutputError": ".parse",
    "find_items": ".parse",
    "is_refusal": ".parse",
    "is_unanswered": ".parse",
    "parse_answer": ".parse",
    "parse_json": ".parse",
    "parse_yes_no": ".parse",
    "strip_label": ".parse",
    "strip_reasoning": ".parse",
    "validate_reply": ".parse",
    "PROVIDERS": ".resolve",
    "TIERS": ".resolve",
    "LLMChoice": ".resolve",
    "accepts_max_tokens": ".resolve",
    "choose_llm": ".resolve",
    "describe_llm": ".resolve",
    "is_embedded": ".resolve",
    "llm_for_provider": ".resolve",
    "llm_identity": ".resolve",
    "llm_tier": ".resolve",
    "provider_from_env": ".resolve",
    "resolve_llm": ".resolve",
    "structured_mode": ".resolve",
    "writes_json": ".resolve",
    "RetryPolicy": ".retry",
    "is_retryable": ".retry",
    "LLMSettings": ".settings",
    "ON_LLM_FAILURE": ".steps",
    "LLMFallbackError": ".steps",
    "LLMSteps": ".steps",
    "StepRecord": ".steps",
    "check_on_failure": ".steps",
    "fallback_share": ".steps",
    "reason_of": ".steps",
    "LLMRequestError": ".target",
    "LLMStreamError": ".target",
    "UsageMeter": ".usage",
    "count_llm_calls": ".usage",
    "finish_reason": ".usage",
    "reported_usage": ".usage",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "ON_LLM_FAILURE",
    "PROVIDERS",
    "TIERS",
    "LLMCache",
    "LLMCaller",
    "LLMChoice",
    "LLMFallbackError",
    "LLMOutputError",
    "LLMRequestError",
    "LLMStreamError",
    "LLMSettings",
    "LLMSteps",
    "LLMTruncatedError",
    "Reply",
    "RetryPolicy",
    "StepRecord",
    "UsageMeter",
    "accepts_max_tokens",
    "cache_key",
    "call_copy",
    "check_on_failure",
    "choose_llm",
    "count_llm_calls",
    "describe_llm",
    "fallback_share",
    "find_items",
    "finish_reason",
    "is_embedded",
    "is_retryable",
    "is_degenerate",
    "is_unanswered",
    "llm_fingerprint",
    "llm_for_provider",
    "llm_identity",
    "llm_tier",
    "on_suite_loop",
    "parse_answer",
    "parse_json",
    "is_refusal",
    "parse_list",
    "parse_yes_no",
    "provider_from_env",
    "reason_of",
    "reported_usage",
    "resolve_llm",
    "run_sync",
    "strip_chatter",
    "strip_label",
    "strip_reasoning",
    "structured_mode",
    "suite_loop",
    "validate_reply",
    "writes_json",
]
