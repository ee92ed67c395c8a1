"""The planner reproduces every (T) number of docs/SEED-FACTS.md and its qualitative claims.

Numbers are compared to 3 significant figures (``math.isclose(rel_tol=5e-3)``), the precision the
seed states them with.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from glm_operator.api.findings import SpecInvalidError
from glm_operator.api.load import parse
from glm_operator.api.quantity import GIB
from glm_operator.plan import flops
from glm_operator.plan.capacity import plan_deployment
from glm_operator.plan.kv import kv_bytes_per_gpu, kv_bytes_per_token
from glm_operator.plan.profiles import GPUS, MODELS
from glm_operator.plan.weights import parameter_counts
from tests.conftest import EXAMPLES, load_cr, seed

GLM53 = MODELS["glm-5.3"]
ONE_M = 1_048_576


def sig3(value: float, expected: float) -> bool:
    """Equal to 3 significant figures."""
    return math.isclose(value, expected, rel_tol=5e-3)


def plan_of(cr: dict[str, Any]) -> Any:
    return plan_deployment(parse(cr).spec)


# ------------------------------------------------------------------------------------ KV arithmetic


def test_glm53_kv_bytes_per_token_is_54728() -> None:
    kv = kv_bytes_per_token(GLM53, "fp8")
    assert kv.mla_row == 656 and kv.indexer_row == 132
    assert kv.total == 78 * 656 + 21 * 132 + 788 == 54_728


@pytest.mark.parametrize("profile", ["glm-5", "glm-5.1"])
def test_glm5_and_51_have_an_indexer_on_every_layer(profile: str) -> None:
    assert kv_bytes_per_token(MODELS[profile], "fp8").total == 62_252


def test_one_million_tokens_is_53_4_gib_and_6_7_gib_per_gpu_under_dcp8() -> None:
    per_token = kv_bytes_per_token(GLM53, "fp8").total
    assert sig3(ONE_M * per_token / 1e9, 57.39)
    assert sig3(kv_bytes_per_gpu(ONE_M, per_token, 1) / GIB, 53.4)
    assert sig3(kv_bytes_per_gpu(ONE_M, per_token, 8) / GIB, 6.68)


def test_fp8_is_rewritten_to_fp8_ds_mla_and_bf16_doubles_the_mla_row() -> None:
    assert kv_bytes_per_token(GLM53, "fp8_ds_mla") == kv_bytes_per_token(GLM53, "fp8")
    assert kv_bytes_per_token(GLM53, "bfloat16").mla_row == 1152
    assert kv_bytes_per_token(GLM53, "bfloat16").indexer_row == 132  # the indexer cache is FP8 regardless


# ------------------------------------------------------------------------------------ FLOP model


def test_sparse_mla_flop_per_byte_26_at_8_heads_191_at_64_heads() -> None:
    assert sig3(flops.sparse_mla_flop_per_byte(GLM53, 8, 656), 26.0)
    assert sig3(flops.sparse_mla_flop_per_byte(GLM53, 64, 656), 191.0)


def test_h200_ridge_point_is_206_flop_per_byte() -> None:
    ridge = GPUS["H200"].ridge_flop_per_byte
    assert ridge is not None and sig3(ridge, 206.0)


def test_indexer_overtakes_sparse_mla_near_32k_under_tp8_and_256k_under_pcp8() -> None:
    tp8 = flops.indexer_crossover_tokens(GLM53, tensor=8)
    pcp8 = flops.indexer_crossover_tokens(GLM53, tensor=1)
    # exactly as derived from 32 heads × 128 dims, 21 indexer vs 78 MLA layers, top-k 2048
    assert sig3(tp8, 32_329) and sig3(pcp8, 258_633)
    # the seed rounds these to "≈ 32K" and "≈ 256K"
    assert math.isclose(tp8, 32_768, rel_tol=0.02) and math.isclose(pcp8, 262_144, rel_tol=0.02)
    # the crossover is where the whole-prefill FLOPs are equal
    ratio = flops.indexer_flops_prefill(GLM53, round(pcp8)) / flops.sparse_mla_flops_prefill(GLM53, round(pcp8), 64)
    assert math.isclose(ratio, 1.0, rel_tol=1e-3)


def test_pcp_load_imbalance_contiguous_1_875_balanced_1_0() -> None:
    assert sig3(flops.pcp_imbalance(ONE_M, 8, balanced=False), 1.875)
    assert flops.pcp_imbalance(ONE_M, 8, balanced=True) == 1.0
    # a length 2N does not divide: chunks differ by one token, balance stays within 1e-4
    assert math.isclose(flops.pcp_imbalance(1_000_003, 8, balanced=True), 1.0, rel_tol=1e-4)
    assert flops.pcp_imbalance(1_000_003, 8, balanced=True) > 1.0


def test_dcp_allgather_bytes_per_layer() -> None:
    # 64K cached + a 2K chunk, 656-B rows, DCP8: each GPU receives 7/8 of 67,584 rows
    assert flops.dcp_allgather_bytes_per_layer(67_584, 656, 8) == 67_584 * 656 * 7 / 8
    assert flops.dcp_allgather_bytes_per_layer(67_584, 656, 1) == 0


# ------------------------------------------------------------------------------------ weights and budget


def test_parameter_counts_match_the_published_sizes() -> None:
    assert sig3(parameter_counts(MODELS["glm-5.3"]).total / 1e9, 753)  # HF: GLM-5.2-FP8, MTP included
    assert sig3(parameter_counts(MODELS["glm-5.1"], mtp=False).total / 1e9, 744)  # "744B total"
    assert sig3(parameter_counts(MODELS["deepseek-v3.2"], mtp=False).total / 1e9, 671)
    assert math.isclose(parameter_counts(MODELS["kimi-k2.6"]).total / 1e12, 1.03, rel_tol=0.01)


def test_glm53_fp8_on_h200_leaves_about_15_gib_per_gpu_on_both_roles() -> None:
    plan = plan_of(seed())
    for role in plan.roles.values():
        assert math.isclose(role.kv_budget_bytes_per_gpu / GIB, 15.0, abs_tol=0.1), role.role
        assert 100 < role.weights_bytes_per_gpu / GIB < 110


# ------------------------------------------------------------------------------------ qualitative claims


def test_seed_system_a_holds_1m_on_both_roles() -> None:
    plan = plan_of(seed())
    assert plan.max_model_len == ONE_M
    assert plan.roles["prefill"].max_context_tokens >= ONE_M
    assert plan.roles["decode"].max_context_tokens >= ONE_M
    assert plan.roles["decode"].concurrency_per_rank(ONE_M) >= 1
    assert sig3(plan.roles["prefill"].request_bytes_per_gpu(ONE_M) / GIB, 6.68)


def test_a_dp8_prefill_rank_cannot_hold_one_1m_request() -> None:
    cr = load_cr(EXAMPLES / "glm-5.3-pd-dp8-baseline.yaml")
    plan = plan_of(cr)
    assert plan.roles["prefill"].max_context_tokens < ONE_M
    assert plan.roles["prefill"].concurrency_per_rank(ONE_M) == 0


def test_pcp8_without_dcp_cannot_hold_much_beyond_250k() -> None:
    cr = seed()
    cr["spec"]["prefill"]["parallelism"]["decodeContext"] = 1
    cr["spec"]["model"]["maxModelLen"] = 262_144
    tokens = plan_of(cr).roles["prefill"].max_context_tokens
    assert 250_000 <= tokens <= 300_000
    cr["spec"]["prefill"]["parallelism"]["decodeContext"] = 8
    assert plan_of(cr).roles["prefill"].max_context_tokens >= ONE_M


def test_an_offload_only_decode_rank_cannot_hold_1m() -> None:
    cr = load_cr(EXAMPLES / "glm-5.3-pd-dp8-baseline.yaml")
    decode = plan_of(cr).roles["decode"]
    assert not decode.hisparse and decode.max_context_tokens < ONE_M
    assert decode.offload_prefix_tokens_per_rank > ONE_M  # the offload holds prefixes, not running requests


def test_hisparse_decode_concurrency_is_bounded_by_host_ram() -> None:
    cr = seed()
    small = plan_of(cr).roles["decode"]
    cr["spec"]["decode"]["hiSparse"] = {"hostPoolPerRank": "160Gi", "offloadPerRank": "16Gi"}
    large = plan_of(cr).roles["decode"]
    assert large.concurrency_per_rank(ONE_M) > small.concurrency_per_rank(ONE_M)


def test_seed_system_b_dcp8_has_8x_the_kv_capacity_of_tp8_alone() -> None:
    cr = load_cr(EXAMPLES / "kimi-k2.6-dcp8-b200.yaml")
    with_dcp = plan_of(cr).roles["engine"]
    cr["spec"]["engine"]["parallelism"]["decodeContext"] = 1
    tp_only = plan_of(cr).roles["engine"]
    ratio = with_dcp.gpu_tokens_per_rank / tp_only.gpu_tokens_per_rank
    # ≈ 8×: DCP stores 1/8 of each token; DCP query replication costs a little weight memory, so a bit less
    assert math.isclose(ratio, 8.0, rel_tol=0.03) and ratio < 8.0
    assert with_dcp.weights_bytes_per_gpu > tp_only.weights_bytes_per_gpu


def test_without_max_model_len_the_planner_derives_what_fits() -> None:
    cr = load_cr(EXAMPLES / "glm-5.3-pd-dp8-baseline.yaml")
    del cr["spec"]["model"]["maxModelLen"]
    plan = plan_of(cr)
    assert plan.max_model_len_source == "kvBudget"
    assert plan.max_model_len == plan.roles["prefill"].max_context_tokens // 64 * 64
    assert plan.max_model_len < plan.model_max_context

    minimal = {"apiVersion": "serving.glm.dev/v1alpha1", "kind": "GLMDeployment", "metadata": {"name": "m"},
               "spec": {"model": {"name": "zai-org/GLM-5.3-FP8"}, "image": "ghcr.io/x/vllm-glm:v1"}}
    plan = plan_of(minimal)
    assert plan.max_model_len_source == "model" and plan.max_model_len == ONE_M


def test_a_custom_architecture_equal_to_a_profile_plans_the_same() -> None:
    cr = seed()
    m = GLM53
    cr["spec"]["model"].update({
        "profile": "custom", "name": "example-org/Glm53-Clone", "quantization": "fp8",
        "architecture": {
            "maxContextTokens": m.max_context_tokens, "layers": m.layers, "denseLayers": m.dense_layers,
            "hiddenSize": m.hidden_size, "attentionHeads": m.attention_heads, "qLoraRank": m.q_lora_rank,
            "kvLoraRank": m.kv_lora_rank, "qkNopeHeadDim": m.qk_nope_head_dim, "qkRopeHeadDim": m.qk_rope_head_dim,
            "vHeadDim": m.v_head_dim, "routedExperts": m.routed_experts, "sharedExperts": m.shared_experts,
            "moeIntermediateSize": m.moe_intermediate_size, "intermediateSize": m.intermediate_size,
            "vocabSize": m.vocab_size, "indexerLayers": m.indexer_layers, "indexerHeads": m.indexer_heads,
            "indexerHeadDim": m.indexer_head_dim, "indexTopk": m.index_topk, "mtpLayers": m.mtp_layers,
        },
    })
    custom, builtin = plan_of(cr), plan_of(seed())
    assert custom.kv == builtin.kv
    for name in ("prefill", "decode"):
        assert custom.roles[name].kv_budget_bytes_per_gpu == builtin.roles[name].kv_budget_bytes_per_gpu
    cr["spec"]["model"]["architecture"]["indexerHeads"] = 0
    with pytest.raises(SpecInvalidError, match="indexerHeads"):
        parse(cr)
