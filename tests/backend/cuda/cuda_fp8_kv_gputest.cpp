// The FP8 KV cache on the CUDA backend, value by value (the op table compares whole ops on random
// data): every write rounds as the CPU's f32_to_fp8_e4m3 does (ties to even, saturation at ±448,
// subnormals, NaN), every read widens each of the 256 codes as fp8_e4m3_to_f32 does — through
// reshape_and_cache and paged_attention, with bf16 (tensor cores) and fp32 (SIMT) activations.
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/step_meta.h"
#include "gpu_test_util.h"

namespace pagoda::test {
namespace {

constexpr int64_t kHkv = 2, kD = 128, kRow = kHkv * kD, kBs = 16;

float bits_to_f32(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Inputs that find a wrong rounding: every finite code's value, the midpoints between neighbouring
// codes (ties) and the fp32 values either side of them, the saturation edge (448, the 464 tie, past
// it, infinities), the subnormal edge (2^-10 is the tie between 0 and the smallest subnormal), fp32
// denormals, signed zeros, NaN, and random magnitudes over the whole range.
std::vector<float> encoder_inputs() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x;
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) continue;  // NaN codes
    const float v = fp8_e4m3_to_f32(static_cast<uint8_t>(b));
    x.push_back(v);
    if ((b & 0x7f) == 0x7e) continue;
    const float mid = (v + fp8_e4m3_to_f32(static_cast<uint8_t>(b + 1))) / 2;  // exact in fp32
    x.insert(x.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, std::copysign(inf, mid))});
  }
  for (float s : {1.0f, -1.0f})
    for (float m : {448.0f, 449.0f, 463.99f, 464.0f, 464.01f, 480.0f, 1e4f, 3e38f, inf, std::ldexp(1.0f, -10),
                    std::nextafter(std::ldexp(1.0f, -10), 1.0f), std::nextafter(std::ldexp(1.0f, -10), 0.0f),
                    3 * std::ldexp(1.0f, -11), std::ldexp(1.0f, -20), bits_to_f32(1), bits_to_f32(0x007fffff), 0.0f})
      x.push_back(s * m);
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  x.push_back(-std::numeric_limits<float>::quiet_NaN());
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> e(-14.0f, 10.0f);
  while (x.size() % kRow != 0 || x.size() < 8 * kRow) x.push_back((rng() & 1 ? 1.0f : -1.0f) * std::exp2(e(rng)));
  return x;
}

// k [T, Hkv, D] of `act` (raw bits: every bf16 pattern survives) written by reshape_and_cache into
// an FP8 cache at slots 0..T-1 (v = k too); the cache's bytes against f32_to_fp8_e4m3 of each input.
void expect_writes_as_cpu(Backend& gpu, DType act, const std::vector<float>& in) {
  const int64_t t = static_cast<int64_t>(in.size()) / kRow, nb = (t + kBs - 1) / kBs;
  std::vector<unsigned char> raw(in.size() * dtype_size(act));
  for (size_t i = 0; i < in.size(); ++i) {
    if (act == DType::BF16) {
      uint32_t b;
      std::memcpy(&b, &in[i], 4);
      const auto h = static_cast<uint16_t>(b >> 16);  // exact: the inputs are bf16 values
      std::memcpy(&raw[i * 2], &h, 2);
    } else {
      std::memcpy(&raw[i * 4], &in[i], 4);
    }
  }
  Buffer kb = gpu.alloc(raw.size());
  gpu.copy_to_device(kb.data(), raw.data(), raw.size());
  const Tensor k(kb.data(), act, Device::CUDA, {t, kHkv, kD});
  std::vector<int32_t> slots(static_cast<size_t>(t));
  for (int64_t i = 0; i < t; ++i) slots[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  auto dslots = upload_i32(gpu, slots, {t});
  const size_t cache_bytes = static_cast<size_t>(nb * kBs * kRow);
  Buffer kc = gpu.alloc(cache_bytes), vc = gpu.alloc(cache_bytes);
  Tensor kct(kc.data(), DType::F8_E4M3, Device::CUDA, {nb, kBs, kHkv, kD});
  Tensor vct(vc.data(), DType::F8_E4M3, Device::CUDA, {nb, kBs, kHkv, kD});
  gpu.reshape_and_cache(k, k, dslots.t, kct, vct);
  std::vector<uint8_t> got(cache_bytes), got_v(cache_bytes);
  gpu.copy_to_host(got.data(), kc.data(), cache_bytes);
  gpu.copy_to_host(got_v.data(), vc.data(), cache_bytes);
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const uint8_t want = f32_to_fp8_e4m3(in[i]);
    if (got[i] != want || got_v[i] != want) {
      if (bad++ == 0) first = i;
    }
  }
  EXPECT_EQ(bad, 0u) << dtype_name(act) << ": " << bad << " of " << in.size() << " values encoded differently; first "
                     << in[first] << " -> 0x" << std::hex << int{got[first]} << ", cpu 0x"
                     << int{f32_to_fp8_e4m3(in[first])};
}

TEST(CudaFp8KvCache, WritesEveryValueAsTheCpuEncoder) {
  auto f32 = make_cuda_backend(0, DType::F32);
  expect_writes_as_cpu(*f32, DType::F32, encoder_inputs());
  // Every bf16 bit pattern (NaNs, infinities and denormals included), through the bf16 kernels.
  std::vector<float> all_bf16;
  for (uint32_t h = 0; h < 65536; ++h) all_bf16.push_back(bits_to_f32(h << 16));
  auto bf = make_cuda_backend(0, DType::BF16);
  expect_writes_as_cpu(*bf, DType::BF16, all_bf16);
}

