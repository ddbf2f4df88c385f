// LoRA adapters (PEFT's LoRA: y = W·x + s·B·(A·x), s = alpha / r, or alpha / √r with rsLoRA) as a
// property of the projection: a Linear whose checkpoint tensors an adapter targets keeps every
// adapter's A and B in slots, and one step serves sequences of different adapters (and none)
// together. The delta is a segmented GEMM by adapter, made of the mixture-of-experts primitives
// every backend already has (an adapter is an "expert" of rank r): moe_permute sorts the step's
// rows by adapter slot, moe_grouped_linear shrinks (A) and expands (B), moe_unpermute restores the
// order with a weight of 1 (0 for rows of the base model), add puts it on the output. Fixed shapes
// per step and device-side offsets: CUDA graphs capture it as they capture a MoE layer.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/safetensors.h"

namespace pagoda {

// One PEFT adapter directory (adapter_config.json + adapter_model.safetensors), checked.
struct LoraAdapter {
  std::string name;        // what requests name it by (--lora-modules name=path)
  std::string dir;
  std::string base_model;  // adapter_config.json's base_model_name_or_path (informative)
  int64_t rank = 0;
  float scaling = 0.0f;    // alpha / r, or alpha / √r (use_rslora)
  std::shared_ptr<SafetensorsFile> file;
  // The base weight each module adapts, by canonical name ("model.layers.0.self_attn.q_proj.weight"):
  // its lora_A [r, in] and lora_B [out, r].
  struct Module {
    const TensorView* a = nullptr;
    const TensorView* b = nullptr;
  };
  std::map<std::string, Module> modules;
};

// Reads and checks `dir`: a rank above max_rank, DoRA, trained biases, modules_to_save, a missing
// lora_A / lora_B, a module of no known layer: pagoda::Error naming the file and what to do.
LoraAdapter load_lora_adapter(const std::string& name, const std::string& dir, int64_t max_rank);

// The adapters a model serves, one device slot each (slot i = adapters()[i]), and each step's
// choice of adapter per token. The projections that carry adapters read it in forward().
class LoraSet {
 public:
  LoraSet(Backend& backend, std::vector<LoraAdapter> adapters, int64_t max_rank);

  const std::vector<LoraAdapter>& adapters() const { return adapters_; }
  int32_t num_slots() const { return static_cast<int32_t>(adapters_.size()); }
  int64_t max_rank() const { return max_rank_; }
  // The adapter slot named `name`, or -1.
  int32_t slot_of(const std::string& name) const;

  // Loading: a projection of `in` inputs and `out` outputs took adapter modules (their widths size
  // the workspace), and which modules were taken; after the model has loaded, check_all_used()
  // refuses an adapter with a module no projection took (a target the base model lacks).
  void attached(int64_t in, int64_t out, int64_t rank_columns);
  void mark_used(int32_t slot, const std::string& module) { used_.insert({slot, module}); }
  void check_all_used() const;

  // Allocates the per-step tensors and workspace for steps of up to `max_tokens` tokens.
  void reserve(int32_t max_tokens);
  // Before each step: token t's adapter slot (-1: the base model), for the step's T tokens.
  void set_step(std::span<const int32_t> token_slots);

  // What a projection's forward reads (views of the first T rows).
  struct Step {
    Tensor slots;      // I32 [T, 1]: slot (0 for the base model's rows)
    Tensor weights;    // F32 [T, 1]: 1, or 0 for the base model's rows
    Tensor offsets;    // I32 [S + 1]
    Tensor sorted;     // I32 [T]
    Tensor slot_rows;  // I32 [T]
    Tensor x_sorted, low, y, delta;  // workspace: [T, in], [T, rank columns], [T, out], [T, out]
  };
  Step step(int64_t in, int64_t rank_columns, int64_t out) const;

 private:
  Backend& be_;
  std::vector<LoraAdapter> adapters_;
  int64_t max_rank_ = 0;
  std::set<std::pair<int32_t, std::string>> used_;
  int64_t max_in_ = 0, max_out_ = 0, max_low_ = 0;
  int32_t max_tokens_ = 0, tokens_ = 0;
  Buffer slots_, weights_, offsets_, sorted_, slot_rows_, x_sorted_, low_, y_, delta_;
  std::vector<int32_t> host_slots_;
  std::vector<float> host_weights_;
};

// One projection's adapters: every slot's A stacked [S, R, K] and B [S, N, R] (times the scaling),
// R = parts × max_rank: a fused projection (q | k | v) takes each part's A in its own rows and its
// B block-diagonally, zero where an adapter leaves a part alone.
struct LoraWeights {
  const LoraSet* set = nullptr;
  Tensor a, b;
  int64_t rank_columns = 0;

  // out += Σ over each row's adapter of s·B·(A·x); x [T, K], out [T, N].
  void apply(Backend& be, const Tensor& x, Tensor& out) const;
};

}  // namespace pagoda
