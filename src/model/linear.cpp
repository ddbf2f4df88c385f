#include "model/linear.h"

#include "core/error.h"
#include "model/linear_fp8.h"
#include "model/linear_int4.h"
#include "model/lora.h"

#include <tuple>
#include <utility>

namespace pagoda {
namespace {

// Rows [lo, hi) of the part's own rows (after its range or order), as a WeightRows block.
WeightRows part_rows(const LinearPart& p, int64_t in, int64_t lo, int64_t hi) {
  WeightRows w{p.weight, {p.rows, in}};
  if (!p.order.empty()) {
    w.order.assign(p.order.begin() + lo, p.order.begin() + hi);
  } else {
    w.begin = p.begin + lo;
    w.end = p.begin + hi;
  }
  return w;
}


// The adapter slots of a projection whose parts `set` wants (columns [col_begin, col_end) of its
// input, its rows as a column shard takes them), zero until the engine loads adapters into them;
// null when the set wants none of its parts.
std::shared_ptr<const LoraWeights> attach_lora(WeightStore& ws, LoraSet& set, const LinearSpec& spec,
                                               const ShardSpec& rank, bool column_shard, int64_t col_begin,
                                               int64_t col_end) {
  bool any = false;
  for (const LinearPart& p : spec.parts) any = any || set.wants(p.weight);
  if (!any) return nullptr;
  const int64_t S = set.num_slots(), R = static_cast<int64_t>(spec.parts.size()) * set.max_rank(), K = col_end - col_begin;
  LoraTarget t;
  t.in_features = spec.in_features;
  t.col_begin = col_begin;
  t.col_end = col_end;
  t.dtype = spec.dtype;
  int64_t N = 0;
  for (const LinearPart& p : spec.parts) {
    const auto [lo, hi] = column_shard ? shard_rows(p.num_rows(), rank, "the rows of " + p.weight, p.units)
                                       : std::pair<int64_t, int64_t>{0, p.num_rows()};
    t.parts.push_back({p.weight, p.rows, p.begin, p.order, lo, hi});
    N += hi - lo;
  }
  auto zeros = [&](int64_t rows, int64_t cols) {
    const std::vector<uint8_t> bytes(static_cast<size_t>(rows * cols) * dtype_size(spec.dtype), 0);
    return ws.upload(bytes.data(), spec.dtype, rows, cols);
  };
  auto w = std::make_shared<LoraWeights>();
  w->set = &set;
  w->rank_columns = R;
  w->a = zeros(S * R, K).reshape({S, R, K});
  w->b = zeros(S * N, R).reshape({S, N, R});
  t.weights = w;
  set.attach(std::move(t));
  return w;
}
}  // namespace

const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::Dense:
      return "dense";
    case WeightFormat::Fp8:
      return "fp8";
    case WeightFormat::Int4:
      return "int4";
  }
  return "?";
}

namespace {

// The input columns [begin, end) of the tensors that this rank's shard of `spec` multiplies: its
// share of them under a row shard, all of spec's columns otherwise.
std::pair<int64_t, int64_t> input_columns(const LinearSpec& spec, ShardKind shard, const ShardSpec& rank) {
  const int64_t begin = spec.col_begin, end = spec.col_end < 0 ? spec.in_features : spec.col_end;
  if (shard != ShardKind::Row) return {begin, end};
  const auto [lo, hi] = shard_rows(end - begin, rank, "the input width of " + spec.parts[0].weight);
  return {begin + lo, begin + hi};
}

}  // namespace

Linear Linear::load(WeightStore& ws, const LinearSpec& spec, const ShardSpec& rank) {
  Linear l = load_weights(ws, spec, rank);
  if (LoraSet* set = ws.lora()) {
    // Over this rank's input columns (a row shard's: A's columns split as the weight's; B whole,
    // its delta summed with the partial products) and its rows (a column shard's: B's rows split).
    const auto [col_begin, col_end] = input_columns(spec, l.shard_, rank);
    l.lora_ = attach_lora(ws, *set, spec, rank, l.shard_ == ShardKind::Column, col_begin, col_end);
  }
  return l;
}

