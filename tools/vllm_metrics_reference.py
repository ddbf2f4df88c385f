#!/usr/bin/env python3
"""vLLM's /metrics (the `vllm:` families), rendered by prometheus_client, as a test fixture.

    python3 tools/vllm_metrics_reference.py --out tests/fixtures/vllm_metrics.json

Needs only prometheus_client (Debian 12: apt-get install python3-prometheus-client; vLLM itself
cannot be installed here). The metric declarations below are transcribed from vLLM's
PrometheusStatLogger (vllm/v1/metrics/loggers.py, see SOURCES) with the defaults of `vllm serve`:
one engine (engine="0"), no speculative decoding, no LoRA, no KV connector, --kv-cache-metrics off,
VLLM_COMPUTE_NANS_IN_LOGITS off; `vllm:time_per_output_token_seconds` is included as vLLM shows it
with --show-hidden-metrics-for-version=0.11 (pagoda keeps it: dashboards still read it).

For each case the script registers those families in a fresh CollectorRegistry exactly as vLLM
does (names, documentation, label names, buckets), applies the case's observations through
prometheus_client's own Counter.inc / Gauge.set / Histogram.observe, and stores
generate_latest() — the text vLLM's /metrics serves (single API server, so with the `_created`
series prometheus_client adds by default). tests/server/metrics_test.cpp applies the same
observations to pagoda's EngineMetrics with --metrics-prefix vllm and compares the two texts.

The script is deterministic apart from the `_created` timestamps (which the test ignores).
"""

from __future__ import annotations

import argparse
import json

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
import prometheus_client

SOURCES = {
    "loggers.py": (
        "vllm-project/vllm vllm/v1/metrics/loggers.py, PrometheusStatLogger.__init__ and "
        "build_1_2_5_buckets, the 0.12-series version (its comment: 'Deprecated in 0.11 - Renamed as "
        "vllm:inter_token_latency_seconds / With 0.12.x you can enable with "
        "--show-hidden-metrics-for-version=0.11 / TODO: remove in 0.13.0'); cross-checked against "
        "commit 005a810bc40faa25b8870fbc8559c3462581eee3 (0.10 series: same names, buckets and "
        "labels for every family both have)"
    ),
    "stats.py": "vllm-project/vllm vllm/v1/metrics/stats.py @ 28ed1fb87ed5686e1d4d0cf4134b8e05d8a25a8a",
    "prometheus.py": (
        "vllm-project/vllm vllm/v1/metrics/prometheus.py @ 0fa7aac8d02f506f721caf8aa9cff406146a4f7a "
        "(the global REGISTRY unless PROMETHEUS_MULTIPROC_DIR, set only for --api-server-count > 1)"
    ),
    "finish_reasons": (
        "vllm/v1/engine/__init__.py FINISH_REASON_STRINGS of the 0.12 series: stop, length, abort, "
        "error (later versions add 'repetition')"
    ),
    "cache_config_fields": (
        "vllm-project/vllm vllm/config/cache.py @ 002f10e0cfa1373a19a0d2756598a34b700d20e5: "
        "CacheConfig.metrics_info() labels every field; the field set changes between versions"
    ),
}

TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
TPOT_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
                7.5, 10.0, 20.0, 40.0, 80.0]
REQUEST_LATENCY_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
                           50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
ITERATION_TOKEN_BUCKETS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
FINISH_REASONS = ["stop", "length", "abort", "error"]

# CacheConfig fields in the version read (SOURCES["cache_config_fields"]), plus "engine".
CACHE_CONFIG_FIELDS = [
    "block_size", "user_specified_block_size", "user_specified_mamba_block_size", "kv_cache_layout",
    "prefix_match_unit", "gpu_memory_utilization", "cache_dtype", "is_attention_free",
    "num_gpu_blocks_override", "sliding_window", "enable_prefix_caching", "prefix_caching_hash_algo",
    "attn_group_size", "prefix_cache_retention_interval", "kv_cache_dtype_skip_layers",
    "mamba_page_size_padded", "skip_page_size_padded", "mamba_block_size", "mamba_cache_dtype",
    "mamba_ssm_cache_dtype", "mamba_cache_mode", "enable_mamba_fine_grained_prefix_cache",
    "replayssm_buffer_len", "use_replayssm", "use_kda_recoverssm", "num_gpu_blocks", "num_cpu_blocks",
    "effective_attention_block_size", "kv_cache_size_tokens", "kv_cache_max_concurrency",
    "kv_sharing_fast_prefill", "kv_cache_memory_bytes", "kv_offloading_size", "kv_offloading_backend",
    "_block_size_resolved", "engine",
]

