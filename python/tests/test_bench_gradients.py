"""bench/python/gradients.py keeps working: its correctness checks (eagle's one-graph loss and
gradients against torch's autograd for the MLP, the attention block and the capped loop) at tiny
shapes on the CPU, and one pass through its timing code. Needs torch (skipped without it)."""

import importlib.util
import pathlib
import random
import sys

import pytest

torch = pytest.importorskip("torch")

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench" / "python" / "gradients.py"


def load_bench():
    if not BENCH.is_file():
        pytest.skip(f"{BENCH} is not here (an installed package without the repository)")
    spec = importlib.util.spec_from_file_location("bench_gradients", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def tiny(bench, **overrides):
    seed = random.SystemRandom().randrange(2**31)
    print(f"bench config seed {seed}")
    options = dict(device="cpu", tokens=40, seqs=3, dims=(32,), dtype="f32", loop_rows=4,
                   loop_dim=8, turns=12, iters=1, warmup=1, repeats=1, seed=seed)
    options.update(overrides)
    return bench.Config(**options)


def test_eagle_gradients_equal_torchs_at_tiny_shapes():
    bench = load_bench()
    summary = bench.run(tiny(bench), time_it=False)
    cases = {(c["case"], c.get("dim")) for c in summary["cases"]}
    assert cases == {("mlp", 32), ("attention", 32), ("loop", None)}
    for c in summary["cases"]:
        assert c["ok"], c
        assert c["max_rel_diff"] <= c["tolerance"]
    loop = summary["cases"][-1]
    assert loop["saved_bytes"] > 0  # the loop's tapes


def test_the_attention_block_with_three_qkv_weights_equals_torchs():
    # --separate-qkv: q, k and v from three projections, three weight gradients (the default,
    # one qkv weight, runs in the test above).
    bench = load_bench()
    summary = bench.run(tiny(bench, cases=("attention",), packed_qkv=False), time_it=False)
    (case,) = summary["cases"]
    assert case["ok"], case
    assert case["max_rel_diff"] <= case["tolerance"]


@pytest.mark.parametrize("max_seqlen", ["exact", "switch"])
def test_the_attention_block_with_a_max_seqlen_equals_torchs(max_seqlen):
    # exact: sdpa bounded by the batch's longest sequence; switch: a device switch over
    # seqlen_buckets (tokens 40, smallest 40: one arm) picks the arm, whose reverse runs too.
    bench = load_bench()
    for packed in (False, True):
        summary = bench.run(tiny(bench, cases=("attention",), max_seqlen=max_seqlen,
                                 packed_qkv=packed), time_it=False)
        (case,) = summary["cases"]
        assert case["ok"], case
        assert case["max_rel_diff"] <= case["tolerance"]


def test_the_timing_pass_runs_and_reports():
    bench = load_bench()
    summary = bench.run(tiny(bench, cases=("mlp", "loop")), time_it=True)
    mlp, loop = summary["cases"]
    assert mlp["eagle_us"] > 0 and mlp["torch_eager_us"] > 0
    assert mlp["torch_graph_us"] is None  # the CPU: eager only, no goal
    assert loop["forward_us_per_turn"] > 0 and "reverse_over_forward" in loop


def test_zipf_lengths_cover_the_tokens():
    bench = load_bench()
    gen = torch.Generator().manual_seed(3)
    cu, longest = bench.zipf_cu_seqlens(4096, 32, gen)
    lengths = (cu[1:] - cu[:-1]).tolist()
    assert cu[0] == 0 and cu[-1] == 4096 and len(lengths) == 32
    assert min(lengths) >= 1 and max(lengths) == longest