Linear Linear::load_weights(WeightStore& ws, const LinearSpec& spec, const ShardSpec& rank) {
  check_invariant(!spec.parts.empty() && spec.in_features > 0, "Linear::load: an empty projection");
  Linear l;
  l.shard_ = rank.world > 1 ? spec.shard : ShardKind::Replicated;
  l.sum_ = !spec.sum_outside;
  l.rank_ = rank;
  check(l.shard_ != ShardKind::Row || rank.comm != nullptr || spec.sum_outside,
        "a row-parallel projection over " + std::to_string(rank.world) + " ranks needs the group's communicator");
  const auto [col_begin, col_end] = input_columns(spec, l.shard_, rank);
  std::vector<WeightRows> blocks;
  int64_t col = 0;
  for (const LinearPart& p : spec.parts) {
    int64_t lo = 0, hi = p.num_rows();
    if (l.shard_ == ShardKind::Column) std::tie(lo, hi) = shard_rows(hi, rank, "the rows of " + p.weight, p.units);
    blocks.push_back(part_rows(p, spec.in_features, lo, hi));
    // A row-parallel bias is added once, by rank 0, before the sum.
    if (!p.bias.empty() && (l.shard_ != ShardKind::Row || rank.rank == 0)) {
      check(p.order.empty(), "a bias on a reordered part is not supported (" + p.bias + ")");
      // The bias covers either the part alone (q_proj.bias beside q_proj) or, like the weight, the
      // whole fused tensor (qkv_proj.bias): then the part's range applies to it too.
      const std::vector<int64_t>& bshape = ws.shape_of(p.bias);
      const int64_t brows = bshape.size() == 1 ? bshape[0] : -1;
      check(brows == p.rows || brows == p.num_rows(),
            "bias '" + p.bias + "' has " + std::to_string(brows) + " entries; its projection part has " +
                std::to_string(p.num_rows()) + " rows (of " + std::to_string(p.rows) + ")");
      const Tensor full = ws.load(p.bias, DType::F32, {brows});
      const int64_t first = (brows == p.rows ? p.begin : 0) + lo, n = hi - lo;
      Tensor slice = full.reshape({brows, 1}).rows(first, first + n).reshape({n});
      l.biases_.push_back({col, slice});
    }
    col += hi - lo;
  }
  // The format each part is stored in: 4-bit parts have no `.weight` tensor, FP8 ones are e4m3.
  auto stored = [&](const std::string& weight) {
    if (stored_as_int4(ws, weight)) return WeightFormat::Int4;
    check(ws.has(weight) || !ws.quantization().int4(),
          "projection '" + weight + "' is in the checkpoint neither dense nor packed in 4 bits (no 'qweight' or "
          "'weight_packed' beside where it would be): the checkpoint is incomplete");
    return ws.dtype_of(weight) == DType::F8_E4M3 ? WeightFormat::Fp8 : WeightFormat::Dense;
  };
  const std::string& first = spec.parts[0].weight;
  const WeightFormat format = stored(first);
  bool mixed = false;
  for (const LinearPart& p : spec.parts) mixed = mixed || stored(p.weight) != format;
  if (mixed) {
    // Consecutive parts of one format make a segment, loaded as a projection of its own (same
    // shard and columns, no bias, no sum: those stay with the whole).
    for (size_t i = 0; i < spec.parts.size();) {
      const WeightFormat f = stored(spec.parts[i].weight);
      LinearSpec sub = spec;
      sub.parts.clear();
      for (; i < spec.parts.size() && stored(spec.parts[i].weight) == f; ++i) {
        sub.parts.push_back(spec.parts[i]);
        sub.parts.back().bias.clear();
      }
      Linear seg = Linear::load_weights(ws, sub, rank);
      seg.shard_ = ShardKind::Replicated;
      if (seg.format_ != WeightFormat::Dense) l.format_ = seg.format_;
      l.segments_.push_back(std::move(seg));
    }
    return l;
  }
  if (format == WeightFormat::Int4) {
    Int4Weight w = load_int4_weight(ws, blocks, col_begin, col_end);
    l.format_ = WeightFormat::Int4;
    l.weight_ = w.weight;
    l.scale_ = w.scale;
    l.zeros_ = w.zeros;
    l.group_ = w.group;
    return l;
  }
  const WeightQuantization& q = ws.quantization();
  const bool fp8_tensor = format == WeightFormat::Fp8;
  if (fp8_tensor || (q.online && !q.keeps_dense(first))) {
    Fp8Weight f = fp8_tensor ? load_fp8_weight(ws, blocks, col_begin, col_end)
                             : quantize_fp8_weight(ws, blocks, col_begin, col_end);
    l.format_ = WeightFormat::Fp8;
    l.weight_ = f.weight;
    l.scale_ = f.scale;
    l.block_n_ = f.block_n;
    l.block_k_ = f.block_k;
    return l;
  }
  l.weight_ = ws.load_parts(std::move(blocks), spec.dtype, col_begin, col_end);
  return l;
}

Linear Linear::over(const Tensor& weight) {
  Linear l;
  l.weight_ = weight;
  return l;
}

void Linear::add_biases(Backend& be, Tensor& out) const {
  for (const Bias& b : biases_) {
    Tensor part = out.cols(b.col, b.col + b.values.size(0));
    be.add_bias(part, b.values);
  }
}

int64_t Linear::out_features() const {
  if (!segments_.empty()) {
    int64_t n = 0;
    for (const Linear& s : segments_) n += s.out_features();
    return n;
  }
  return weight_.empty() ? 0 : weight_.size(0);
}

int64_t Linear::in_features() const {
  if (!segments_.empty()) return segments_[0].in_features();
  if (weight_.empty()) return 0;
  return format_ == WeightFormat::Int4 ? weight_.size(1) * 8 : weight_.size(1);
}

