// Paged attention on CUDA against the CPU backend and a naive double-precision formula: ragged
// lengths, shuffled block tables, partial last blocks, block sizes 8..128, GQA 1..8 (and odd
// ratios), mixed prefill + decode in one launch, chunks starting mid-sequence, sliding window,
// softcap, head dims 64/128/256 and any multiple of 8 (zero-padded), KV caches in bf16/fp16/fp32, split-KV decode.
#include <algorithm>
#include <numeric>
#include <sstream>

#include "gpu_test_util.h"

namespace pagoda::test {
namespace {

struct Seq {
  int q_len;  // new tokens this step
  int ctx;    // context length after the step
};

struct AttnCase {
  int d = 128, hq = 16, hkv = 8, bs = 16;
  DType kv = DType::BF16;
  DType act = DType::BF16;  // F32: the fp32 path (paged_attention_simt.cu) of --dtype float32
  int window = 0;
  float softcap = 0.0f;
  float q_amp = 4.0f;  // larger q: peakier softmax
  bool strided = false;
  int plan_len = 0;  // > 0: meta.max_seq_len as a CUDA graph plans it (max_model_len), not the real one
  std::vector<Seq> seqs;

  std::string describe() const {
    std::ostringstream os;
    os << "act " << dtype_name(act) << " D " << d << " Hq " << hq << " Hkv " << hkv << " bs " << bs << " kv " << dtype_name(kv) << " window "
       << window << " softcap " << softcap << (strided ? " strided" : "") << " plan_len " << plan_len << " seqs";
    for (const Seq& q : seqs) os << " " << q.q_len << "/" << q.ctx;
    return os.str();
  }
};

// Tolerances against the double-precision formula. bf16 KV: p is rounded to bf16 before P·V and the
// output once more; fp16/fp32 KV run with hi/lo bf16 splits (fp32-class), so only the output's
// rounding remains.
// fp32 activations: every step in fp32, so only fp32 rounding of sums over up to a few thousand keys.
double atol_for(const AttnCase& c) { return c.act == DType::F32 ? 1e-5 : c.kv == DType::BF16 ? 1e-2 : 3e-3; }
double rtol_for(const AttnCase& c) { return c.act == DType::F32 ? 1e-4 : c.kv == DType::BF16 ? 2e-2 : 8e-3; }

// A CUDA backend with fp32 activations, made once.
Backend& gpu_f32() {
  static std::unique_ptr<Backend> be = make_cuda_backend(0, DType::F32);
  return *be;
}

void run_case(Backends& be, const AttnCase& c, uint32_t seed) {
  SCOPED_TRACE(c.describe());
  std::mt19937 rng(seed);
  const int nseq = int(c.seqs.size());
  const int group = c.hq / c.hkv;

  // Block tables: each sequence's blocks are drawn from a shuffled pool; the last block is a trap
  // filled with NaN that unused table entries point to.
  std::vector<int> nblk(static_cast<size_t>(nseq));
  int total_blocks = 0, max_blocks = 0;
  for (int s = 0; s < nseq; ++s) {
    nblk[size_t(s)] = (c.seqs[size_t(s)].ctx + c.bs - 1) / c.bs;
    total_blocks += nblk[size_t(s)];
    max_blocks = std::max(max_blocks, nblk[size_t(s)]);
  }
  const int num_blocks = total_blocks + 3, trap = num_blocks - 1;
  const int bt_cols = max_blocks + 2;
  std::vector<int32_t> perm(size_t(num_blocks - 1));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> bt(size_t(nseq * bt_cols), trap);
  for (int s = 0, next = 0; s < nseq; ++s)
    for (int b = 0; b < nblk[size_t(s)]; ++b) bt[size_t(s * bt_cols + b)] = perm[size_t(next++)];

  // Cache pool: NaN everywhere a kernel must not read (slots past each context, the trap block).
  const int64_t row = int64_t(c.hkv) * c.d;
  const size_t pool_n = size_t(num_blocks) * size_t(c.bs) * size_t(row);
  std::vector<float> kpool(pool_n, NAN), vpool(pool_n, NAN);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  auto slot_of = [&](int s, int p) { return int64_t(bt[size_t(s * bt_cols + p / c.bs)]) * c.bs + p % c.bs; };
  for (int s = 0; s < nseq; ++s)
    for (int p = 0; p < c.seqs[size_t(s)].ctx; ++p)
      for (int64_t i = 0; i < row; ++i) {
        kpool[size_t(slot_of(s, p) * row + i)] = round_to(uni(rng), c.kv);
        vpool[size_t(slot_of(s, p) * row + i)] = round_to(uni(rng), c.kv);
      }

  std::vector<int32_t> cu(size_t(nseq + 1), 0), lens(static_cast<size_t>(nseq)), positions, slots;
  int max_q = 0, max_ctx = 0;
  for (int s = 0; s < nseq; ++s) {
    const Seq& q = c.seqs[size_t(s)];
    cu[size_t(s + 1)] = cu[size_t(s)] + q.q_len;
    lens[size_t(s)] = q.ctx;
    max_q = std::max(max_q, q.q_len);
    max_ctx = std::max(max_ctx, q.ctx);
    for (int i = 0; i < q.q_len; ++i) {
      positions.push_back(q.ctx - q.q_len + i);
      slots.push_back(int32_t(slot_of(s, q.ctx - q.q_len + i)));
    }
  }
  const int64_t t = cu.back();
  const int64_t qrow = int64_t(c.hq) * c.d, qwide = c.strided ? qrow + 2 * row : qrow;
  auto q_host = random_vec(rng, size_t(t * qwide), -c.q_amp, c.q_amp);

  // Naive: softmax(scale q·k, causal, window, softcap) v in double.
  const double scale = 1.0 / std::sqrt(double(c.d));
  std::vector<float> want(size_t(t * qrow));
  for (int s = 0; s < nseq; ++s) {
    const Seq& sq = c.seqs[size_t(s)];
    for (int i = 0; i < sq.q_len; ++i) {
      const int64_t tok = cu[size_t(s)] + i;
      const int pos = sq.ctx - sq.q_len + i;
      const int lo = c.window > 0 ? std::max(0, pos - c.window + 1) : 0;
      for (int h = 0; h < c.hq; ++h) {
        const float* qv = &q_host[size_t(tok * qwide + h * c.d)];
        const int kvh = h / group;
        std::vector<double> sc(size_t(pos + 1 - lo));
        double mx = -1e300;
        for (int p = lo; p <= pos; ++p) {
          const float* kv = &kpool[size_t(slot_of(s, p) * row + kvh * c.d)];
          double dot = 0;
          for (int e = 0; e < c.d; ++e) dot += double(qv[e]) * kv[e];
          double x = dot * scale;
          if (c.softcap > 0) x = c.softcap * std::tanh(x / c.softcap);
          sc[size_t(p - lo)] = x;
          mx = std::max(mx, x);
        }
        double l = 0;
        for (double& x : sc) l += (x = std::exp(x - mx));
        for (int e = 0; e < c.d; ++e) {
          double o = 0;
          for (int p = lo; p <= pos; ++p) o += sc[size_t(p - lo)] * vpool[size_t(slot_of(s, p) * row + kvh * c.d + e)];
          want[size_t(tok * qrow + h * c.d + e)] = float(o / l);
        }
      }
    }
  }

  std::vector<float> got[2];
  for (int bi = 0; bi < 2; ++bi) {
    Backend& b = bi == 0 ? (c.act == DType::F32 ? gpu_f32() : *be.gpu) : *be.cpu;
    const DType act = b.activation_dtype();
    auto dq = upload(b, q_host, act, {t, qwide});
    const Tensor q = dq.t.cols(0, qrow).reshape({t, c.hq, c.d});
    auto kc = upload(b, kpool, c.kv, {num_blocks, c.bs, c.hkv, c.d});
    auto vc = upload(b, vpool, c.kv, {num_blocks, c.bs, c.hkv, c.d});
    auto dcu = upload_i32(b, cu, {nseq + 1});
    auto dlens = upload_i32(b, lens, {nseq});
    auto dbt = upload_i32(b, bt, {nseq, bt_cols});
    auto dpos = upload_i32(b, positions, {t});
    auto dslots = upload_i32(b, slots, {t});
    auto dout = empty(b, act, {t, qwide});
    Tensor out = dout.t.cols(0, qrow).reshape({t, c.hq, c.d});
    if (!c.strided) out = dout.t.reshape({t, c.hq, c.d});
    StepMeta meta;
    meta.positions = dpos.t;
    meta.slot_mapping = dslots.t;
    meta.cu_seqlens_q = dcu.t;
    meta.seq_lens = dlens.t;
    meta.block_tables = dbt.t;
    meta.num_tokens = int32_t(t);
    meta.num_seqs = nseq;
    meta.max_query_len = max_q;
    meta.max_seq_len = c.plan_len > 0 ? c.plan_len : max_ctx;
    meta.max_blocks_per_seq = bt_cols;
    meta.block_size = c.bs;
    AttentionParams params;
    params.scale = float(scale);
    params.sliding_window = c.window;
    params.softcap = c.softcap;
    b.paged_attention(c.strided ? q : dq.t.reshape({t, c.hq, c.d}), kc.t, vc.t, meta, params, out);
    got[bi] = download(b, out);
  }
  expect_close(got[0], want, atol_for(c), rtol_for(c), "cuda vs naive");
  expect_close(got[1], want, 1e-3, 1e-3, "cpu vs naive");
  expect_close(got[0], got[1], atol_for(c), rtol_for(c), "cuda vs cpu");
}

// A mixed batch: decodes of ragged lengths, a prefill from zero, chunks starting mid-sequence.
std::vector<Seq> mixed_batch(std::mt19937& rng, int bs) {
  std::vector<Seq> v;
  auto len = [&](int lo, int hi) { return lo + int(rng() % uint32_t(hi - lo + 1)); };
  v.push_back({1, len(1, 3)});                  // decode in a first, partial block
  v.push_back({1, bs * len(2, 5)});             // decode ending exactly on a block boundary
  v.push_back({len(20, 70), 0});                // prefill from zero (ctx set below)
  v.back().ctx = v.back().q_len;
  v.push_back({1, len(100, 400)});
  const int chunk = len(10, 90);
  v.push_back({chunk, chunk + len(50, 300)});   // a chunk in the middle of a long prompt
  v.push_back({1, len(5, 40)});
  v.push_back({3, len(30, 60)});                // a short multi-token step (e.g. speculative)
  return v;
}

TEST(CudaPagedAttention, BlockSizesAndMixedBatches) {
  Backends be;
  std::mt19937 rng(11);
  for (int bs : {8, 16, 32, 64, 128}) {
    AttnCase c;
    c.bs = bs;
    c.seqs = mixed_batch(rng, bs);
    run_case(be, c, 100u + uint32_t(bs));
  }
}

TEST(CudaPagedAttention, GqaRatios) {
  Backends be;
  std::mt19937 rng(12);
  const int ratios[][2] = {{4, 4}, {8, 4}, {16, 4}, {16, 2}, {6, 2}, {12, 4}, {16, 1}, {32, 1}};
  for (const auto& r : ratios) {
    AttnCase c;
    c.hq = r[0];
    c.hkv = r[1];
    c.seqs = mixed_batch(rng, c.bs);
    run_case(be, c, 200u + uint32_t(r[0] * 7 + r[1]));
    // Decode only (the decode tiling when Hq/Hkv <= 16).
    c.seqs = {{1, 77}, {1, 1}, {1, 300}, {1, 16}};
    run_case(be, c, 300u + uint32_t(r[0] * 7 + r[1]));
  }
}

TEST(CudaPagedAttention, HeadDimsAndKvDtypes) {
  Backends be;
  std::mt19937 rng(13);
  for (int d : {64, 128, 256}) {
    for (DType kv : {DType::BF16, DType::F16, DType::F32}) {
      AttnCase c;
      c.d = d;
      c.hq = d == 256 ? 8 : 16;
      c.hkv = d == 256 ? 2 : 8;
      c.kv = kv;
      c.bs = d == 64 ? 32 : 16;
      c.seqs = mixed_batch(rng, c.bs);
      run_case(be, c, 400u + uint32_t(d) + uint32_t(kv));
      c.seqs = {{1, 200}, {1, 33}, {2, 90}};
      run_case(be, c, 500u + uint32_t(d) + uint32_t(kv));
    }
  }
}

TEST(CudaPagedAttention, SmallAndOddHeadDims) {
  // Any multiple of 8 up to 256 runs on the next kernel instance (32/64/128/256) with zero padding.
  Backends be;
  std::mt19937 rng(16);
  for (int d : {8, 16, 24, 32, 40, 56, 72, 96, 136, 200}) {
    for (DType kv : {DType::BF16, DType::F32}) {
      AttnCase c;
      c.d = d;
      c.hq = 4;
      c.hkv = 2;
      c.kv = kv;
      c.seqs = mixed_batch(rng, c.bs);
      run_case(be, c, 1100u + uint32_t(d) + uint32_t(kv));
      c.seqs = {{1, 200}, {1, 1}, {1, 2100}};  // decode, split over CTAs
      run_case(be, c, 1200u + uint32_t(d) + uint32_t(kv));
    }
  }
}

TEST(CudaPagedAttention, GraphPlanFromMaxModelLen) {
  // In graph mode the plan sees max_seq_len = max_model_len: more splits than the real contexts
  // need, so CTAs with empty key ranges must leave the result unchanged.
  Backends be;
  for (int d : {64, 128}) {
    AttnCase c;
    c.d = d;
    c.plan_len = 40960;
    c.seqs = {{1, 1}};
    run_case(be, c, 1300u + uint32_t(d));
    c.seqs = {{1, 1}, {1, 17}, {1, 300}, {1, 5}};
    run_case(be, c, 1310u + uint32_t(d));
    c.seqs.clear();
    for (int i = 0; i < 24; ++i) c.seqs.push_back({1, 1 + 37 * i});
    run_case(be, c, 1320u + uint32_t(d));
  }
}

TEST(CudaPagedAttention, SlidingWindowAndSoftcap) {
  Backends be;
  std::mt19937 rng(14);
  for (int window : {0, 1, 17, 64, 100}) {
    for (float softcap : {0.0f, 5.0f, 30.0f}) {
      AttnCase c;
      c.window = window;
      c.softcap = softcap;
      c.q_amp = softcap > 0 ? 8.0f : 4.0f;
      c.hq = 8;
      c.hkv = 2;
      c.seqs = mixed_batch(rng, c.bs);
      run_case(be, c, 600u + uint32_t(window) * 10u + uint32_t(softcap));
    }
  }
  AttnCase c;
  c.window = 50;
  c.kv = DType::F32;
  c.bs = 8;
  c.seqs = {{200, 200}, {1, 1000}, {64, 500}};
  run_case(be, c, 700);
}

TEST(CudaPagedAttention, SplitKvLongContexts) {
  // Few sequences with long contexts: the planner splits the keys over CTAs and merges.
  Backends be;
  for (DType kv : {DType::BF16, DType::F32}) {
    for (int d : {64, 128, 256}) {
      AttnCase c;
      c.d = d;
      c.kv = kv;
      c.hq = 16;
      c.hkv = d == 256 ? 4 : 8;
      c.seqs = {{1, 5000}, {1, 3333}};
      run_case(be, c, 800u + uint32_t(d));
      c.seqs = {{1, 4097}};
      c.window = 1000;
      run_case(be, c, 900u + uint32_t(d));
      c.window = 0;
      c.seqs = {{37, 2500}};  // a chunk at the end of a long prompt, split as well
      run_case(be, c, 950u + uint32_t(d));
    }
  }
}

TEST(CudaPagedAttention, Fp32ActivationsSimtPath) {
  // --dtype float32: q and out in fp32 through the SIMT kernel, any head_dim up to 256 (odd ones
  // too), every KV dtype, GQA, block sizes, window and softcap, long contexts, strided q.
  Backends be;
  std::mt19937 rng(17);
  for (int d : {5, 16, 24, 64, 100, 128, 256}) {
    for (DType kv : {DType::F32, DType::BF16, DType::F16}) {
      AttnCase c;
      c.act = DType::F32;
      c.d = d;
      c.hq = 8;
      c.hkv = d == 256 ? 1 : 4;
      c.kv = kv;
      c.bs = d == 64 ? 8 : 32;
      c.seqs = mixed_batch(rng, c.bs);
      run_case(be, c, 1400u + uint32_t(d) + uint32_t(kv));
      c.seqs = {{1, 1}, {1, 2100}, {3, 90}};
      run_case(be, c, 1500u + uint32_t(d) + uint32_t(kv));
    }
  }
  AttnCase c;
  c.act = DType::F32;
  c.kv = DType::F32;
  c.window = 50;
  c.softcap = 30.0f;
  c.q_amp = 8.0f;
  c.strided = true;
  c.bs = 128;
  c.seqs = {{200, 200}, {1, 1000}, {64, 500}};
  run_case(be, c, 1600);
}

TEST(CudaPagedAttention, LargeBatchAndStridedQ) {
  Backends be;
  std::mt19937 rng(15);
  AttnCase c;
  c.strided = true;
  for (int i = 0; i < 96; ++i) c.seqs.push_back({1, 1 + int(rng() % 700)});
  c.seqs.push_back({129, 129});
  c.seqs.push_back({65, 300});
  run_case(be, c, 1000);
  c.seqs.clear();
  c.seqs.push_back({300, 300});  // one prefill, several CTAs of query rows
  run_case(be, c, 1001);
}

}  // namespace
}  // namespace pagoda::test
