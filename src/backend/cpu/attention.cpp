// Unified varlen paged attention (prefill chunks and decodes in one call), the CPU reference the
// GPU kernels are held to. fp32 online softmax over the keys one cache block at a time; one work
// item is (token, kv head, group of the query heads sharing that kv head), so a key block is read
// (and converted from BF16/F16) once for all the query heads of its GQA group.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string_view>
#include <vector>

#include "backend/cpu/check.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/kernels.h"

namespace pagoda::cpu {

namespace {

constexpr int64_t kMaxHeadDim = 512;

struct AttnShape {
  int64_t num_blocks, block_size, Hkv, D, Dv, Hq, G, max_blocks;
};

struct Scratch {
  std::vector<float> q, acc, scores, m, l, k, v;
  std::vector<float> tile_k, tile_v;  // a tile's context of one kv head as fp32 (16-bit caches)
  std::vector<float> tq, tacc, tscores, tm, tl;  // attend_tile's rows × heads
  std::vector<float> tile_kt;  // tile_k transposed, [D, end]: the scores as a row-broadcast GEMM
  void size_for(const AttnShape& a, int64_t nG) {
    q.resize(static_cast<size_t>(nG * a.D));
    acc.resize(static_cast<size_t>(nG * a.Dv));
    scores.resize(static_cast<size_t>(nG * a.block_size));
    m.resize(static_cast<size_t>(nG));
    l.resize(static_cast<size_t>(nG));
    k.resize(static_cast<size_t>(a.block_size * a.D));
    v.resize(static_cast<size_t>(a.block_size * a.Dv));
  }
};

// Rows j0..j0+n of one kv head of a cache block as fp32: a pointer into the cache (F32) or into
// `scratch` after conversion. *ld receives the distance between rows.
const float* cache_rows(const Tensor& cache, int64_t first_slot, int64_t n, int64_t Hkv,
                        int64_t kvh, int64_t width, float* scratch, int64_t* ld) {
  const size_t esize = dtype_size(cache.dtype);
  const char* base = static_cast<const char*>(cache.data) +
                     static_cast<size_t>((first_slot * Hkv + kvh) * width) * esize;
  if (cache.dtype == DType::F32) {
    *ld = Hkv * width;
    return reinterpret_cast<const float*>(base);
  }
  for (int64_t j = 0; j < n; ++j)
    load_row(base + static_cast<size_t>(j * Hkv * width) * esize, cache.dtype, scratch + j * width,
             width);
  *ld = width;
  return scratch;
}

// Attention of query heads [h0, h0 + nG) of token row t (context position p of sequence s).
void attend(const AttnShape& a, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
            const int32_t* block_table, int64_t t, int64_t p, int64_t kvh, int64_t g0, int64_t nG,
            const AttentionParams& params, Tensor& out, Scratch& sc, const float* k_conv = nullptr,
            const float* v_conv = nullptr) {
  const Kernels& kern = kernels();
  sc.size_for(a, nG);
  const int64_t h0 = kvh * a.G + g0, bs = a.block_size;
  const auto* qrow = static_cast<const float*>(q.row(t)) + h0 * a.D;
  for (int64_t i = 0; i < nG * a.D; ++i) sc.q[static_cast<size_t>(i)] = qrow[i] * params.scale;
  std::fill(sc.acc.begin(), sc.acc.end(), 0.0f);
  std::fill(sc.m.begin(), sc.m.end(), -std::numeric_limits<float>::infinity());
  std::fill(sc.l.begin(), sc.l.end(), 0.0f);

  const int64_t lo =
      params.sliding_window > 0 ? std::max<int64_t>(0, p - params.sliding_window + 1) : 0;
  for (int64_t b = lo / bs; b <= p / bs; ++b) {
    const int64_t j0 = std::max(lo, b * bs), j1 = std::min(p + 1, b * bs + bs), n = j1 - j0;
    const int64_t first_slot = static_cast<int64_t>(block_table[b]) * bs + (j0 - b * bs);
    int64_t ldk = 0, ldv = 0;
    if (k_conv) ldk = a.D;
    const float* kk = k_conv ? k_conv + j0 * a.D
                             : cache_rows(k_cache, first_slot, n, a.Hkv, kvh, a.D, sc.k.data(), &ldk);
    kern.qk_scores(sc.q.data(), nG, a.D, kk, n, ldk, a.D, sc.scores.data(), bs);
    for (int64_t g = 0; g < nG; ++g) {
      float* s = sc.scores.data() + g * bs;
      if (params.softcap > 0.0f) {
        const float inv_cap = 1.0f / params.softcap;
        for (int64_t j = 0; j < n; ++j) s[j] = params.softcap * std::tanh(s[j] * inv_cap);
      }
      float mx = s[0];
      for (int64_t j = 1; j < n; ++j) mx = std::max(mx, s[j]);
      const float m_old = sc.m[static_cast<size_t>(g)], m_new = std::max(m_old, mx);
      const float corr = std::exp(m_old - m_new);  // 0 on the first block (m_old = -inf)
      float sum = 0.0f;
      for (int64_t j = 0; j < n; ++j) {
        s[j] = std::exp(s[j] - m_new);
        sum += s[j];
      }
      sc.l[static_cast<size_t>(g)] = sc.l[static_cast<size_t>(g)] * corr + sum;
      sc.m[static_cast<size_t>(g)] = m_new;
      if (corr != 1.0f) {
        float* acc = sc.acc.data() + g * a.Dv;
        for (int64_t d = 0; d < a.Dv; ++d) acc[d] *= corr;
      }
    }
    if (v_conv) ldv = a.Dv;
    const float* vv = v_conv ? v_conv + j0 * a.Dv
                             : cache_rows(v_cache, first_slot, n, a.Hkv, kvh, a.Dv, sc.v.data(), &ldv);
    kern.pv_accumulate(sc.scores.data(), nG, bs, vv, n, ldv, a.Dv, sc.acc.data(), a.Dv);
  }
  auto* orow = static_cast<float*>(out.row(t)) + h0 * a.Dv;
  for (int64_t g = 0; g < nG; ++g) {
    const float inv_l = 1.0f / sc.l[static_cast<size_t>(g)];
    for (int64_t d = 0; d < a.Dv; ++d)
      orow[g * a.Dv + d] = sc.acc[static_cast<size_t>(g * a.Dv + d)] * inv_l;
  }
}

// Attention of a prefill tile's rows [r0, r1) (positions first_pos, first_pos + 1, ...) for query
// heads [h0, h0 + nG) of kv head kvh, over the tile's context in fp32 (K transposed, kt_conv [D, end];
// v_conv [end, Dv]; end = first_pos + rows). All rows × heads of the tile go through each chunk of
// keys together, so the scores are one small GEMM and the value update one accumulation over the
// chunk instead of one per row and block (the per-row version's GEMMs had 2 query rows against 16
// keys); both are row-broadcast products (pv_accumulate), no horizontal sums. A key a row may not
// see (after its position, before its window) gets probability 0.
void attend_tile(const AttnShape& a, const Tensor& q, int64_t r0, int64_t r1, int64_t first_pos, int64_t kvh,
                 int64_t g0, int64_t nG, const AttentionParams& params, Tensor& out, Scratch& sc,
                 const float* kt_conv, const float* v_conv) {
  constexpr int64_t kKeys = 64;
  const Kernels& kern = kernels();
  const int64_t rows = r1 - r0, R = rows * nG, h0 = kvh * a.G + g0;
  sc.tq.resize(static_cast<size_t>(R * a.D));
  sc.tacc.assign(static_cast<size_t>(R * a.Dv), 0.0f);
  sc.tscores.resize(static_cast<size_t>(R * kKeys));
  sc.tm.assign(static_cast<size_t>(R), -std::numeric_limits<float>::infinity());
  sc.tl.assign(static_cast<size_t>(R), 0.0f);
  for (int64_t t = r0; t < r1; ++t) {
    const auto* qrow = static_cast<const float*>(q.row(t)) + h0 * a.D;
    float* dst = sc.tq.data() + (t - r0) * nG * a.D;
    for (int64_t i = 0; i < nG * a.D; ++i) dst[i] = qrow[i] * params.scale;
  }
  const int64_t last = first_pos + rows - 1;  // the last row's position: no key after it is seen
  const int64_t lo = params.sliding_window > 0 ? std::max<int64_t>(0, first_pos - params.sliding_window + 1) : 0;
  for (int64_t j0 = lo; j0 <= last; j0 += kKeys) {
    const int64_t n = std::min(kKeys, last + 1 - j0);
    // scores[R, n] = q[R, D] · K^T[D, j0 : j0 + n] (K^T's rows are last + 1 long)
    std::fill(sc.tscores.begin(), sc.tscores.end(), 0.0f);
    kern.pv_accumulate(sc.tq.data(), R, a.D, kt_conv + j0, a.D, last + 1, n, sc.tscores.data(), kKeys);
    for (int64_t i = 0; i < R; ++i) {
      const int64_t p = first_pos + i / nG;
      const int64_t wlo = params.sliding_window > 0 ? std::max<int64_t>(0, p - params.sliding_window + 1) : 0;
      const int64_t a0 = std::max<int64_t>(wlo - j0, 0), a1 = std::min<int64_t>(p - j0 + 1, n);  // seen: [a0, a1)
      float* s = sc.tscores.data() + i * kKeys;
      if (a0 >= a1) {
        std::fill(s, s + n, 0.0f);
        continue;
      }
      std::fill(s, s + a0, 0.0f);
      std::fill(s + a1, s + n, 0.0f);
      if (params.softcap > 0.0f) {
        const float inv_cap = 1.0f / params.softcap;
        for (int64_t j = a0; j < a1; ++j) s[j] = params.softcap * std::tanh(s[j] * inv_cap);
      }
      float mx = s[a0];
      for (int64_t j = a0 + 1; j < a1; ++j) mx = std::max(mx, s[j]);
      const float m_old = sc.tm[static_cast<size_t>(i)], m_new = std::max(m_old, mx);
      const float corr = std::exp(m_old - m_new);  // 0 on the first chunk (m_old = -inf)
      const float sum = kern.exp_sum(s + a0, a1 - a0, m_new);
      sc.tl[static_cast<size_t>(i)] = sc.tl[static_cast<size_t>(i)] * corr + sum;
      sc.tm[static_cast<size_t>(i)] = m_new;
      if (corr != 1.0f) {
        float* acc = sc.tacc.data() + i * a.Dv;
        for (int64_t d = 0; d < a.Dv; ++d) acc[d] *= corr;
      }
    }
    kern.pv_accumulate(sc.tscores.data(), R, kKeys, v_conv + j0 * a.Dv, n, a.Dv, a.Dv, sc.tacc.data(), a.Dv);
  }
  for (int64_t i = 0; i < R; ++i) {
    const int64_t t = r0 + i / nG, g = i % nG;
    float* orow = static_cast<float*>(out.row(t)) + (h0 + g) * a.Dv;
    const float inv_l = 1.0f / sc.tl[static_cast<size_t>(i)];
    for (int64_t d = 0; d < a.Dv; ++d) orow[d] = sc.tacc[static_cast<size_t>(i * a.Dv + d)] * inv_l;
  }
}

// Positions [0, end) of one kv head of a sequence's 16-bit caches as fp32 rows, once for all rows of
// a prefill tile instead of once per row (the per-row conversion was 9% of a 512-token prefill).
// False when the context is too long to hold (the rows then convert their blocks one by one).
bool convert_context(const AttnShape& a, const Tensor& k_cache, const Tensor& v_cache, const int32_t* block_table,
                     int64_t end, int64_t kvh, Scratch& sc) {
  constexpr int64_t kMaxFloats = int64_t{1} << 20;  // 4 MiB per thread
  if (end * (a.D + a.Dv) > kMaxFloats) return false;
  sc.tile_k.resize(static_cast<size_t>(end * a.D));
  sc.tile_v.resize(static_cast<size_t>(end * a.Dv));
  const int64_t bs = a.block_size;
  for (int64_t b = 0; b * bs < end; ++b) {
    const int64_t n = std::min(bs, end - b * bs), first_slot = static_cast<int64_t>(block_table[b]) * bs;
    int64_t ld = 0;
    cache_rows(k_cache, first_slot, n, a.Hkv, kvh, a.D, sc.tile_k.data() + b * bs * a.D, &ld);
    cache_rows(v_cache, first_slot, n, a.Hkv, kvh, a.Dv, sc.tile_v.data() + b * bs * a.Dv, &ld);
  }
  // K^T in 16-key strips: each write of a strip fills one cache line of a K^T row.
  sc.tile_kt.resize(static_cast<size_t>(end * a.D));
  const float* k = sc.tile_k.data();
  float* kt = sc.tile_kt.data();
  for (int64_t j0 = 0; j0 < end; j0 += 16) {
    const int64_t j1 = std::min(end, j0 + 16);
    for (int64_t d = 0; d < a.D; ++d)
      for (int64_t j = j0; j < j1; ++j) kt[d * end + j] = k[j * a.D + d];
  }
  return true;
}

AttnShape check_attention_args(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                               const StepMeta& meta, const Tensor& out) {
  const char* op = "paged_attention";
  require_dtype(q, DType::F32, op, "q");
  require_dtype(out, DType::F32, op, "out");
  for (const Tensor* c : {&k_cache, &v_cache})
    require(is_kv_cache_dtype(c->dtype) && c->ndim == 4 && c->is_contiguous(), op,
            "caches must be contiguous float [num_blocks, block_size, Hkv, head_dim]");
  AttnShape a{};
  a.num_blocks = k_cache.size(0);
  a.block_size = k_cache.size(1);
  a.Hkv = k_cache.size(2);
  a.D = k_cache.size(3);
  a.Dv = v_cache.size(3);
  require(v_cache.size(0) == a.num_blocks && v_cache.size(1) == a.block_size &&
              v_cache.size(2) == a.Hkv,
          op, "k and v caches disagree");
  require(a.D > 0 && a.D <= kMaxHeadDim && a.Dv > 0 && a.Dv <= kMaxHeadDim, op,
          "head_dim must be in [1, 512]");
  require(q.row_numel() % a.D == 0, op, "q rows are not whole heads");
  a.Hq = q.row_numel() / a.D;
  require(a.Hq % a.Hkv == 0, op, "query heads must be a multiple of kv heads");
  a.G = a.Hq / a.Hkv;
  require(out.size(0) == q.size(0) && out.row_numel() == a.Hq * a.Dv, op,
          "out must be [T, Hq, Dv]");
  for (const Tensor* m : {&meta.cu_seqlens_q, &meta.seq_lens, &meta.block_tables})
    require_dtype(*m, DType::I32, op, "step metadata");
  a.max_blocks = meta.block_tables.ndim == 2 ? meta.block_tables.size(1) : meta.max_blocks_per_seq;
  return a;
}

AttentionShape attention_shape(const AttnShape& a, DType kv_dtype) {
  AttentionShape s;
  s.num_q_heads = static_cast<int32_t>(a.Hq);
  s.num_kv_heads = static_cast<int32_t>(a.Hkv);
  s.head_dim = static_cast<int32_t>(a.D);
  s.q_dtype = DType::F32;
  s.kv_dtype = kv_dtype;
  return s;
}

}  // namespace

AttentionPlan plan_attention(ThreadPool& pool, const StepMeta& meta, const AttentionShape& shape,
                             const AttentionLengths& lengths) {
  // The CPU's metadata tensors are host memory: the lengths can always be read from them.
  AttentionLengths len = lengths;
  if (!len.cu_seqlens_q || !len.seq_lens) {
    require(meta.cu_seqlens_q.dtype == DType::I32 && meta.seq_lens.dtype == DType::I32 &&
                meta.cu_seqlens_q.numel() >= meta.num_seqs + 1 && meta.seq_lens.numel() >= meta.num_seqs,
            "plan_attention", "cu_seqlens_q / seq_lens must be int32 and cover num_seqs");
    len.cu_seqlens_q = meta.cu_seqlens_q.ptr<const int32_t>();
    len.seq_lens = meta.seq_lens.ptr<const int32_t>();
  }
  const int64_t threads = pool.num_threads(), hkv = std::max<int32_t>(shape.num_kv_heads, 1);
  // Query tiles: one row for decodes; for prefill chunks as many consecutive rows of one sequence
  // as still leave ~8 items per thread (a tile's rows read the same key blocks, kept in cache).
  int32_t tile = 1;
  if (meta.max_query_len > 1)
    for (int32_t r : {16, 8, 4, 2})
      if (static_cast<int64_t>(meta.num_tokens) / r * hkv >= 8 * threads) {
        tile = r;
        break;
      }
  AttentionPlan p = plan_attention_tiles(shape, meta.num_tokens, meta.num_seqs, meta.block_size,
                                         meta.max_seq_len, meta.max_query_len, len, tile);
  // Work: a dot product, a softmax term and an accumulation per (query head, key). Split the GQA
  // group when there are too few (tile, kv head) items to keep every thread busy (and the work is
  // worth more than one thread at all).
  const double work = p.query_key_pairs * shape.num_q_heads * (2.0 * shape.head_dim + 16);
  const int64_t group = std::max<int64_t>(1, shape.num_q_heads / hkv);
  const int64_t items = std::max<int64_t>(1, static_cast<int64_t>(p.tiles.size()) * hkv);
  const int64_t want = pool.ranges_for(1, work, 2 * threads);
  p.head_splits = want <= 1 ? 1 : static_cast<int32_t>(std::clamp<int64_t>((want + items - 1) / items, 1, group));
  return p;
}

void paged_attention(ThreadPool& pool, const Tensor& q, const Tensor& k_cache,
                     const Tensor& v_cache, const StepMeta& meta, const AttentionParams& params,
                     Tensor& out) {
  const char* op = "paged_attention";
  const AttnShape a = check_attention_args(q, k_cache, v_cache, meta, out);
  const int64_t T = q.size(0);
  // meta.num_seqs when set: the metadata tensors may be views of larger (padded) buffers.
  const int64_t S = meta.num_seqs > 0 ? meta.num_seqs : meta.cu_seqlens_q.numel() - 1;
  require(meta.cu_seqlens_q.numel() >= S + 1 && meta.seq_lens.numel() >= S, op,
          "cu_seqlens_q / seq_lens shorter than num_seqs");
  if (T == 0 || S <= 0) return;
  const int32_t* cu = meta.cu_seqlens_q.ptr<const int32_t>();
  const int32_t* seq_lens = meta.seq_lens.ptr<const int32_t>();
  const int32_t* tables = meta.block_tables.ptr<const int32_t>();
  require(cu[0] >= 0 && cu[S] <= T, op, "cu_seqlens_q out of range");
  for (int64_t s = 0; s < S; ++s) {
    const int64_t q_len = cu[s + 1] - cu[s], ctx = seq_lens[s];
    require(q_len >= 0 && ctx >= q_len, op, "a sequence has fewer context tokens than new tokens");
    if (q_len == 0) continue;
    require((ctx + a.block_size - 1) / a.block_size <= a.max_blocks, op,
            "block table too short for seq_lens");
    for (int64_t b = 0; b < (ctx + a.block_size - 1) / a.block_size; ++b) {
      const int32_t blk = tables[s * a.max_blocks + b];
      require(blk >= 0 && blk < a.num_blocks, op, "block table entry out of range");
    }
  }

  // The step's plan where it was made for this call, else one for this call alone.
  const AttentionShape shape = attention_shape(a, k_cache.dtype);
  const AttentionPlan* plan = meta.attention_plan;
  AttentionPlan local;
  if (!plan || !plan->from_lengths ||
      !plan->made_for(shape, static_cast<int32_t>(T), static_cast<int32_t>(S), static_cast<int32_t>(a.block_size))) {
    StepMeta m = meta;
    m.num_tokens = static_cast<int32_t>(T);
    m.num_seqs = static_cast<int32_t>(S);
    m.block_size = static_cast<int32_t>(a.block_size);
    local = plan_attention(pool, m, shape, {cu, seq_lens});
    plan = &local;
  }
  // The tiles must describe this step's rows: a plan made from other lengths is an internal error.
  for (const AttentionTile& t : plan->tiles)
    require(t.seq >= 0 && t.seq < S && t.row_begin >= cu[t.seq] && t.row_end <= cu[t.seq + 1] &&
                t.context == seq_lens[t.seq] &&
                t.first_pos == seq_lens[t.seq] - (cu[t.seq + 1] - cu[t.seq]) + (t.row_begin - cu[t.seq]),
            op, "internal: the attention plan was made for other lengths than this step's");

  const int64_t splits = std::clamp<int64_t>(plan->head_splits, 1, a.G);
  const int64_t group = (a.G + splits - 1) / splits;
  const int64_t items = static_cast<int64_t>(plan->tiles.size()) * a.Hkv * splits;
  if (items == 0) return;
  const double work = plan->query_key_pairs * static_cast<double>(a.Hq * (a.D + a.Dv + 16));
  // PAGODA_CPU_ATTENTION=rows: each row of a prefill tile on its own (the path before attend_tile),
  // for side-by-side runs and the test that holds the two paths to each other.
  static const bool tiles_on = [] {
    const char* mode = std::getenv("PAGODA_CPU_ATTENTION");
    return !(mode && std::string_view(mode) == "rows");
  }();
  pool.parallel_for(items, [&](int64_t begin, int64_t end) {
    thread_local Scratch scratch;
    for (int64_t it = begin; it < end; ++it) {
      const AttentionTile& tile = plan->tiles[static_cast<size_t>(it / (a.Hkv * splits))];
      const int64_t kvh = (it / splits) % a.Hkv, part = it % splits;
      const int64_t g0 = part * group, nG = std::min(group, a.G - g0);
      if (nG <= 0) continue;
      const int32_t* table = tables + tile.seq * a.max_blocks;
      const int64_t ctx_end = tile.first_pos + (tile.row_end - tile.row_begin);
      const bool conv = k_cache.dtype != DType::F32 && v_cache.dtype != DType::F32 &&
                        tile.row_end - tile.row_begin > 1 &&
                        convert_context(a, k_cache, v_cache, table, ctx_end, kvh, scratch);
      if (conv && tiles_on) {
        attend_tile(a, q, tile.row_begin, tile.row_end, tile.first_pos, kvh, g0, nG, params, out, scratch,
                    scratch.tile_kt.data(), scratch.tile_v.data());
        continue;
      }
      for (int64_t t = tile.row_begin; t < tile.row_end; ++t)
        attend(a, q, k_cache, v_cache, table, t, tile.first_pos + (t - tile.row_begin), kvh, g0, nG, params, out,
               scratch, conv ? scratch.tile_k.data() : nullptr, conv ? scratch.tile_v.data() : nullptr);
    }
  }, 1, work / static_cast<double>(items));
}

}  // namespace pagoda::cpu