void Linear::multiply(Backend& be, const Tensor& x, Tensor& out) const {
  if (!segments_.empty()) {
    int64_t col = 0;
    for (const Linear& s : segments_) {
      Tensor part = out.cols(col, col + s.out_features());
      s.multiply(be, x, part);
      col += s.out_features();
    }
    return;
  }
  if (format_ == WeightFormat::Fp8) be.linear_fp8(x, weight_, scale_, block_n_, block_k_, out);
  else if (format_ == WeightFormat::Int4) be.linear_int4(x, weight_, scale_, zeros_, group_, out);
  else be.linear(x, weight_, out);
}

void Linear::forward(Backend& be, const Tensor& x, Tensor& out) const {
  multiply(be, x, out);
  add_biases(be, out);
  if (lora_) lora_->apply(be, x, out);
  if (shard_ == ShardKind::Row && sum_) rank_.comm->all_reduce_sum(be, out);
}

void Linear::forward_silu_mul(Backend& be, const Tensor& gate_up, Tensor& act, Tensor& out) const {
  // The adapter reads the activation, which the fused kernel may leave unwritten.
  if (format_ != WeightFormat::Dense || !segments_.empty() || lora_) {
    be.silu_mul(gate_up, act);
    multiply(be, act, out);
  } else {
    be.linear_silu_mul(gate_up, weight_, act, out);
  }
  add_biases(be, out);
  if (lora_) lora_->apply(be, act, out);
  if (shard_ == ShardKind::Row && sum_) rank_.comm->all_reduce_sum(be, out);
}

void Linear::add_ops(DType activation, std::vector<OpUse>& ops) const {
  if (lora_)
    ops.insert(ops.end(), {{Op::Linear, lora_->a.dtype}, {Op::LoraExpand, lora_->b.dtype}});
  for (const Linear& s : segments_) s.add_ops(activation, ops);
  if (!segments_.empty()) {
    if (!biases_.empty()) ops.push_back({Op::AddBias, activation});
    return;
  }
  if (format_ == WeightFormat::Fp8) ops.push_back({Op::LinearFp8, weight_.dtype});
  else if (format_ == WeightFormat::Int4) ops.push_back({Op::LinearInt4, weight_.dtype});
  else ops.push_back({Op::Linear, weight_.dtype});
  if (!biases_.empty()) ops.push_back({Op::AddBias, activation});
}

ExpertLinear ExpertLinear::load_packed(WeightStore& ws, const std::string& name, int64_t experts, int64_t out,
                                       int64_t in, DType dtype, int64_t first, int64_t last) {
  check(ws.has(name) || !ws.quantization().int4(), "expert weights '" + name + "' are not in the checkpoint: 4-bit "
                                                  "experts are not implemented yet; serve the bf16 checkpoint");
  check(ws.dtype_of(name) != DType::F8_E4M3, "expert weights '" + name + "' are FP8: FP8 experts are not "
                                            "implemented yet; serve the bf16 checkpoint");
  ExpertLinear e;
  if (last < 0) last = experts;
  e.weight_ = ws.load_parts({WeightRows{.name = name, .shape = {experts, out, in}, .begin = first, .end = last}}, dtype)
                  .reshape({last - first, out, in});
  return e;
}

ExpertLinear ExpertLinear::load_per_expert(WeightStore& ws, const std::vector<std::vector<LinearPart>>& experts,
                                           int64_t in, DType dtype) {
  check_invariant(!experts.empty(), "ExpertLinear::load_per_expert: no experts");
  std::vector<WeightRows> blocks;
  int64_t out = 0;
  for (size_t x = 0; x < experts.size(); ++x) {
    int64_t rows = 0;
    for (const LinearPart& p : experts[x]) {
      check(!stored_as_int4(ws, p.weight), "expert weight '" + p.weight + "' is 4-bit: 4-bit experts are not "
                                           "implemented yet; serve the bf16 checkpoint");
      check(ws.dtype_of(p.weight) != DType::F8_E4M3, "expert weight '" + p.weight + "' is FP8: FP8 experts are not "
                                                     "implemented yet; serve the bf16 checkpoint");
      blocks.push_back(part_rows(p, in, 0, p.num_rows()));
      rows += p.num_rows();
    }
    check_invariant(x == 0 || rows == out, "ExpertLinear::load_per_expert: experts of different sizes");
    out = rows;
  }
  ExpertLinear e;
  const auto E = static_cast<int64_t>(experts.size());
  e.weight_ = ws.load_parts(std::move(blocks), dtype).reshape({E, out, in});
  return e;
}

ExpertLinear ExpertLinear::over(const Tensor& weight) {
  check_invariant(weight.ndim == 3, "ExpertLinear::over: weights must be [E, N, K]");
  ExpertLinear e;
  e.weight_ = weight;
  return e;
}

void ExpertLinear::forward(Backend& be, const Tensor& x, const Tensor& expert_offsets, Tensor& out) const {
  be.moe_grouped_linear(x, weight_, expert_offsets, out);
}

}  // namespace pagoda