struct Seq {
  int32_t q_len, ctx;
};

// paged_attention over an FP8 cache whose every slot holds k_row and v_row; returns out.
std::vector<float> attend(Backend& gpu, DType act, int64_t hq, const std::vector<Seq>& seqs,
                          const std::vector<uint8_t>& k_row, const std::vector<uint8_t>& v_row, std::mt19937& rng) {
  int32_t t = 0, max_blocks = 0, max_q = 0, max_ctx = 0;
  std::vector<int32_t> cu = {0}, lens;
  for (const Seq& s : seqs) {
    t += s.q_len;
    cu.push_back(t);
    lens.push_back(s.ctx);
    max_blocks = std::max(max_blocks, static_cast<int32_t>((s.ctx + kBs - 1) / kBs));
    max_q = std::max(max_q, s.q_len);
    max_ctx = std::max(max_ctx, s.ctx);
  }
  const auto num_seqs = static_cast<int32_t>(seqs.size());
  const int32_t nb = num_seqs * max_blocks;
  std::vector<int32_t> tables(static_cast<size_t>(nb));
  // Any order of blocks: every slot holds the same rows.
  for (int32_t i = 0; i < nb; ++i) tables[static_cast<size_t>(i)] = (i * 7) % nb;
  std::vector<uint8_t> kc_host, vc_host;
  for (int64_t s = 0; s < int64_t{nb} * kBs; ++s) {
    kc_host.insert(kc_host.end(), k_row.begin(), k_row.end());
    vc_host.insert(vc_host.end(), v_row.begin(), v_row.end());
  }
  Buffer kc = gpu.alloc(kc_host.size()), vc = gpu.alloc(vc_host.size());
  gpu.copy_to_device(kc.data(), kc_host.data(), kc_host.size());
  gpu.copy_to_device(vc.data(), vc_host.data(), vc_host.size());
  const Tensor kct(kc.data(), DType::F8_E4M3, Device::CUDA, {nb, kBs, kHkv, kD});
  const Tensor vct(vc.data(), DType::F8_E4M3, Device::CUDA, {nb, kBs, kHkv, kD});
  auto q = upload(gpu, random_vec(rng, static_cast<size_t>(t * hq * kD), -2.0f, 2.0f), act, {t, hq, kD});
  auto out = empty(gpu, act, {t, hq, kD});
  auto dcu = upload_i32(gpu, cu, {num_seqs + 1});
  auto dlens = upload_i32(gpu, lens, {num_seqs});
  auto dtables = upload_i32(gpu, tables, {num_seqs, max_blocks});
  StepMeta meta;
  meta.cu_seqlens_q = dcu.t;
  meta.seq_lens = dlens.t;
  meta.block_tables = dtables.t;
  meta.num_tokens = t;
  meta.num_seqs = num_seqs;
  meta.max_query_len = max_q;
  meta.max_seq_len = max_ctx;
  meta.max_blocks_per_seq = max_blocks;
  meta.block_size = static_cast<int32_t>(kBs);
  AttentionParams p;
  p.scale = 1.0f / std::sqrt(static_cast<float>(kD));
  gpu.paged_attention(q.t, kct, vct, meta, p, out.t);
  return download(gpu, out.t);
}

// Every slot of the cache holds one K row and one V row of codes (V: all 256, so each kv head sees
// 128 of them); with every key alike each query's softmax weights are equal, and its output is the
// V row exactly (bf16 holds every e4m3 value; fp32 divides by the key count: a rounding at most).
// Decode-only steps (the decode tiling) and mixed ones (prefill tiling), GQA, a context split
// over CTAs.
TEST(CudaFp8KvCache, ReadsEveryCodeAsTheCpuDecoder) {
  std::vector<uint8_t> k_row(kRow), v_row(kRow);
  std::mt19937 rng(9);
  for (int64_t i = 0; i < kRow; ++i) {
    v_row[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
    k_row[static_cast<size_t>(i)] = static_cast<uint8_t>(rng() % 256);
  }
  const std::vector<Seq> decode = {{1, 1}, {1, 40}, {1, 3000}}, mixed = {{1, 1}, {20, 20}, {5, 300}, {1, 3000}};
  for (DType act : {DType::BF16, DType::F32}) {
    auto gpu = make_cuda_backend(0, act);
    for (int64_t hq : {kHkv, 4 * kHkv})
      for (const std::vector<Seq>* seqs : {&decode, &mixed}) {
        SCOPED_TRACE(std::string(dtype_name(act)) + " Hq " + std::to_string(hq) + (seqs == &decode ? " decode" : " mixed"));
        int64_t t = 0;
        for (const Seq& s : *seqs) t += s.q_len;
        std::vector<float> want;
        for (int64_t i = 0; i < t; ++i)
          for (int64_t h = 0; h < hq; ++h)
            for (int64_t e = 0; e < kD; ++e)
              want.push_back(fp8_e4m3_to_f32(v_row[static_cast<size_t>((h / (hq / kHkv)) * kD + e)]));
        expect_close(attend(*gpu, act, hq, *seqs, k_row, v_row, rng), want, 0, act == DType::F32 ? 1e-6 : 0,
                     "out = the V row");
      }
  }
}

}  // namespace
}  // namespace pagoda::test
