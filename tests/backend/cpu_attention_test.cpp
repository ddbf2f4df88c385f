// The paged attention triangle, CPU side: paged_attention over a shuffled paged cache against dense
// attention written out here from the per-sequence K/V arrays the cache was filled from.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/step_meta.h"
#include "cpu_test_util.h"

namespace pagoda {
namespace {

using cpu_test::Blob;
using cpu_test::random_vector;
using cpu_test::round_to;

// Tolerances against a dense fp64 reference over the unrounded fp32 K/V (max abs error; outputs
// are convex combinations of values in [-1, 1]).
double tolerance_vs_fp32(DType cache) {
  switch (cache) {
    case DType::BF16:
      return 1e-2;  // 8-bit mantissa K/V
    case DType::F16:
      return 2e-3;  // 11-bit mantissa K/V
    default:
      return 5e-5;  // fp32 accumulation order only
  }
}
// Against the same reference fed the K/V as rounded to the cache dtype: the kernel's own error.
constexpr double kTolSameInputs = 5e-5;

struct SeqSpec {
  int ctx;    // context length after the step
  int q_len;  // new tokens in the step (1 = decode; == ctx = whole prefill; else a later chunk)
};

struct Case {
  int block_size = 16;
  int hkv = 2;
  int group = 1;  // query heads per kv head
  int head_dim = 64;
  DType cache = DType::F32;
  int window = 0;
  float softcap = 0.0f;
  std::vector<SeqSpec> seqs;
  uint32_t seed = 1;
  bool strided_out = false;

  std::string label() const {
    return "bs=" + std::to_string(block_size) + " hkv=" + std::to_string(hkv) +
           " group=" + std::to_string(group) + " D=" + std::to_string(head_dim) +
           " cache=" + dtype_name(cache) + " window=" + std::to_string(window) +
           " softcap=" + std::to_string(softcap) + " seed=" + std::to_string(seed);
  }
};

// Everything one paged_attention call needs, built from dense per-sequence K/V.
struct PagedSetup {
  Case c;
  int hq = 0, T = 0, num_blocks = 0, max_blocks = 0;
  int64_t q_stride = 0, out_stride = 0;
  std::vector<std::vector<float>> k, v;  // per sequence [ctx, hkv, D], fp32
  std::vector<int32_t> cu, seq_lens, block_tables;
  Blob k_cache, v_cache, q, out;
  StepMeta meta;

  explicit PagedSetup(const Case& cs)
      : c(cs), k_cache(cs.cache, 0), v_cache(cs.cache, 0), q(DType::F32, 0), out(DType::F32, 0) {
    std::mt19937 rng(c.seed);
    hq = c.hkv * c.group;
    const int S = static_cast<int>(c.seqs.size()), bs = c.block_size;
    const int64_t row = int64_t{c.hkv} * c.head_dim;
    cu.push_back(0);
    int needed = 0;
    for (const SeqSpec& s : c.seqs) {
      cu.push_back(cu.back() + s.q_len);
      seq_lens.push_back(s.ctx);
      k.push_back(random_vector(rng, s.ctx * row));
      v.push_back(random_vector(rng, s.ctx * row));
      max_blocks = std::max(max_blocks, (s.ctx + bs - 1) / bs);
      needed += (s.ctx + bs - 1) / bs;
    }
    T = cu.back();
    max_blocks += 1;          // a padding column, as the engine pads its tables
    num_blocks = needed + 3;  // some blocks belong to nobody

    // Blocks handed out in a random order; padding entries point at block 0.
    std::vector<int32_t> perm(static_cast<size_t>(num_blocks));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    block_tables.assign(static_cast<size_t>(S * max_blocks), 0);
    size_t next = 0;
    for (int s = 0; s < S; ++s)
      for (int b = 0; b < (c.seqs[static_cast<size_t>(s)].ctx + bs - 1) / bs; ++b)
        block_tables[static_cast<size_t>(s * max_blocks + b)] = perm[next++];

    // The caches start as NaN: reading any slot that holds no key of the sequence poisons the
    // output.
    const int64_t cache_elems = int64_t{num_blocks} * bs * row;
    k_cache = Blob(c.cache, cache_elems);
    v_cache = Blob(c.cache, cache_elems);
    k_cache.fill(std::numeric_limits<float>::quiet_NaN());
    v_cache.fill(std::numeric_limits<float>::quiet_NaN());
    for (int s = 0; s < S; ++s) scatter(s);

    // q is a strided view, as the q columns of a fused qkv projection are.
    q_stride = int64_t{hq} * c.head_dim + 2 * row;
    q = Blob(DType::F32, std::max(1, T) * q_stride);
    const std::vector<float> qv = random_vector(rng, T * q_stride, -3.0f, 3.0f);
    for (int64_t i = 0; i < T * q_stride; ++i) q.set(i, qv[static_cast<size_t>(i)]);
    out_stride = int64_t{hq} * c.head_dim + (c.strided_out ? 8 : 0);
    out = Blob(DType::F32, std::max(1, T) * out_stride);
    out.fill(-7.0f);

    meta.cu_seqlens_q = cpu_test::i32_tensor(cu);
    meta.seq_lens = cpu_test::i32_tensor(seq_lens);
    meta.block_tables = Tensor(block_tables.data(), DType::I32, Device::CPU, {S, max_blocks});
    meta.num_tokens = T;
    meta.num_seqs = S;
    meta.max_blocks_per_seq = max_blocks;
    meta.block_size = bs;
    meta.max_query_len = 0;
    meta.max_seq_len = 0;
    for (const SeqSpec& s : c.seqs) {
      meta.max_query_len = std::max(meta.max_query_len, s.q_len);
      meta.max_seq_len = std::max(meta.max_seq_len, s.ctx);
    }
  }

