// The projection object: every weight matrix a model multiplies by is a Linear (or, for a
// mixture of experts, an ExpertLinear). The family file declares *what* a projection is — the
// checkpoint tensors it is made of (a parts list), its input width, its sharding — and the
// projection decides *how* it is stored and multiplied: its weight format, its rank's shard, its
// bias, its adapter slots. Adding a weight format (FP8 block scales, packed int4), a sharding or
// a LoRA delta changes this file and the backend, never a family file (docs/architecture.md,
// "Projections").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/lora.h"
#include "model/shard.h"
#include "model/weight_store.h"

namespace pagoda {

// How the weight is stored. Dense: a [out, in] matrix of bf16, f16 or f32 (the backend's linear
// takes any of them). Fp8: e4m3fn with 2-D block scales (Backend::linear_fp8), from an FP8
// checkpoint or quantized at load (io/quantization.h). Int4: 4-bit integers with a scale and zero
// point per group of input columns (Backend::linear_int4), from an AWQ, GPTQ or compressed-tensors
// W4A16 checkpoint.
enum class WeightFormat : uint8_t { Dense, Fp8, Int4 };
const char* weight_format_name(WeightFormat f);

// One logical block of a projection's output rows: rows [begin, end) of checkpoint tensor `weight`
// (of `rows` rows; end -1 = all of them), or the listed rows in that order, plus its bias. A column
// shard takes the same fraction of every part, so q | k | v fused from three tensors, or split out
// of a checkpoint's one qkv_proj, shard alike.
struct LinearPart {
  std::string weight;
  int64_t rows = 0;
  int64_t begin = 0, end = -1;
  std::vector<int64_t> order;  // non-empty: these source rows instead of [begin, end)
  std::string bias;            // canonical name of its bias vector, or empty
  // The whole units (heads) its rows are, when a column shard may have more ranks than units: each
  // unit then goes to world / units ranks (vLLM replicates KV heads so). 0: split the rows evenly.
  int64_t units = 0;

  int64_t num_rows() const { return order.empty() ? (end < 0 ? rows : end) - begin : static_cast<int64_t>(order.size()); }
};

struct LinearSpec {
  std::vector<LinearPart> parts;
  int64_t in_features = 0;  // columns of every part's tensor
  DType dtype = DType::BF16;  // the dtype the dense weight is kept in on the device
  ShardKind shard = ShardKind::Replicated;
  // Only input columns [col_begin, col_end) of the tensors (-1: to the end), e.g. one half of a
  // projection whose input is a concatenation; a row shard splits this range.
  int64_t col_begin = 0, col_end = -1;
  // A row shard whose caller sums the ranks' partial outputs (a block adding several row-parallel
  // products, e.g. routed and shared experts, all-reduces once); the bias still comes from rank 0.
  bool sum_outside = false;
};

class Linear {
 public:
  Linear() = default;
  // Loads the projection's shard for `rank`, with the LoRA adapters of ws.lora() that target its
  // parts. Throws pagoda::Error naming the tensor when it is absent or of another shape, and when
  // the shard does not divide a part's rows (column) or the input (row).
  static Linear load(WeightStore& ws, const LinearSpec& spec, const ShardSpec& rank = {});
  // A projection over a matrix already on the device (a tied lm_head is the embedding table).
  static Linear over(const Tensor& weight);

  // out[T, N] = x[T, K] · Wᵀ + bias. x and out activations (dim 0 may be strided).
  void forward(Backend& be, const Tensor& x, Tensor& out) const;
  // out = this(silu(gate_up[:, :I]) ⊙ gate_up[:, I:]): the MLP's down projection with its
  // activation, which a backend may fuse (act [T, I] is scratch it may leave unwritten).
  void forward_silu_mul(Backend& be, const Tensor& gate_up, Tensor& act, Tensor& out) const;

  bool empty() const { return weight_.empty() && segments_.empty(); }
  int64_t out_features() const;  // of this rank
  int64_t in_features() const;   // of this rank
  DType dtype() const { return weight_.dtype; }
  WeightFormat format() const { return format_; }
  ShardKind shard() const { return shard_; }
  bool has_bias() const { return !biases_.empty(); }
  bool has_lora() const { return lora_ != nullptr; }
  // The weight [out, in] as stored (dense: for a model that shares it, e.g. a tied embedding).
  const Tensor& weight() const { return weight_; }
  const Tensor& scale() const { return scale_; }  // Fp8 and Int4
  // The primitives forward() uses, with the dtypes supports() is asked about.
  void add_ops(DType activation, std::vector<OpUse>& ops) const;

 private:
  struct Bias {
    int64_t col;  // first output column it applies to
    Tensor values;  // F32 [n]
  };
  void add_biases(Backend& be, Tensor& out) const;
  // The weight alone (format, shard, bias, segments): load() without the adapters.
  static Linear load_weights(WeightStore& ws, const LinearSpec& spec, const ShardSpec& rank);

  // The format's product: linear or linear_fp8, or each segment's into its output columns.
  void multiply(Backend& be, const Tensor& x, Tensor& out) const;

  Tensor weight_;
  Tensor scale_;  // Fp8: F32 [ceil(N / block_n), ceil(K / block_k)]; Int4: F32 [N, K / group_]
  int64_t block_n_ = 0, block_k_ = 0;
  Tensor zeros_;  // Int4: I32 [N, ceil(K / group_ / 8)], a nibble per group
  int64_t group_ = 0;
  std::vector<Bias> biases_;
  WeightFormat format_ = WeightFormat::Dense;
  ShardKind shard_ = ShardKind::Replicated;
  bool sum_ = true;  // a row shard all-reduces its output (unless LinearSpec::sum_outside)
  ShardSpec rank_;
  // A projection fused from parts stored in different formats (Qwen3.5's GDN in-projection: q|k|v
  // and z in FP8 or 4 bits beside the small b and a kept in bf16): one Linear per run of parts of one format,
  // each writing its own output columns; weight_ is then empty and the biases and the sum stay here.
  std::vector<Linear> segments_;
  // The LoRA adapters that target this projection's parts (lora.h), added after the bias and
  // before a row shard's sum; null when none does.
  std::shared_ptr<const LoraWeights> lora_;
};

// E experts' projections of one MoE layer, [E, N, K], multiplied per expert over its sorted rows
// (Backend::moe_grouped_linear). Loaded packed ([E, N, K] in one tensor) or from one part list per
// expert.
class ExpertLinear {
 public:
  ExpertLinear() = default;
  // Experts [first, last) of the packed tensor's `experts` (last -1: all).
  static ExpertLinear load_packed(WeightStore& ws, const std::string& name, int64_t experts, int64_t out, int64_t in,
                                  DType dtype, int64_t first = 0, int64_t last = -1);
  // experts[e] = expert e's parts, stacked as its output rows.
  static ExpertLinear load_per_expert(WeightStore& ws, const std::vector<std::vector<LinearPart>>& experts,
                                      int64_t in, DType dtype);
  // Over [E, N, K] weights already on the device (a rank's shard of every expert).
  static ExpertLinear over(const Tensor& weight);

  // out[r, :] = x[r, :] · W[e]ᵀ for the rows of expert e, r in [offsets[e], offsets[e+1]).
  void forward(Backend& be, const Tensor& x, const Tensor& expert_offsets, Tensor& out) const;
  bool empty() const { return weight_.empty(); }
  DType dtype() const { return weight_.dtype; }
  const Tensor& weight() const { return weight_; }

 private:
  Tensor weight_;  // [E, N, K]
};

}  // namespace pagoda
