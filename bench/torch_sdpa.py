"""The torch peer of eagle_bench_cudnn section 1: scaled_dot_product_attention on torch's cuDNN
backend at the same shapes (bf16, H=32, D=128; dense B=8 S=2048 and THD T=16384 in 64 zipf(1.1)
sequences), device time as the median over samples of 10 launches (CUDA events).

    python3 bench/torch_sdpa.py

A peer that cannot run here is reported as such, never replaced by a guess.
"""

import math

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel


def device_ms(fn, samples=21):
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(samples):
        start.record()
        for _ in range(10):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 10)
    return sorted(times)[len(times) // 2]


def zipf_lengths(n=64, total=16384, s=1.1):
    w = [1.0 / (i + 1) ** s for i in range(n)]
    lens = [max(1, round(x / sum(w) * total)) for x in w]
    lens[0] += total - sum(lens)
    return lens


def main():
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}")
    print(f"{'case':44s} {'ms':>10s} {'TFLOP/s':>10s}")
    h, d = 32, 128
    for causal in (False, True):
        q, k, v = (torch.rand(8, h, 2048, d, device="cuda", dtype=torch.bfloat16) * 2 - 1 for _ in range(3))
        try:
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                ms = device_ms(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal))
            flops = 4.0 * 8 * h * 2048 * 2048 * d * (0.5 if causal else 1.0)
            print(f"{'dense B=8 S=2048' + (' causal' if causal else ''):44s} {ms:10.3f} {flops / ms * 1e-9:10.1f}")
        except Exception as e:  # noqa: BLE001 - reported, not hidden
            print(f"dense causal={causal}: peer cannot run: {e}")
    lens = zipf_lengths()
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), device="cuda", dtype=torch.int32)
    t = sum(lens)
    for causal in (False, True):
        q, k, v = (torch.rand(t, h, d, device="cuda", dtype=torch.bfloat16) * 2 - 1 for _ in range(3))
        pairs = sum(l * (l + 1) / 2 if causal else l * l for l in lens)
        try:
            op = torch.ops.aten._cudnn_attention_forward
            fn = lambda: op(q, k, v, None, cu, cu, max(lens), max(lens), False, 0.0, causal, False,
                            scale=1 / math.sqrt(d))
            ms = device_ms(fn)
            print(f"{'THD T=16384 N=64' + (' causal' if causal else ''):44s} {ms:10.3f} "
                  f"{4.0 * h * d * pairs / ms * 1e-9:10.1f}")
        except Exception as e:  # noqa: BLE001 - reported, not hidden
            print(f"THD causal={causal}: peer cannot run: {type(e).__name__}: {str(e)[:200]}")


if __name__ == "__main__":
    main()
