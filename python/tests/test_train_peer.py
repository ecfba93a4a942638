"""`eagle train --export` and its torch peer (bench/peers/train_step.py) on the CPU: numpy reads
every exported file with the shapes config.json gives, and torch, given the same initial params,
batches and AdamW, reproduces eagle's loss curve in f32.

Needs the built `eagle` binary: $EAGLE_CLI, else build/tools/eagle of the source tree (skipped
when neither exists). The peer's test needs torch (skipped without it)."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PEER = REPO / "bench" / "peers" / "train_step.py"
STEPS = 5


def eagle_cli():
    path = os.environ.get("EAGLE_CLI") or str(REPO / "build" / "tools" / "eagle")
    if not os.path.exists(path):
        pytest.skip(f"no eagle binary at {path} (set EAGLE_CLI)")
    return path


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    out = tmp_path_factory.mktemp("train_export")
    cmd = [eagle_cli(), "train", "--device", "cpu", "--steps", str(STEPS), "--tokens", "128",
           "--slots", "8", "--dim", "32", "--heads", "4", "--layers", "2",
           "--docs", str(REPO / "src"), "--max-tokens", "200000", "--seed", "7",
           "--export", str(out)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "export: written to" in run.stdout
    return out


def test_export_files_read_with_numpy(export):
    config = json.loads((export / "config.json").read_text())
    m = config["model"]
    assert (m["dim"], m["heads"], m["layers"], m["head_dim"], m["mlp"]) == (32, 4, 2, 8, 128)
    assert m["rms_norm_eps"] == 1e-5 and m["attention_scale"] == pytest.approx(8 ** -0.5)
    names = [p["name"] for p in config["params"]]
    assert names[0] == "embed" and names[-2:] == ["gf", "head"] and len(names) == 3 + 8 * 2  # embed, 8 per block, gf, head
    for p in config["params"]:
        a = np.load(export / p["file"])
        assert a.dtype == np.float32 and list(a.shape) == p["shape"], p
        assert np.isfinite(a).all()
    t, n = config["capacity"]["tokens"], config["capacity"]["slots"]
    log = json.loads((export / "log.json").read_text())
    assert log["steps"] == STEPS and len(log["loss"]) == STEPS and len(log["step_seconds"]) == STEPS
    for step in range(1, STEPS + 1):
        b = {f: np.load(export / "batches" / f"step_{step:05d}.{f}.npy")
             for f in ("input_ids", "labels", "loss_mask", "cu_seqlens")}
        assert b["input_ids"].dtype == np.int32 and b["input_ids"].shape == (t,)
        assert b["labels"].dtype == np.int32 and b["labels"].shape == (t,)
        assert b["loss_mask"].dtype == np.float32 and b["loss_mask"].shape == (t,)
        assert b["cu_seqlens"].dtype == np.int32 and b["cu_seqlens"].shape == (n + 1,)
        cu = b["cu_seqlens"]
        assert cu[0] == 0 and (np.diff(cu) >= 0).all() and cu[-1] <= t
        assert log["active_tokens"][step - 1] == cu[-1]
        # The mask takes no ignored label and no padding row.
        assert (b["loss_mask"][b["labels"] == -100] == 0).all()
        assert (b["loss_mask"][cu[-1]:] == 0).all()
        assert log["loss_tokens"][step - 1] == int((b["loss_mask"] > 0).sum())


def test_torch_peer_matches_eagle_losses_in_f32(export, tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "peer.json"
    run = subprocess.run([sys.executable, str(PEER), str(export), "--device", "cpu", "--dtype",
                          "f32", "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    print(run.stdout)
    r = json.loads(out.read_text())
    eager = r["modes"]["eager"]
    assert eager["attention"] == "loop" and len(eager["loss"]) == STEPS
    # The loss must move (the updates ran) and torch must follow eagle step by step.
    assert eager["loss"][0] != eager["loss"][-1]
    np.testing.assert_allclose(eager["loss"], r["eagle_loss"], rtol=1e-4, atol=0)


def test_torch_peer_dense_attention_matches_too(export, tmp_path):
    """The graph-safe masked attention (what a graph without varlen_attn uses), checked eagerly."""
    pytest.importorskip("torch")
    out = tmp_path / "peer_dense.json"
    run = subprocess.run([sys.executable, str(PEER), str(export), "--device", "cpu", "--dtype",
                          "f32", "--attention", "dense", "--steps", "3", "--json", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    r = json.loads(out.read_text())
    np.testing.assert_allclose(r["modes"]["eager"]["loss"], r["eagle_loss"], rtol=1e-4, atol=0)


def test_bf16_projections_match_the_peer_in_bf16(tmp_path):
    """`--matmul-dtype bf16`: the export says so, the peer follows it by default, and the two
    loss curves agree to bf16's precision (both round each product to bf16 once)."""
    pytest.importorskip("torch")
    out = tmp_path / "export_bf16"
    cmd = [eagle_cli(), "train", "--device", "cpu", "--steps", "3", "--tokens", "64",
           "--slots", "4", "--dim", "32", "--heads", "4", "--layers", "1", "--matmul-dtype",
           "bf16", "--docs", str(REPO / "src"), "--max-tokens", "100000", "--seed", "3",
           "--export", str(out)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads((out / "config.json").read_text())["model"]["matmul_dtype"] == "bf16"
    peer_json = tmp_path / "peer_bf16.json"
    run = subprocess.run([sys.executable, str(PEER), str(out), "--device", "cpu", "--json",
                          str(peer_json)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    r = json.loads(peer_json.read_text())
    assert r["dtype"] == "bf16"
    np.testing.assert_allclose(r["modes"]["eager"]["loss"], r["eagle_loss"], rtol=2e-2, atol=0)


def test_a_matmul_dtype_other_than_f32_or_bf16_is_refused():
    run = subprocess.run([eagle_cli(), "train", "--matmul-dtype", "f16"], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode != 0
    assert "--matmul-dtype must be f32 or bf16, got 'f16'" in run.stdout + run.stderr