# vLLM families pagoda does not expose, and why (docs/metrics.md says the same).
NOT_EXPOSED = {
    "vllm:external_prefix_cache_queries": "no KV connector (cross-instance cache sharing)",
    "vllm:external_prefix_cache_hits": "no KV connector (cross-instance cache sharing)",
    "vllm:mm_cache_queries": "no multi-modal inputs",
    "vllm:mm_cache_hits": "no multi-modal inputs",
}


def build_1_2_5_buckets(max_value: int) -> list[int]:
    # vLLM's build_buckets([1, 2, 5], max_value).
    out, exponent = [], 0
    while True:
        for m in (1, 2, 5):
            value = m * 10**exponent
            if value > max_value:
                return out
            out.append(value)
        exponent += 1


def register(registry: CollectorRegistry, model_name: str, max_model_len: int, cache: dict) -> dict:
    """vLLM's PrometheusStatLogger families, in its order. Returns {family: series}."""
    labelnames = ["model_name", "engine"]
    lv = [model_name, "0"]
    s: dict = {}

    def gauge(name, doc, extra=None):
        names = labelnames + ([extra[0]] if extra else [])
        return Gauge(name, doc, labelnames=names, registry=registry)

    def counter(name, doc):
        s[name] = Counter(name, doc, labelnames=labelnames, registry=registry).labels(*lv)

    def histogram(name, doc, buckets):
        s[name] = Histogram(name, doc, labelnames=labelnames, buckets=buckets, registry=registry).labels(*lv)

    s["vllm:num_requests_running"] = gauge(
        "vllm:num_requests_running", "Number of requests in model execution batches.").labels(*lv)
    s["vllm:num_requests_waiting"] = gauge(
        "vllm:num_requests_waiting", "Number of requests waiting to be processed.").labels(*lv)
    sleep = gauge("vllm:engine_sleep_state",
                  "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is "
                  "awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
                  extra=("sleep_state",))
    # record_sleep_state() at start: awake.
    for state, value in (("discard_all", 0), ("weights_offloaded", 0), ("awake", 1)):
        sleep.labels(model_name=model_name, engine="0", sleep_state=state).set(value)
    s["vllm:kv_cache_usage_perc"] = gauge(
        "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.").labels(*lv)
    counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.")
    counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.")
    counter("vllm:external_prefix_cache_queries",
            "External prefix cache queries from KV connector cross-instance cache sharing, in terms of "
            "number of queried tokens.")
    counter("vllm:external_prefix_cache_hits",
            "External prefix cache hits from KV connector cross-instance cache sharing, in terms of "
            "number of cached tokens.")
    counter("vllm:mm_cache_queries", "Multi-modal cache queries, in terms of number of queried items.")
    counter("vllm:mm_cache_hits", "Multi-modal cache hits, in terms of number of cached items.")
    counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.")
    counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
    counter("vllm:generation_tokens", "Number of generation tokens processed.")
    success = Counter("vllm:request_success", "Count of successfully processed requests.",
                      labelnames=labelnames + ["finished_reason"], registry=registry)
    for reason in FINISH_REASONS:
        s["vllm:request_success/" + reason] = success.labels(model_name, "0", reason)

    tokens = build_1_2_5_buckets(max_model_len)
    histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokens)
    histogram("vllm:request_generation_tokens", "Number of generation tokens processed.", tokens)
    histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
              ITERATION_TOKEN_BUCKETS)
    histogram("vllm:request_max_num_generation_tokens",
              "Histogram of maximum number of requested generation tokens.", tokens)
    histogram("vllm:request_params_n", "Histogram of the n request parameter.", [1, 2, 5, 10, 20])
    histogram("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", tokens)
    histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS)
    histogram("vllm:time_per_output_token_seconds",
              "Histogram of time per output token in seconds."
              "DEPRECATED: Use vllm:inter_token_latency_seconds instead.", TPOT_BUCKETS)
    histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", TPOT_BUCKETS)
    histogram("vllm:request_time_per_output_token_seconds",
              "Histogram of time_per_output_token_seconds per request.", TPOT_BUCKETS)
    histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
              REQUEST_LATENCY_BUCKETS)
    histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
              REQUEST_LATENCY_BUCKETS)
    histogram("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.",
              REQUEST_LATENCY_BUCKETS)
    histogram("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
              REQUEST_LATENCY_BUCKETS)
    histogram("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
              REQUEST_LATENCY_BUCKETS)

    # log_metrics_info("cache_config", ...) at log_engine_initialized().
    info = {f: "None" for f in CACHE_CONFIG_FIELDS}
    info.update(cache)
    info["engine"] = "0"
    Gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
          labelnames=list(info.keys()), registry=registry).labels(**info).set(1)
    return s


