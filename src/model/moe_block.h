// The sparse mixture-of-experts MLP shared by the MoE families (Qwen3-MoE, Qwen3.5-MoE; docs/models.md
// "Mixture of experts"): router → softmax in fp32 → top-k (renormalised when norm_topk_prob) → one
// SwiGLU per expert over the tokens routed to it → their weighted sum, plus a shared expert scaled
// by sigmoid(shared_expert_gate · x) where the family has one. The config fields live in MoeFields
// (the family's FamilyFields); a family with MoeFields gets this block in the layers `sparse()`
// names and the dense GLU MLP in the others, from the same decoder loop (dense_decoder.h,
// qwen3_5.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "io/config_reader.h"
#include "io/model_config.h"
#include "model/layers.h"
#include "model/weight_store.h"

namespace pagoda {

struct MoeFields : FamilyFields {
  int64_t num_experts = 0;                      // E (num_experts)
  int64_t experts_per_token = 0;                // k (num_experts_per_tok)
  int64_t expert_intermediate_size = 0;         // moe_intermediate_size
  int64_t shared_expert_intermediate_size = 0;  // 0: no shared expert
  bool norm_topk_prob = true;                   // renormalise the top-k probabilities
  int64_t decoder_sparse_step = 1;              // layer i is sparse when (i + 1) % step == 0 ...
  std::vector<int64_t> mlp_only_layers;         // ... and i is not listed here (dense GLU MLP)

  // Whether layer `layer` runs the experts (transformers' Qwen3MoeDecoderLayer test).
  bool sparse(int64_t layer) const;
  int64_t num_sparse_layers(int64_t num_layers) const;
};

// What a family's transformers config does with the MoE fields: its defaults, and which fields it
// reads at all (Qwen3.5-MoE always renormalises, has no dense layers and always a shared expert).
struct MoeConfigRules {
  int64_t default_num_experts = 0, default_experts_per_token = 0, default_expert_intermediate_size = 0;
  bool reads_norm_topk_prob = false;
  bool default_norm_topk_prob = true;
  bool reads_sparse_layout = false;  // decoder_sparse_step and mlp_only_layers
  bool shared_expert = false;        // shared_expert_intermediate_size is read (required)
};

// Reads the MoE fields into c->family_fields (a MoeFields); names the field on a bad value.
void read_moe_fields(const ConfigReader& r, const MoeConfigRules& rules, ModelConfig* c);
// The config's MoeFields, or null for a family without experts.
const MoeFields* moe_fields(const ModelConfig& cfg);
// Whether layer `layer` of this config runs the experts (false for families without them).
bool is_sparse_layer(const ModelConfig& cfg, int64_t layer);

struct MoeWeights {
  // [E, H] router rows, then (with a shared expert) the shared expert's gate row: one GEMM gives
  // the router logits and the gate logit.
  Linear router;
  ExpertLinear gate_up;  // [E, 2I, H]: per expert I gate rows then I up rows
  ExpertLinear down;     // [E, H, I]
  // Under tensor parallelism every expert's columns are sharded (gate | up by rows, down by columns),
  // so the routed and shared outputs are partial sums, which the decoder sums once (moe_forward).
  MlpWeights shared;  // [2Is, H] and [H, Is]; empty without a shared expert
  // Expert parallelism (ShardSpec::expert_parallel): gate_up and down hold experts
  // [first_expert, first_expert + their E) whole; the routed rows of the others are this rank's zeros.
  int64_t first_expert = 0;
};

// Loads layer `layer`'s experts from either layout: packed (mlp.experts.gate_up_proj [E, 2I, H],
// mlp.experts.down_proj [E, H, I], what transformers 5 keeps in memory) or one tensor per expert
// (mlp.experts.{e}.gate_proj / up_proj / down_proj.weight, the released Qwen3-MoE checkpoints).
// `cfg` is the whole model's; `shard` this rank's place (its I / world columns of every expert).
MoeWeights load_moe(WeightStore& ws, const ModelConfig& cfg, int layer, DType wdtype, const ShardSpec& shard = {});

// Scratch of one step, sized at reserve() for the largest step (T tokens, R = T·k routed rows).
struct MoeScratch {
  Tensor router;                         // [T, E (+1)] activations
  Tensor expert_ids, weights;            // [T, k] I32 / F32
  Tensor offsets;                        // [E + 1] I32
  Tensor sorted_slots, slot_rows;        // [R, 1] I32
  Tensor x_sorted, y;                    // [R, H]
  Tensor gate_up, act;                   // [R, 2I], [R, I]
  Tensor shared_gate_up, shared_act, shared_out;  // [T, 2Is], [T, Is], [T, H]; empty without
};
using ScratchAlloc = std::function<Tensor(int64_t rows, int64_t cols, DType dtype)>;
MoeScratch reserve_moe(const ModelConfig& cfg, int64_t max_tokens, DType act, const ScratchAlloc& alloc);

// Appends the primitives moe_forward uses (activations `act`, projection weights `wdtype`).
void add_moe_ops(const ModelConfig& cfg, DType act, DType wdtype, std::vector<OpUse>& ops);

// x [T, H] (normed input) -> out [T, H]; over several ranks, this rank's partial sum of it (the
// decoder sums the ranks' once, fused with its next norm: DecoderBase::add_norm).
void moe_forward(Backend& be, const ModelConfig& cfg, const MoeWeights& w, const Tensor& x, MoeScratch& s,
                 Tensor& out);

// Parameters of the whole model and those one token uses (the router picks k of E experts), from
// the config alone, counted as transformers' modules hold them. The vision tower and MTP head are
// not part of either.
struct ParameterCounts {
  int64_t total = 0, active = 0;
};
// gated_attention: q_proj holds an output gate per head (Qwen3.5's attention layers).
ParameterCounts moe_parameter_counts(const ModelConfig& cfg, bool gated_attention);
// {label, value} lines for `pagoda info`: the experts, the sparse layers and the parameter counts.
std::vector<std::pair<std::string, std::string>> describe_moe(const ModelConfig& cfg, bool gated_attention);

}  // namespace pagoda
