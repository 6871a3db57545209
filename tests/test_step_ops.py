"""`benchmarks.step_ops`: a training step's operations counted in the optimised HLO."""

from benchmarks.step_ops import count_step, lowered_counts

HLO = """HloModule jit_chunk, entry_computation_layout={()->f32[4]}

FileNames
1 "/repo/swan_jax/encoders.py"

FunctionNames
1 "embedding_sum"

FileLocations
1 {file_name_id=1 function_name_id=1 line=101 end_line=101 column=1 end_column=9}

StackFrames
1 {file_location_id=1 parent_frame_id=1}

%scatter_computation (p0: f32[4], p1: s32[2]) -> f32[4] {
  %p0 = f32[4]{0} parameter(0)
  ROOT %scatter.1 = f32[4]{0} scatter(%p0, %p1, %p0), to_apply=%add
}

%inner_body (t: (s32[], f32[4])) -> (s32[], f32[4]) {
  %t = (s32[], f32[4]{0}) parameter(0)
  %x = f32[4]{0} get-tuple-element(%t), index=1
  %neg.1 = f32[4]{0} negate(%x)
  ROOT %r = (s32[], f32[4]{0}) tuple(%i, %neg.1)
}

%inner_cond (t: (s32[], f32[4])) -> pred[] {
  %t = (s32[], f32[4]{0}) parameter(0)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%step_body (t: (s32[], f32[4])) -> (s32[], f32[4]) {
  %t = (s32[], f32[4]{0}) parameter(0)
  %x = f32[4]{0} get-tuple-element(%t), index=1
  %embed = f32[4]{0} fusion(%x), kind=kLoop, calls=%scatter_computation, @META
  %loop = (s32[], f32[4]{0}) while(%t), condition=%inner_cond, body=%inner_body
  ROOT %r = (s32[], f32[4]{0}) tuple(%i, %embed)
}

%step_cond (t: (s32[], f32[4])) -> pred[] {
  %t = (s32[], f32[4]{0}) parameter(0)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  %steps = (s32[], f32[4]{0}) while(%t), condition=%step_cond, body=%step_body, @TRIPS
  ROOT %out = f32[4]{0} get-tuple-element(%steps), index=1
}
""".replace("@META", 'metadata={op_name="transpose(jvp())/scatter-add" stack_frame_id=1}').replace(
    "@TRIPS", 'backend_config={"known_trip_count":{"n":"3"}}')


def test_step_ops_counts_the_scanned_steps_operations():
    counts = count_step(HLO)
    # the step: its body (fusion, loop, tuple) and condition, the inner loop's once each
    assert counts["ops"] == 5  # fusion, while, 2 conditions' compares, negate
    assert (counts["fusions"], counts["scatters"], counts["whiles"]) == (1, 1, 1)
    assert counts["whiles_known_trip_count"] == 0  # the inner loop's count is data
    assert counts["top"] == [
        {"name": "compare (no source kept)", "count": 2},
        {"name": "scatter-add, backward, encoders.py:101 embedding_sum", "count": 1},
        {"name": "while (no source kept)", "count": 1},
        {"name": "negate (no source kept)", "count": 1}]


def test_lowered_counts_skip_platform_choices_and_attributes():
    text = """    %c_1 = stablehlo.constant dense<1> : tensor<i32>
    %0 = "stablehlo.case"(%c_1) ({
    %1:3 = "stablehlo.case"(%0) ({
    %4 = "stablehlo.case"(%3) ({
      %5 = stablehlo.while(%iterArg = %2) : tensor<f32>
      %6 = "stablehlo.scatter"(%a, %b, %c) <{dims = #stablehlo.scatter<update_window_dims = [1]>}>
    """
    counts = lowered_counts(text)
    assert (counts["whiles"], counts["conditionals"], counts["scatters"]) == (1, 1, 1)
