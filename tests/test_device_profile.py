"""The device profile's parsers (`benchmarks.device_profile`): XLA's optimised HLO named
by its JAX source, and the busy time of overlapping operations."""

from benchmarks.device_profile import busy_ns, hlo_names, summarise

HLO = """HloModule jit_step, entry_computation_layout={()->f32[4]}

FileNames
1 "/repo/swan_jax/graph/gather.py"
2 "/repo/swan_jax/field.py"

FunctionNames
1 "mix_aggregate"
2 "field_with_operators"

FileLocations
1 {file_name_id=1 function_name_id=1 line=553 end_line=553 column=1 end_column=9}
2 {file_name_id=2 function_name_id=2 line=168 end_line=168 column=1 end_column=9}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=1}

%fused_computation.3 (param_0.1: f32[4,8], param_1.1: f32[8,4]) -> f32[4,4] {
  %param_0.1 = f32[4,8]{1,0} parameter(0)
  ROOT %dot.7 = f32[4,4]{1,0} dot(%param_0.1, %param_1.1), lhs_contracting_dims={1}
}

%fused_computation.4 (param_0.2: f32[4]) -> f32[4] {
  ROOT %tanh.2 = f32[4]{0} tanh(%param_0.2), metadata={op_name="jit(step)/tanh" stack_frame_id=2}
}

ENTRY %main.9 (p: f32[4,8]) -> f32[4] {
  %gather.1 = f32[4,8]{1,0} gather(%p), metadata={op_name="transpose(f)/gather" stack_frame_id=1}
  %matmul_fusion = f32[4,4]{1,0} fusion(%gather.1), kind=kCustom, calls=%fused_computation.3
  ROOT %tanh_fusion = f32[4]{0} fusion(%x), kind=kLoop, calls=%fused_computation.4
}
"""


def test_operations_are_named_by_their_jax_source(tmp_path):
    (tmp_path / "module_0012.jit_step.sm_9.0_gpu_after_optimizations.txt").write_text(HLO)
    names = hlo_names(tmp_path)
    assert names[("12", "gather.1")] == "gather, backward, gather.py:553 mix_aggregate"
    # a fusion without metadata: its fused computation's (a CPU matmul: only its shape)
    assert names[("12", "tanh_fusion")] == "tanh, forward, field.py:168 field_with_operators"
    assert names[("12", "matmul_fusion")] == "dot f32[4,4], source not kept"
    assert names[("jit_step", "gather.1")] == names[("12", "gather.1")]  # by module name too


def test_busy_time_counts_overlapping_operations_once():
    events = [("m", "a", 0, 10), ("m", "b", 5, 10), ("m", "c", 30, 5), ("m", "d", 31, 1)]
    assert busy_ns(events) == 15 + 5
    summary = summarise(events, {("m", "a"): "A", ("m", "b"): "A"}, wall_s=40e-9, epochs=2,
                        top=2)
    assert summary["busy_share"] == 20 / 40
    assert summary["top"][0] == {"name": "A", "ms_per_epoch": 20 / 1e6 / 2, "share": 20 / 26,
                                 "count_per_epoch": 1.0}
    assert summary["ops_per_epoch"] == 2
