// The op table's plumbing: host data of a case to device tensors and back, step metadata.
#include "bench/op_table.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "core/dtype.h"
#include "core/error.h"

namespace pagoda::optable {

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t HostTensor::row_numel() const {
  int64_t n = 1;
  for (size_t k = 1; k < shape.size(); ++k) n *= shape[k];
  return n;
}

const HostTensor& OpData::at(const std::string& name) const {
  const auto it = t.find(name);
  check(it != t.end(), "internal: op table case has no tensor '" + name + "'");
  return it->second;
}

double OpData::param(const std::string& name, double fallback) const {
  const auto it = p.find(name);
  return it == p.end() ? fallback : it->second;
}

float round_to(float v, DType t) {
  switch (t) {
    case DType::BF16: return bf16_to_f32(f32_to_bf16(v));
    case DType::F16: return f16_to_f32(f32_to_f16(v));
    case DType::F8_E4M3: return fp8_e4m3_to_f32(f32_to_fp8_e4m3(v));
    default: return v;
  }
}

HostTensor ints(std::vector<int32_t> v, std::vector<int64_t> shape) {
  HostTensor h;
  h.dtype = DType::I32;
  h.shape = shape.empty() ? std::vector<int64_t>{static_cast<int64_t>(v.size())} : std::move(shape);
  h.i = std::move(v);
  return h;
}

HostTensor random_tensor(uint32_t seed, DType dtype, std::vector<int64_t> shape, float lo, float hi) {
  HostTensor h;
  h.dtype = dtype;
  h.shape = std::move(shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  h.f.resize(static_cast<size_t>(h.numel()));
  for (float& v : h.f) v = round_to(u(rng), dtype);
  return h;
}

HostMeta make_meta(const std::vector<int32_t>& ctx, const std::vector<int32_t>& q_len, int32_t block_size,
                   uint32_t seed, int32_t* num_blocks) {
  HostMeta m;
  m.block_size = block_size;
  std::mt19937 rng(seed);
  const size_t S = ctx.size();
  m.cu_seqlens_q.push_back(0);
  int32_t needed = 0, max_blocks = 0;
  for (size_t s = 0; s < S; ++s) {
    m.cu_seqlens_q.push_back(m.cu_seqlens_q.back() + q_len[s]);
    m.seq_lens.push_back(ctx[s]);
    const int32_t nb = (ctx[s] + block_size - 1) / block_size;
    needed += nb;
    max_blocks = std::max(max_blocks, nb);
  }
  m.max_blocks_per_seq = max_blocks + 1;  // a padding column, as the engine pads its tables
  *num_blocks = needed + 3;               // some blocks belong to nobody
  std::vector<int32_t> perm(static_cast<size_t>(*num_blocks));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  m.block_tables.assign(S * static_cast<size_t>(m.max_blocks_per_seq), 0);
  size_t next = 0;
  for (size_t s = 0; s < S; ++s) {
    const int32_t nb = (ctx[s] + block_size - 1) / block_size;
    for (int32_t b = 0; b < nb; ++b) m.block_tables[s * static_cast<size_t>(m.max_blocks_per_seq) + b] = perm[next++];
    for (int32_t i = 0; i < q_len[s]; ++i) {
      const int32_t pos = ctx[s] - q_len[s] + i;
      m.positions.push_back(pos);
      m.token_ids.push_back(0);
      const int32_t blk = m.block_tables[s * static_cast<size_t>(m.max_blocks_per_seq) + pos / block_size];
      m.slot_mapping.push_back(blk * block_size + pos % block_size);
    }
  }
  return m;
}

namespace {

// The device bytes of a host tensor: values in its dtype, rows padded by row_pad elements.
std::vector<unsigned char> to_bytes(const HostTensor& h) {
  const size_t es = dtype_size(h.dtype);
  const int64_t rows = h.shape.empty() ? 1 : h.shape[0], cols = h.row_numel(), ld = cols + h.row_pad;
  std::vector<unsigned char> out(static_cast<size_t>(std::max<int64_t>(rows * ld, 1)) * es, 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      unsigned char* dst = out.data() + static_cast<size_t>(r * ld + c) * es;
      const size_t src = static_cast<size_t>(r * cols + c);
      if (h.dtype == DType::I32) {
        std::memcpy(dst, &h.i[src], 4);
      } else if (h.dtype == DType::F32) {
        std::memcpy(dst, &h.f[src], 4);
      } else if (h.dtype == DType::F8_E4M3) {
        *dst = f32_to_fp8_e4m3(h.f[src]);
      } else {
        const uint16_t v = h.dtype == DType::BF16 ? f32_to_bf16(h.f[src]) : f32_to_f16(h.f[src]);
        std::memcpy(dst, &v, 2);
      }
    }
  return out;
}

// A 4 MiB pattern of valid random values, repeated over `bytes` (cheap for GiB-sized buffers).
void fill_pattern(Backend& be, void* dst, size_t bytes, DType t, int32_t range) {
  static std::mt19937 rng(1234);
  const size_t es = dtype_size(t), n = std::min<size_t>(bytes, size_t{4} << 20) / es;
  HostTensor h;
  h.dtype = t;
  h.shape = {static_cast<int64_t>(n)};
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t k = 0; k < n; ++k) {
    if (t == DType::I32)
      h.i.push_back(range > 0 ? static_cast<int32_t>(rng() % static_cast<uint32_t>(range)) : 0);
    else
      h.f.push_back(u(rng));
  }
  const std::vector<unsigned char> pat = to_bytes(h);
  for (size_t off = 0; off < bytes; off += pat.size())
    be.copy_to_device(static_cast<char*>(dst) + off, pat.data(), std::min(pat.size(), bytes - off));
}

Tensor make_tensor(void* data, DType t, Device dev, const std::vector<int64_t>& shape) {
  Tensor x(data, t, dev, {1});
  x.ndim = static_cast<int>(shape.size());
  for (size_t k = 0; k < shape.size(); ++k) x.shape[k] = shape[k];
  return x;
}

}  // namespace

DeviceData::DeviceData(Backend& be, const OpData& data, int copies, const std::vector<std::string>& rotate)
    : be_(be), data_(data) {
  for (const auto& [name, h] : data.t) {
    const bool rot = std::find(rotate.begin(), rotate.end(), name) != rotate.end();
    for (int c = 0; c < (rot ? std::max(copies, 1) : 1); ++c) t_[name].push_back(upload(h));
  }
  const HostMeta& m = data.meta;
  const int32_t S = m.num_seqs(), T = static_cast<int32_t>(m.token_ids.size());
  auto opt = [&](const std::vector<int32_t>& v, std::initializer_list<int64_t> dims) {
    return v.empty() ? Tensor() : upload_ints(v, dims);
  };
  meta_.token_ids = opt(m.token_ids, {T});
  meta_.positions = opt(m.positions, {T});
  meta_.cu_seqlens_q = opt(m.cu_seqlens_q, {S + 1});
  meta_.seq_lens = opt(m.seq_lens, {S});
  meta_.block_tables = opt(m.block_tables, {S, m.max_blocks_per_seq});
  meta_.slot_mapping = opt(m.slot_mapping, {T});
  meta_.state_slots = opt(m.state_slots, {S});
  meta_.has_initial_state = opt(m.has_initial_state, {S});
  meta_.num_tokens = m.num_tokens();
  meta_.num_seqs = S;
  meta_.block_size = m.block_size;
  meta_.max_blocks_per_seq = m.max_blocks_per_seq;
  for (int32_t s = 0; s < S; ++s) {
    meta_.max_query_len = std::max(meta_.max_query_len, m.cu_seqlens_q[s + 1] - m.cu_seqlens_q[s]);
    meta_.max_seq_len = std::max(meta_.max_seq_len, m.seq_lens.empty() ? 0 : m.seq_lens[s]);
  }
}

Tensor DeviceData::upload(const HostTensor& h) {
  Tensor x = make_tensor(nullptr, h.dtype, be_.device(), h.shape);
  const int64_t rows = h.shape.empty() ? 1 : h.shape[0];
  const size_t bytes = static_cast<size_t>(rows * (h.row_numel() + h.row_pad)) * dtype_size(h.dtype);
  bufs_.push_back(be_.alloc(std::max<size_t>(bytes, 64)));
  x.data = bufs_.back().data();
  if (h.row_pad) x.row_stride = h.row_numel() + h.row_pad;
  if (h.lazy) {
    fill_pattern(be_, x.data, bytes, h.dtype, h.lazy_range);
  } else {
    check(h.dtype == DType::I32 ? h.i.size() == static_cast<size_t>(h.numel()) : h.f.size() == static_cast<size_t>(h.numel()),
          "internal: op table tensor holds the wrong number of values");
    const std::vector<unsigned char> b = to_bytes(h);
    be_.copy_to_device(x.data, b.data(), bytes);
  }
  return x;
}

Tensor DeviceData::upload_ints(const std::vector<int32_t>& v, std::initializer_list<int64_t> dims) {
  bufs_.push_back(be_.alloc(std::max<size_t>(v.size() * 4, 64)));
  be_.copy_to_device(bufs_.back().data(), v.data(), v.size() * 4);
  return Tensor(bufs_.back().data(), DType::I32, be_.device(), dims);
}

Tensor& DeviceData::t(const std::string& name, int rep) {
  auto it = t_.find(name);
  check(it != t_.end(), "internal: op table case has no tensor '" + name + "'");
  return it->second[static_cast<size_t>(rep) % it->second.size()];
}

void DeviceData::plan_attention(const AttentionShape& shape, int32_t plan_len) {
  AttentionLengths len;
  if (plan_len > 0) {
    meta_.max_seq_len = plan_len;
  } else {
    len.cu_seqlens_q = data_.meta.cu_seqlens_q.data();
    len.seq_lens = data_.meta.seq_lens.data();
  }
  plan_ = std::make_unique<AttentionPlan>(be_.plan_attention(meta_, shape, len));
  meta_.attention_plan = plan_.get();
}

std::map<std::string, std::vector<float>> run_case(Backend& be, const OpCase& c, const OpData& in) {
  DeviceData dev(be, in);
  c.run(be, dev, 0);
  be.synchronize();
  std::map<std::string, std::vector<float>> out;
  for (const std::string& name : c.outputs) {
    const Tensor& x = dev.t(name);
    const HostTensor& h = in.at(name);
    const int64_t rows = h.shape.empty() ? 1 : h.shape[0], cols = h.row_numel(), ld = x.stride0();
    const size_t es = dtype_size(x.dtype);
    std::vector<unsigned char> raw(static_cast<size_t>(rows > 0 ? (rows - 1) * ld + cols : 0) * es);
    if (!raw.empty()) be.copy_to_host(raw.data(), x.data, raw.size());
    std::vector<float>& v = out[name];
    v.resize(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < cols; ++k) {
        const unsigned char* p = raw.data() + static_cast<size_t>(r * ld + k) * es;
        float f = 0.0f;
        uint16_t b16 = 0;
        int32_t i32 = 0;
        switch (x.dtype) {
          case DType::F32: std::memcpy(&f, p, 4); break;
          case DType::BF16: std::memcpy(&b16, p, 2); f = bf16_to_f32(b16); break;
          case DType::F16: std::memcpy(&b16, p, 2); f = f16_to_f32(b16); break;
          case DType::F8_E4M3: f = fp8_e4m3_to_f32(*p); break;
          case DType::I32: std::memcpy(&i32, p, 4); f = static_cast<float>(i32); break;
          default: break;
        }
        v[static_cast<size_t>(r * cols + k)] = f;
      }
  }
  return out;
}

}  // namespace pagoda::optable