  // The test's own scatter of sequence s's dense K/V into its blocks.
  void scatter(int s) {
    const int bs = c.block_size;
    const int64_t row = int64_t{c.hkv} * c.head_dim;
    for (int j = 0; j < c.seqs[static_cast<size_t>(s)].ctx; ++j) {
      const int64_t slot =
          int64_t{block_tables[static_cast<size_t>(s * max_blocks + j / bs)]} * bs + j % bs;
      for (int64_t e = 0; e < row; ++e) {
        k_cache.set(slot * row + e, k[static_cast<size_t>(s)][static_cast<size_t>(j * row + e)]);
        v_cache.set(slot * row + e, v[static_cast<size_t>(s)][static_cast<size_t>(j * row + e)]);
      }
    }
  }

  Tensor q_tensor() { return q.strided({T, hq, c.head_dim}, q_stride); }
  Tensor out_tensor() { return out.strided({T, hq, c.head_dim}, out_stride); }
  Tensor cache_tensor(Blob& b) const {
    return b.tensor({num_blocks, c.block_size, c.hkv, c.head_dim});
  }

  void run(Backend& be) {
    Tensor qt = q_tensor(), ot = out_tensor();
    AttentionParams p;
    p.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    p.sliding_window = c.window;
    p.softcap = c.softcap;
    be.paged_attention(qt, cache_tensor(k_cache), cache_tensor(v_cache), meta, p, ot);
  }

  // Dense attention in fp64; `rounded`: K/V as stored in the cache dtype.
  std::vector<double> reference(bool rounded) const {
    const int D = c.head_dim;
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    std::vector<double> ref(static_cast<size_t>(T) * hq * D, 0.0);
    auto kv = [&](const std::vector<float>& a, int64_t i) {
      const float x = a[static_cast<size_t>(i)];
      return static_cast<double>(rounded ? round_to(c.cache, x) : x);
    };
    for (size_t s = 0; s < c.seqs.size(); ++s) {
      const int ctx = c.seqs[s].ctx, q_len = c.seqs[s].q_len;
      for (int i = 0; i < q_len; ++i) {
        const int t = cu[s] + i, p = ctx - q_len + i;
        const int lo = c.window > 0 ? std::max(0, p - c.window + 1) : 0;
        for (int h = 0; h < hq; ++h) {
          const int kvh = h / c.group;
          std::vector<double> score(static_cast<size_t>(p + 1), 0.0);
          double mx = -1e300;
          for (int j = lo; j <= p; ++j) {
            double d = 0.0;
            for (int e = 0; e < D; ++e)
              d += static_cast<double>(q.get(t * q_stride + h * D + e)) *
                   kv(k[s], (int64_t{j} * c.hkv + kvh) * D + e);
            d *= scale;
            if (c.softcap > 0.0f) d = c.softcap * std::tanh(d / c.softcap);
            score[static_cast<size_t>(j)] = d;
            mx = std::max(mx, d);
          }
          double sum = 0.0;
          for (int j = lo; j <= p; ++j) sum += std::exp(score[static_cast<size_t>(j)] - mx);
          for (int j = lo; j <= p; ++j) {
            const double w = std::exp(score[static_cast<size_t>(j)] - mx) / sum;
            for (int e = 0; e < D; ++e)
              ref[(static_cast<size_t>(t) * hq + h) * D + e] +=
                  w * kv(v[s], (int64_t{j} * c.hkv + kvh) * D + e);
          }
        }
      }
    }
    return ref;
  }