# The same observations in both cases; the values sit below, on and above bucket bounds.
OBSERVATIONS = [
    ("set", "vllm:num_requests_running", 3),
    ("set", "vllm:num_requests_waiting", 2),
    ("set", "vllm:kv_cache_usage_perc", 0.4375),
    ("inc", "vllm:num_preemptions", 2),
    ("inc", "vllm:prompt_tokens", 1234),
    ("inc", "vllm:generation_tokens", 5678),
    ("inc", "vllm:request_success/stop", 5),
    ("inc", "vllm:request_success/length", 2),
    ("inc", "vllm:request_success/abort", 1),
    ("inc", "vllm:request_success/error", 1),
    ("observe", "vllm:request_prompt_tokens", 1),
    ("observe", "vllm:request_prompt_tokens", 7),
    ("observe", "vllm:request_prompt_tokens", 4096),
    ("observe", "vllm:request_prompt_tokens", 3000000),
    ("observe", "vllm:request_generation_tokens", 0),
    ("observe", "vllm:request_generation_tokens", 16),
    ("observe", "vllm:iteration_tokens_total", 0),
    ("observe", "vllm:iteration_tokens_total", 1),
    ("observe", "vllm:iteration_tokens_total", 9),
    ("observe", "vllm:iteration_tokens_total", 20000),
    ("observe", "vllm:request_max_num_generation_tokens", 16),
    ("observe", "vllm:request_params_n", 1),
    ("observe", "vllm:request_params_n", 3),
    ("observe", "vllm:request_params_n", 25),
    ("observe", "vllm:request_params_max_tokens", 1),
    ("observe", "vllm:request_params_max_tokens", 2048),
    ("observe", "vllm:time_to_first_token_seconds", 0.0005),
    ("observe", "vllm:time_to_first_token_seconds", 0.001),
    ("observe", "vllm:time_to_first_token_seconds", 0.123),
    ("observe", "vllm:time_to_first_token_seconds", 3000.0),
    ("observe", "vllm:time_per_output_token_seconds", 0.02),
    ("observe", "vllm:time_per_output_token_seconds", 0.5),
    ("observe", "vllm:inter_token_latency_seconds", 0.02),
    ("observe", "vllm:inter_token_latency_seconds", 0.5),
    ("observe", "vllm:inter_token_latency_seconds", 100.0),
    ("observe", "vllm:request_time_per_output_token_seconds", 0.033),
    ("observe", "vllm:e2e_request_latency_seconds", 0.3),
    ("observe", "vllm:e2e_request_latency_seconds", 12.75),
    ("observe", "vllm:request_queue_time_seconds", 0.0),
    ("observe", "vllm:request_inference_time_seconds", 1.1),
    ("observe", "vllm:request_prefill_time_seconds", 0.2),
    ("observe", "vllm:request_decode_time_seconds", 0.9),
    ("observe", "vllm:request_decode_time_seconds", 9000.0),
]

CASES = [
    {"model_name": "Qwen/Qwen3-0.6B", "max_model_len": 40960,
     "cache": {"block_size": "16", "cache_dtype": "auto", "num_gpu_blocks": "2048"}},
    # A label value to escape, and token buckets past 10^6 (written Go-style: 1e+06).
    {"model_name": 'odd "name"\\ and\nline', "max_model_len": 2000000,
     "cache": {"block_size": "32", "cache_dtype": "bfloat16", "num_gpu_blocks": "123456"}},
]


def run_case(case: dict) -> str:
    registry = CollectorRegistry()
    series = register(registry, case["model_name"], case["max_model_len"], case["cache"])
    for op, name, value in OBSERVATIONS:
        getattr(series[name], op)(value) if op != "set" else series[name].set(value)
    return generate_latest(registry).decode("utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    cases = []
    for case in CASES:
        cases.append({**case, "exposition": run_case(case)})
    fixture = {
        "generated_by": "tools/vllm_metrics_reference.py",
        "prometheus_client": prometheus_client.__version__ if hasattr(prometheus_client, "__version__")
        else "Debian 12 python3-prometheus-client 0.16.0",
        "sources": SOURCES,
        "not_exposed_by_pagoda": NOT_EXPOSED,
        "cache_config_fields": CACHE_CONFIG_FIELDS,
        "observations": [{"op": op, "metric": name, "value": value} for op, name, value in OBSERVATIONS],
        "cases": cases,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(fixture, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
