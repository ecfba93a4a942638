"""Packed data from Python: zipf lengths, cu_seqlens, documents, the look-ahead loader."""

import numpy as np
import pytest

import eagle

D = eagle.data


def test_zipf_lengths_and_cu_seqlens():
    lengths = D.zipf_lengths(4096, 32, 7)
    assert len(lengths) == 32 and sum(lengths) == 4096 and min(lengths) >= 1
    assert D.zipf_lengths(4096, 32, 7) == lengths  # deterministic
    cu = D.cu_seqlens([3, 1, 5], 5).numpy()
    assert cu.tolist() == [0, 3, 4, 9, 9, 9] and cu.dtype == np.int32
    with pytest.raises(eagle.InvalidArgument):
        D.zipf_lengths(3, 5, 0)
    with pytest.raises(eagle.InvalidArgument):
        D.cu_seqlens([1, 2, 3], 2)


def test_packed_loader_fills_batches(tmp_path):
    (tmp_path / "a.txt").write_text("hello world " * 40)
    (tmp_path / "b.txt").write_text("packed ragged batches " * 10)
    segments = D.read_documents(tmp_path, 64)
    assert all(1 <= len(s) <= 64 for s in segments) and segments[0].source.startswith(str(tmp_path))
    loader = D.PackedLoader(segments, tokens=128, slots=4, lookahead=8)
    for _ in range(3):
        b = loader.next()
        cu = b["cu_seqlens"].numpy()
        L, M = b["active_tokens"], b["active_sequences"]
        assert cu.shape == (5,) and cu[0] == 0 and cu[M] == L and (cu[M:] == L).all()
        assert 0 < L <= 128 and 1 <= M <= 4
        ids, labels = b["input_ids"].numpy(), b["labels"].numpy()
        assert ids.shape == (128,) and (labels[L:] == -100).all()
        assert set(b["loss_mask"].numpy().tolist()) <= {0.0, 1.0}
    with pytest.raises(eagle.InvalidArgument):
        D.PackedLoader([], tokens=128, slots=4)
    with pytest.raises(eagle.InvalidArgument):
        D.PackedLoader([D.Segment(list(range(10)), "long")], tokens=4, slots=2).next()
