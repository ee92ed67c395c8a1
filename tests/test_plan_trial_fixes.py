"""Regressions from a fresh-user trial of the planner: each test failed before its fix."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from glm_operator.api.findings import Severity, SpecInvalidError
from glm_operator.api.load import parse
from glm_operator.api.quantity import GIB
from glm_operator.cli import app
from glm_operator.plan import rules
from glm_operator.plan.capacity import plan_deployment, quantization_from_name
from glm_operator.plan.flags import extra_arg_value, human_readable_int
from glm_operator.render.manifests import render
from tests.conftest import EXAMPLES, load_cr, refusal, seed

runner = CliRunner()


def minimal(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "serving.glm.dev/v1alpha1", "kind": "GLMDeployment", "metadata": {"name": "t"},
            "spec": {"model": {"name": "zai-org/GLM-5.3-FP8"}, "image": "ghcr.io/x/vllm-glm:v1", **spec}}


def findings(cr: dict[str, Any]) -> list[Any]:
    return rules.check(parse(cr).spec)


def test_gpu_memory_utilization_in_extra_args_feeds_the_plan_and_can_refuse() -> None:
    cr = minimal(decode={"extraArgs": ["--gpu-memory-utilization=0.5"]})
    decode = plan_deployment(parse(cr).spec).roles["decode"]
    assert decode.gpu_memory_utilization == 0.5 and not decode.weights_fit
    (finding,) = [f for f in refusal(cr) if f.field == "spec.decode.parallelism"]
    assert "0.5 of 140.4 GiB" in finding.message and "raise --gpu-memory-utilization" in finding.fix


def test_kv_cache_memory_bytes_sets_the_budget() -> None:
    cr = minimal(prefill={"extraArgs": ["--kv-cache-memory-bytes", "8G"]})
    prefill = plan_deployment(parse(cr).spec).roles["prefill"]
    assert prefill.kv_budget_bytes_per_gpu == 8 * GIB
    assert human_readable_int("8g") == 8 * 10**9 and human_readable_int("25.6k") == 25_600


@pytest.mark.parametrize("arg", ["--gpu-memory-utilization=1.5", "--gpu_memory_utilization=most",
                                 "--kv-cache-memory-bytes=lots"])
def test_bad_memory_flags_are_refused_at_their_entry(arg: str) -> None:
    cr = minimal(decode={"extraArgs": ["--enforce-eager", arg]})
    assert any(f.field == "spec.decode.extraArgs[1]" for f in refusal(cr))


def test_extra_arg_value_reads_both_spellings_and_the_last_wins() -> None:
    assert extra_arg_value(["--a", "--gpu_memory_utilization", "0.8", "--gpu-memory-utilization=0.7"],
                           "--gpu-memory-utilization") == (3, "0.7")
    assert extra_arg_value(["--enforce-eager"], "--gpu-memory-utilization") is None


def test_routed_experts_are_split_over_all_gpus_with_or_without_expert_parallelism() -> None:
    with_ep = plan_deployment(parse(seed()).spec).roles["decode"]
    cr = seed()
    cr["spec"]["decode"]["parallelism"]["expert"] = False
    without_ep = plan_deployment(parse(cr).spec).roles["decode"]
    assert without_ep.weights_bytes_per_gpu == with_ep.weights_bytes_per_gpu


def test_cross_field_errors_blame_the_exact_field_with_a_real_fix() -> None:
    cr = minimal(gpu={"product": "MI300X"})
    (finding,) = refusal(cr)
    assert finding.field == "spec.gpu.memory" and "gpu.memory" in finding.fix and "kubectl explain" not in finding.fix
    cr = minimal(gpu={"product": "h200"})
    assert "did you mean H200" in refusal(cr)[0].fix
    cr = minimal(gpu={"product": "H200", "memory": "0"})
    assert refusal(cr)[0].field == "spec.gpu.memory"
    arch = {k: 1 for k in ("layers", "denseLayers", "hiddenSize", "attentionHeads", "qLoraRank", "kvLoraRank",
                           "qkNopeHeadDim", "qkRopeHeadDim", "vHeadDim", "routedExperts", "sharedExperts",
                           "moeIntermediateSize", "intermediateSize", "vocabSize", "indexerHeads", "indexerHeadDim",
                           "indexTopk", "mtpLayers")}
    arch.update(maxContextTokens=4096, indexerLayers=5)
    cr = minimal()
    cr["spec"]["model"].update(profile="custom", architecture=arch)
    (finding,) = refusal(cr)
    assert finding.field == "spec.model.architecture.indexerLayers" and finding.value == 5


def test_the_gpu_label_value_is_accepted_as_the_product() -> None:
    objects = render(parse(minimal(gpu={"product": "NVIDIA-H200"}))).objects
    selectors = [o["spec"]["template"]["spec"]["nodeSelector"] for o in objects if o["kind"] == "StatefulSet"]
    assert selectors and all(s["nvidia.com/gpu.product"] == "NVIDIA-H200" for s in selectors)
    assert plan_deployment(parse(minimal(gpu={"product": "NVIDIA-H200"})).spec).gpu.name == "H200"


def test_aggregated_mode_warns_that_kv_transfer_settings_are_ignored() -> None:
    cr = load_cr(EXAMPLES / "kimi-k2.6-dcp8-b200.yaml")
    assert not [f for f in findings(cr) if f.field == "spec.kvTransfer"]
    cr["spec"]["kvTransfer"] = {"connector": "none", "rdma": {"resource": "rdma/ib"}}
    (finding,) = [f for f in findings(cr) if f.field == "spec.kvTransfer"]
    assert finding.severity == Severity.WARNING and "rdma" in finding.value


def test_an_unknown_model_name_and_an_unnamed_format_are_warned_about() -> None:
    found = findings(minimal(model={"name": "meta-llama/Llama-3-70B"}))
    fields = {f.field: f for f in found}
    assert fields["spec.model.profile"].severity == Severity.WARNING
    assert fields["spec.model.quantization"].severity == Severity.WARNING
    assert not [f for f in findings(minimal()) if f.field.startswith("spec.model.")]
    assert quantization_from_name("nvidia/Kimi-K2.6-NVFP4") == "nvfp4"
    assert quantization_from_name("zai-org/GLM-5.3") is None


def test_a_pod_above_two_tib_warns_without_node_memory() -> None:
    cr = minimal(decode={"hiSparse": {"hostPoolPerRank": "2Ti"}})
    (finding,) = [f for f in findings(cr) if f.field == "spec.decode.resources.memory"]
    assert finding.severity == Severity.WARNING and "gpu.nodeMemory" in finding.fix


def test_derived_context_warning_aims_at_the_model_limit() -> None:
    cr = minimal(decode={"hiSparse": {"hostPoolPerRank": "1Gi"}})
    (finding,) = [f for f in findings(cr) if f.field == "spec.model.maxModelLen"]
    assert "1,048,576-token request has 50.6 GiB of MLA rows" in finding.fix
    assert "lower maxModelLen" not in finding.fix


def test_aggregated_refusal_does_not_say_engine_twice() -> None:
    cr = load_cr(EXAMPLES / "kimi-k2.6-dcp8-b200.yaml")
    cr["spec"]["engine"]["parallelism"]["decodeContext"] = 1
    cr["spec"]["model"]["maxModelLen"] = 262_144
    cr["spec"]["kvCache"]["dtype"] = "bfloat16"
    cr["spec"]["engine"]["extraArgs"] = ["--kv-cache-memory-bytes=1G"]
    with pytest.raises(SpecInvalidError) as info:
        render(parse(cr))
    assert all("engine engine" not in f.message for f in info.value.findings)
    assert any(f.message.startswith("engine: a 262,144-token request") for f in info.value.findings)


def test_plan_json_keeps_failed_documents_in_place(tmp_path: Any) -> None:
    docs = [minimal(), {**minimal(), "metadata": {"name": "bad"}, "spec": {"model": {}}}]
    docs[0]["metadata"] = {"name": "good"}
    path = tmp_path / "two.yaml"
    path.write_text("\n---\n".join(json.dumps(d) for d in docs))
    result = runner.invoke(app, ["plan", "--json", str(path)])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert [r["name"] for r in report] == ["good", "bad"]
    assert "maxModelLen" in report[0] and report[1]["findings"]


def test_refused_update_keeps_the_plan_of_the_running_generation() -> None:
    from glm_operator.observe.status import healthy_status, invalid_status  # noqa: PLC0415

    plan = plan_deployment(parse(seed()).spec)
    good = healthy_status(previous={}, generation=1, workloads={}, endpoint="e", plan=plan, warnings=[], now="t")
    assert good["capacity"]["plannedGeneration"] == 1
    bad = invalid_status(previous=good, generation=2, findings=refusal(minimal(gpu={"product": "MI300X"})), now="t")
    assert bad["observedGeneration"] == 2 and bad["capacity"]["plannedGeneration"] == 1


# ------------------------------------------------------------------ from a code review of the planner


def test_a_fixed_kv_cache_larger_than_the_free_memory_is_refused_at_its_flag() -> None:
    cr = minimal(prefill={"extraArgs": ["--kv-cache-memory-bytes=200G"]})
    (finding,) = [f for f in refusal(cr) if f.field == "spec.prefill.extraArgs[0]"]
    free = plan_deployment(parse(cr).spec).roles["prefill"].free_bytes_per_gpu
    assert "asks for 200.0 GiB" in finding.message and f"use at most {int(free // GIB)}G" in finding.fix
    assert 25 * GIB < free < 35 * GIB  # the whole H200 (vLLM ignores the utilization) minus weights and reserve
    zero = minimal(prefill={"extraArgs": ["--kv-cache-memory-bytes=0"]})
    assert [f.field for f in refusal(zero)] == ["spec.prefill.extraArgs[0]"]
    with pytest.raises(ValueError, match="whole number"):
        human_readable_int("1.5")


def test_context_fixes_suggest_layouts_that_pass_the_rules() -> None:
    cr = minimal(prefill={"parallelism": {"tensor": 2, "data": 4, "expert": True}})
    cr["spec"]["model"]["maxModelLen"] = 1_048_576
    (finding,) = [f for f in refusal(cr) if f.field == "spec.model.maxModelLen" and "prefill" in f.message]
    assert "tensor 1, prefillContext 8, decodeContext 8, data 1" in finding.fix
    cr["spec"]["prefill"]["parallelism"] = {"tensor": 1, "prefillContext": 8, "decodeContext": 8, "data": 1,
                                            "expert": True}
    assert not rules.errors(findings(cr))

    tp8 = minimal(decode={"parallelism": {"tensor": 8, "expert": True}, "hiSparse": {"enabled": False}})
    tp8["spec"]["model"]["maxModelLen"] = 1_048_576
    (finding,) = [f for f in refusal(tp8) if "decode" in f.message]
    assert finding.fix.startswith("set decode.parallelism.decodeContext: 8")


def test_derived_context_warning_has_no_layout_clause_when_none_helps() -> None:
    cr = minimal(prefill={"extraArgs": ["--gpu-memory-utilization=0.81"]})
    (finding,) = [f for f in findings(cr) if f.field == "spec.model.maxModelLen"]
    assert finding.fix == f"set maxModelLen: {plan_deployment(parse(cr).spec).max_model_len} to make this explicit"


def test_offload_prefix_capacity_counts_the_replicas_each_gpu_offloads() -> None:
    tp8 = minimal(prefill={"parallelism": {"tensor": 8, "expert": True}, "cpuOffloadPerRank": "512Gi"})
    tp8["spec"]["model"]["maxModelLen"] = 131_072
    pcp_dcp = plan_deployment(parse(minimal()).spec).roles["prefill"]
    replicated = plan_deployment(parse(tp8).spec).roles["prefill"]
    assert abs(pcp_dcp.offload_prefix_tokens_per_rank - 8 * replicated.offload_prefix_tokens_per_rank) <= 8
    decode = plan_deployment(parse(minimal()).spec).roles["decode"]
    assert decode.offload_prefix_tokens_per_rank == int(48 * GIB / decode.kv.mla)  # MLA rows bound it


def test_hisparse_needs_the_fp8_row() -> None:
    cr = minimal(kvCache={"dtype": "bfloat16", "blockSize": 64})
    assert any(f.field == "spec.kvCache.dtype" for f in refusal(cr))


def test_dcp_query_replication_costs_weight_memory() -> None:
    kimi = load_cr(EXAMPLES / "kimi-k2.6-dcp8-b200.yaml")
    replicated = plan_deployment(parse(kimi).spec).roles["engine"]
    kimi["spec"]["engine"]["extraArgs"] = ["--no-dcp-q-replicate"]
    split = plan_deployment(parse(kimi).spec).roles["engine"]
    assert 1.5 * GIB < replicated.weights_bytes_per_gpu - split.weights_bytes_per_gpu < 2.5 * GIB


def test_an_unmarked_glm_repository_is_planned_as_bf16() -> None:
    plan = plan_deployment(parse(minimal(model={"name": "zai-org/GLM-5.3"})).spec)
    assert plan.quantization == "bf16"
    assert plan_deployment(parse(minimal(model={"name": "deepseek-ai/DeepSeek-V3.2", "profile": "deepseek-v3.2"}))
                           .spec).quantization == "fp8"
