// The CUDA backend's primitives that the backend contract split out of its fused kernels (rope with
// style and scaling, add, add_bias, per-head rms_norm) and the composed qk_norm_rope_and_cache that
// it now takes without q/k norm weights or with scaled RoPE (Llama), against the CPU backend, whose
// ops tests/backend/cpu_contract_test.cpp holds to naive formulas. bf16 and fp32 activations.
#include "gpu_test_util.h"

namespace pagoda::test {
namespace {

constexpr DType kBf = DType::BF16;
constexpr DType kF32 = DType::F32;

double atol_of(DType act) { return act == kBf ? 4e-2 : 2e-4; }
double rtol_of(DType act) { return act == kBf ? kBf16Rtol : 1e-4; }

RopeParams rope_case(int variant, int32_t rotary_dim) {
  RopeParams r;
  r.rotary_dim = rotary_dim;
  r.theta = 10000.0f;
  if (variant == 1) r.style = RopeStyle::Interleaved;
  if (variant == 2) {
    r.scaling = RopeScaling::Llama3;
    r.factor = 8.0;
    r.original_max_positions = 64.0;
  }
  return r;
}

TEST(CudaContract, RopeMatchesTheCpuForEveryStyleAndScaling) {
  std::mt19937 rng(21);
  auto cpu = make_backend("cpu");
  for (DType act : {kBf, kF32}) {
    auto gpu = make_cuda_backend(0, act);
    const int64_t t = 19, h = 5, d = 64, width = h * d + 24;
    const auto x = random_vec(rng, static_cast<size_t>(t * width), -2.0f, 2.0f, act);
    std::vector<int32_t> pos(static_cast<size_t>(t));
    for (auto& p : pos) p = static_cast<int32_t>(rng() % 5000);
    for (int variant : {0, 1, 2})
      for (int32_t rot : {0, 32}) {
        SCOPED_TRACE(std::string(dtype_name(act)) + " variant " + std::to_string(variant) + " rotary " +
                     std::to_string(rot));
        const RopeParams rp = rope_case(variant, rot);
        std::vector<float> got, want;
        for (Backend* b : {gpu.get(), cpu.get()}) {
          auto dx = upload(*b, x, b->activation_dtype(), {t, width});
          auto dpos = upload_i32(*b, pos, {t});
          Tensor v = dx.t.cols(8, 8 + h * d).reshape({t, h, d});  // strided view
          b->rope(v, dpos.t, rp);
          (b == cpu.get() ? want : got) = download(*b, dx.t);
        }
        expect_close(got, want, atol_of(act), rtol_of(act), "rope vs cpu");
      }
  }
}

TEST(CudaContract, AddAddBiasAndPerHeadRmsNorm) {
  std::mt19937 rng(22);
  auto cpu = make_backend("cpu");
  for (DType act : {kBf, kF32}) {
    SCOPED_TRACE(dtype_name(act));
    auto gpu = make_cuda_backend(0, act);
    const int64_t t = 7, n = 3 * 40;
    const auto a = random_vec(rng, static_cast<size_t>(t * (n + 8)), -2.0f, 2.0f, act);
    const auto bb = random_vec(rng, static_cast<size_t>(t * n), -2.0f, 2.0f, act);
    const auto bias = random_vec(rng, static_cast<size_t>(n), -1.0f, 1.0f, kF32);
    const auto w = random_vec(rng, 40, 0.5f, 1.5f, kF32);
    std::vector<float> res[2][3];
    int i = 0;
    for (Backend* b : {gpu.get(), cpu.get()}) {
      const DType ad = b->activation_dtype();
      auto da = upload(*b, a, ad, {t, n + 8});
      auto db = upload(*b, bb, ad, {t, n});
      auto dbias = upload(*b, bias, kF32, {n});
      auto dw = upload(*b, w, kF32, {40});
      Tensor av = da.t.cols(4, 4 + n);
      b->add(av, db.t, av);  // in place, strided
      res[i][0] = download(*b, da.t);
      b->add_bias(db.t, dbias.t);
      res[i][1] = download(*b, db.t);
      Tensor heads = db.t.reshape({t, 3, 40});
      b->rms_norm(heads, dw.t, heads, 1e-6f, /*zero_centered=*/false);
      res[i][2] = download(*b, db.t);
      ++i;
    }
    expect_close(res[0][0], res[1][0], act == kBf ? 2e-2 : 0, rtol_of(act), "add vs cpu");
    expect_close(res[0][1], res[1][1], act == kBf ? 2e-2 : 0, rtol_of(act), "add_bias vs cpu");
    expect_close(res[0][2], res[1][2], atol_of(act), rtol_of(act), "per-head rms_norm vs cpu");
  }
}

// No q/k norm weights (Llama, Mistral, Qwen2) and llama3-scaled RoPE: the composed primitives.
TEST(CudaContract, QkRopeAndCacheWithoutNormWeightsAndScaledRope) {
  std::mt19937 rng(23);
  auto cpu = make_backend("cpu");
  for (DType act : {kBf, kF32}) {
    auto gpu = make_cuda_backend(0, act);
    for (int variant : {0, 2}) {
      SCOPED_TRACE(std::string(dtype_name(act)) + " variant " + std::to_string(variant));
      const int64_t t = 9, hq = 6, hkv = 2, d = 64, nb = 4, bs = 16, w = (hq + 2 * hkv) * d;
      const auto qkv = random_vec(rng, static_cast<size_t>(t * w), -2.0f, 2.0f, act);
      std::vector<int32_t> pos(static_cast<size_t>(t)), slots(static_cast<size_t>(t));
      for (int64_t i = 0; i < t; ++i) {
        pos[size_t(i)] = static_cast<int32_t>(100 + i);
        slots[size_t(i)] = i == 3 ? -1 : static_cast<int32_t>(nb * bs - 1 - i);
      }
      const size_t cache_n = size_t(nb * bs * hkv * d);
      std::vector<std::vector<float>> out[2];
      int bi = 0;
      for (Backend* b : {gpu.get(), cpu.get()}) {
        auto dqkv = upload(*b, qkv, b->activation_dtype(), {t, w});
        Tensor q = dqkv.t.cols(0, hq * d).reshape({t, hq, d});
        Tensor k = dqkv.t.cols(hq * d, (hq + hkv) * d).reshape({t, hkv, d});
        Tensor v = dqkv.t.cols((hq + hkv) * d, w).reshape({t, hkv, d});
        auto dpos = upload_i32(*b, pos, {t});
        auto dslots = upload_i32(*b, slots, {t});
        auto kc = upload(*b, std::vector<float>(cache_n, 0.0f), kF32, {nb, bs, hkv, d});
        auto vc = upload(*b, std::vector<float>(cache_n, 0.0f), kF32, {nb, bs, hkv, d});
        StepMeta meta;
        meta.positions = dpos.t;
        meta.slot_mapping = dslots.t;
        meta.num_tokens = int32_t(t);
        meta.block_size = int32_t(bs);
        b->qk_norm_rope_and_cache(q, k, v, Tensor(), Tensor(), 1e-6f, false, rope_case(variant, 0), meta, kc.t,
                                  vc.t);
        out[bi++] = {download(*b, q), download(*b, kc.t), download(*b, vc.t)};
      }
      expect_close(out[0][0], out[1][0], atol_of(act), rtol_of(act), "q vs cpu");
      expect_close(out[0][1], out[1][1], atol_of(act), rtol_of(act), "k_cache vs cpu");
      expect_close(out[0][2], out[1][2], 0, 0, "v_cache vs cpu");
    }
  }
}

TEST(CudaContract, SupportsTheActivationDtypesItRuns) {
  auto gpu = make_cuda_backend(0, kBf);
  for (Op op : all_ops()) {
    // The quantized linears are asked about their weights' dtype (decoder_base.cpp's required_ops).
    if (op == Op::LinearFp8 || op == Op::LinearInt4) {
      EXPECT_TRUE(gpu->supports(op, op == Op::LinearFp8 ? DType::F8_E4M3 : DType::I32)) << op_name(op);
      continue;
    }
    EXPECT_TRUE(gpu->supports(op, kBf)) << op_name(op);
    EXPECT_TRUE(gpu->supports(op, kF32)) << op_name(op);
  }
  EXPECT_FALSE(gpu->host_visible_memory());
  EXPECT_FALSE(gpu->supports(Op::RmsNorm, DType::F16));
}

}  // namespace
}  // namespace pagoda::test
