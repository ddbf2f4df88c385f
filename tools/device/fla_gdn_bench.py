#!/usr/bin/env python3
"""fla's chunk_gated_delta_rule forward at a varlen prefill step, timed with CUDA events: the anchor of
issue 30's must-show 4 (our chunked delta rule >= fla's chunk kernel at the Qwen3.5-9B shape). The same
step as `pagoda bench kernels --filter "Hv<HV> dk128 dv128 B=<B> q=<T>"`: B sequences of T tokens,
Hk key heads and Hv value heads of 128, bf16 q/k/v/beta, fp32 log-decay g and state, q and k
l2-normalised in the kernel, the final state written (as a prefill chunk needs).

  PYTHONPATH=/tmp/fla python3 tools/device/fla_gdn_bench.py --hk 16 --hv 32 --b 8 --t 1024
"""
import argparse

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hk", type=int, default=16)
    ap.add_argument("--hv", type=int, default=32)
    ap.add_argument("--b", type=int, default=8)
    ap.add_argument("--t", type=int, default=1024)
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule

    dev = torch.device("cuda")
    torch.manual_seed(0)
    n = a.b * a.t
    q = torch.randn(1, n, a.hk, 128, device=dev, dtype=torch.bfloat16)
    k = torch.randn(1, n, a.hk, 128, device=dev, dtype=torch.bfloat16)
    v = torch.randn(1, n, a.hv, 128, device=dev, dtype=torch.bfloat16)
    g = -torch.rand(1, n, a.hv, device=dev, dtype=torch.float32) * 0.1  # log-space decay
    beta = torch.rand(1, n, a.hv, device=dev, dtype=torch.bfloat16)
    h0 = torch.randn(a.b, a.hv, 128, 128, device=dev, dtype=torch.float32) * 0.01
    cu = torch.arange(0, n + 1, a.t, device=dev, dtype=torch.long)

    def run():
        return chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                                      use_qk_l2norm_in_kernel=True, cu_seqlens=cu)

    for _ in range(3):
        run()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(3):
        e0.record()
        for _ in range(a.iters):
            run()
        e1.record()
        torch.cuda.synchronize()
        best = min(best, e0.elapsed_time(e1) * 1000.0 / a.iters)
    print(f"| fla chunk_gated_delta_rule | Hk{a.hk} Hv{a.hv} dk128 dv128 B={a.b} q={a.t} | {best:.2f} us |")


if __name__ == "__main__":
    main()