  double max_error(const std::vector<double>& ref) const {
    double err = 0.0;
    const int D = c.head_dim;
    for (int t = 0; t < T; ++t)
      for (int64_t e = 0; e < int64_t{hq} * D; ++e) {
        const double got = out.get(t * out_stride + e);
        const double want = ref[static_cast<size_t>(t) * hq * D + e];
        err = std::max(err, std::isfinite(got) ? std::abs(got - want) : 1e30);
      }
    return err;
  }
};

std::unique_ptr<Backend> cpu() { return make_backend("cpu", 2); }

// Ragged sequences mixing every kind of row a step holds, sized in blocks of `bs`.
std::vector<SeqSpec> mixed_step(int bs, std::mt19937& rng) {
  auto r = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  return {
      {1, 1},                                   // first token of a prompt
      {r(2 * bs, 3 * bs) + 1, 1},               // decode, partial last block
      {2 * bs, 1},                              // decode, last block exactly full
      {r(5, 40), 0},                            // placeholder: whole prefill (q_len set below)
      {bs + r(3, 20), 13},                      // later prefill chunk starting mid-block
      {std::min(2 * bs + 5, 300), 2 * bs - 3},  // a chunk longer than a block, crossing blocks
      {r(1, 2 * bs), 1},                        // another decode
  };
}

void check_case(Case c) {
  SCOPED_TRACE(c.label());
  for (SeqSpec& s : c.seqs)
    if (s.q_len == 0) s.q_len = s.ctx;
  PagedSetup st(c);
  auto be = cpu();
  st.run(*be);
  const double err_same = st.max_error(st.reference(true));
  EXPECT_LE(err_same, kTolSameInputs);
  if (c.cache != DType::F32) {
    const double err_fp32 = st.max_error(st.reference(false));
    EXPECT_LE(err_fp32, tolerance_vs_fp32(c.cache));
  }
  // Rows of out that belong to no head stay untouched in a strided out.
  if (c.strided_out && st.T > 0) {
    EXPECT_EQ(st.out.get(st.out_stride - 1), -7.0f);
  }
}

TEST(CpuPagedAttention, TriangleAcrossBlockSizesGqaHeadDimsAndCacheTypes) {
  const int block_sizes[] = {8, 16, 32, 64, 128};
  const int groups[] = {1, 2, 4, 8};
  const int dims[] = {64, 128, 256};
  const DType caches[] = {DType::F32, DType::BF16, DType::F16};
  int index = 0;
  for (int bs : block_sizes)
    for (int g : groups) {
      std::mt19937 rng(static_cast<uint32_t>(100 + index));
      Case c;
      c.block_size = bs;
      c.group = g;
      c.hkv = g == 8 ? 1 : 2;
      c.head_dim = dims[index % 3];
      c.cache = caches[(index / 3 + index) % 3];
      c.seqs = mixed_step(bs, rng);
      c.seed = static_cast<uint32_t>(index);
      c.strided_out = index % 2 == 1;
      check_case(c);
      ++index;
    }
}

TEST(CpuPagedAttention, EveryHeadDimWithEveryCacheType) {
  int index = 0;
  for (int d : {64, 128, 256, 80, 8})
    for (DType cache : {DType::F32, DType::BF16, DType::F16}) {
      std::mt19937 rng(static_cast<uint32_t>(7 + index));
      Case c;
      c.block_size = 16;
      c.group = 4;
      c.head_dim = d;
      c.cache = cache;
      c.seqs = mixed_step(16, rng);
      c.seed = static_cast<uint32_t>(50 + index++);
      check_case(c);
    }
}

TEST(CpuPagedAttention, SlidingWindow) {
  int index = 0;
  for (int window : {1, 5, 16, 37, 1000})
    for (DType cache : {DType::F32, DType::BF16}) {
      std::mt19937 rng(static_cast<uint32_t>(300 + index));
      Case c;
      c.block_size = 16;
      c.group = 2;
      c.head_dim = 64;
      c.cache = cache;
      c.window = window;
      c.seqs = mixed_step(16, rng);
      c.seed = static_cast<uint32_t>(300 + index++);
      check_case(c);
    }
}

TEST(CpuPagedAttention, SoftCapping) {
  int index = 0;
  for (float cap : {1.0f, 5.0f, 30.0f})
    for (int window : {0, 20}) {
      std::mt19937 rng(static_cast<uint32_t>(400 + index));
      Case c;
      c.block_size = 32;
      c.group = 4;
      c.head_dim = 128;
      c.cache = index % 2 ? DType::F16 : DType::F32;
      c.softcap = cap;
      c.window = window;
      c.seqs = mixed_step(32, rng);
      c.seed = static_cast<uint32_t>(400 + index++);
      check_case(c);
    }
}

TEST(CpuPagedAttention, SoftcapAndWindowChangeTheResult) {
  // Guards against a reference and kernel that both ignore a parameter.
  Case c;
  c.seqs = {{60, 60}, {90, 1}};
  PagedSetup plain(c);
  auto be = cpu();
  plain.run(*be);
  for (int variant = 0; variant < 2; ++variant) {
    Case v = c;
    if (variant == 0) v.softcap = 0.5f;
    if (variant == 1) v.window = 8;
    PagedSetup other(v);
    other.run(*be);
    EXPECT_GT(other.max_error(plain.reference(true)), 1e-2) << "variant " << variant;
  }
}

TEST(CpuPagedAttention, PerturbedBlockTableIsDetected) {
  Case c;
  c.block_size = 16;
  c.group = 2;
  c.seqs = {{70, 70}, {50, 1}};
  PagedSetup st(c);
  auto be = cpu();
  const std::vector<double> ref = st.reference(true);
  st.run(*be);
  ASSERT_LE(st.max_error(ref), kTolSameInputs);
  // Swap two blocks of sequence 0 in the table (the cache keeps its contents): the kernel now reads
  // keys in the wrong order, which the comparison must notice.
  std::swap(st.block_tables[0], st.block_tables[2]);
  st.run(*be);
  EXPECT_GT(st.max_error(ref), 1e-3);
  // A block of another sequence instead of its own.
  std::swap(st.block_tables[0], st.block_tables[2]);
  std::swap(st.block_tables[1], st.block_tables[static_cast<size_t>(st.max_blocks)]);
  st.run(*be);
  EXPECT_GT(st.max_error(ref), 1e-3);
}

TEST(CpuPagedAttention, NewTokensCachedThroughReshapeAndCacheWithPaddingRows) {
  // The engine's flow: context of earlier steps already in the cache, this step's K/V written by
  // reshape_and_cache at slot_mapping, then attention. Three padding rows at the end of the batch
  // carry slot -1 and garbage K/V that must not reach the cache.
  for (DType cache : {DType::F32, DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(cache));
    Case c;
    c.block_size = 8;
    c.group = 4;
    c.head_dim = 64;
    c.cache = cache;
    c.seqs = {{30, 30}, {41, 1}, {57, 9}};
    PagedSetup st(c);
    const int64_t row = int64_t{c.hkv} * c.head_dim;
    const int pad = 3, T = st.T + pad;
    // Reset the new tokens' slots to NaN, then let reshape_and_cache write them.
    Blob knew(DType::F32, T * row), vnew(DType::F32, T * row);
    knew.fill(1e6f);
    vnew.fill(1e6f);
    std::vector<int32_t> slots(static_cast<size_t>(T), -1);
    for (size_t s = 0; s < c.seqs.size(); ++s) {
      const int ctx = c.seqs[s].ctx, q_len = c.seqs[s].q_len;
      for (int i = 0; i < q_len; ++i) {
        const int j = ctx - q_len + i, t = st.cu[s] + i;
        const int32_t slot =
            st.block_tables[s * static_cast<size_t>(st.max_blocks) + static_cast<size_t>(j / 8)] *
                8 +
            j % 8;
        slots[static_cast<size_t>(t)] = slot;
        for (int64_t e = 0; e < row; ++e) {
          st.k_cache.set(int64_t{slot} * row + e, std::numeric_limits<float>::quiet_NaN());
          st.v_cache.set(int64_t{slot} * row + e, std::numeric_limits<float>::quiet_NaN());
          knew.set(t * row + e, st.k[s][static_cast<size_t>(j * row + e)]);
          vnew.set(t * row + e, st.v[s][static_cast<size_t>(j * row + e)]);
        }
      }
    }
    auto be = cpu();
    Tensor kc = st.cache_tensor(st.k_cache), vc = st.cache_tensor(st.v_cache);
    be->reshape_and_cache(knew.tensor({T, c.hkv, c.head_dim}), vnew.tensor({T, c.hkv, c.head_dim}),
                          cpu_test::i32_tensor(slots), kc, vc);
    st.run(*be);
    EXPECT_LE(st.max_error(st.reference(true)), kTolSameInputs);
  }
}

}  // namespace
}  // namespace pagoda
