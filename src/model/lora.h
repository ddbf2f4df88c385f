// LoRA adapters (PEFT's LoRA: y = W·x + s·B·(A·x), s = alpha / r, or alpha / √r with rsLoRA) as a
// property of the projection: a Linear whose checkpoint tensors an adapter targets keeps every
// adapter's A and B in slots, and one step serves sequences of different adapters (and none)
// together. The delta is Punica's shrink / expand: one `linear` of the step's rows by every slot's
// A stacked ([S·R, K]: each row gets every slot's R low-rank values, a few columns beside the
// projection's own), then `lora_expand` adds to each row B of its own slot times its slot's R
// values (rows of the base model untouched). Fixed shapes per step, slots read on the device: CUDA
// graphs capture it as any other projection.
#pragma once

#include <cstdint>
#include <list>
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

struct LoraWeights;

// What a projection that carries adapters tells the set at load, so that any adapter can be
// written into any of its slots later: its parts as the checkpoint names them (with this rank's
// rows of each), its input columns, and its slot tensors.
struct LoraTarget {
  struct Part {
    std::string weight;          // canonical checkpoint name ("model.layers.0.self_attn.q_proj.weight")
    int64_t rows = 0;            // the checkpoint tensor's rows (an adapter's lora_B must have as many)
    int64_t begin = 0;           // first source row of the part
    std::vector<int64_t> order;  // non-empty: these source rows instead
    int64_t lo = 0, hi = 0;      // this rank's rows of the part
  };
  std::vector<Part> parts;
  int64_t in_features = 0;             // the checkpoint tensors' columns (an adapter's lora_A width)
  int64_t col_begin = 0, col_end = 0;  // this rank's input columns
  DType dtype = DType::F32;            // the slot tensors' (the projection's dense dtype)
  std::shared_ptr<LoraWeights> weights;
};

// A worker's adapter slots (--max-loras of them) and the adapters it has read (--max-cpu-loras,
// least recently used dropped first and read again from their directory when needed): which
// adapter each slot holds is the engine's choice (engine/lora_slots.h), made once per step for
// every worker; this writes an adapter into a slot of every projection that carries slots, and
// gives each step's rows their slots. Adapters are named here by the engine's ids.
class LoraSet {
 public:
  // all_projections: every decoder projection carries slots (adapters may be loaded at run time);
  // else only those an adapter passed to expect() before the model loads targets.
  LoraSet(Backend& backend, int32_t slots, int64_t max_rank, int32_t host_adapters, bool all_projections);

  int32_t num_slots() const { return slots_count_; }
  int64_t max_rank() const { return max_rank_; }

  // Before the model loads: an adapter known from the start (its modules decide which projections
  // carry slots); it is kept read.
  void expect(int32_t id, LoraAdapter adapter);
  // Whether a projection with a part of checkpoint weight `weight` carries slots.
  bool wants(const std::string& weight) const;
  // Loading: a projection's slots (zero: no adapter yet).
  void attach(LoraTarget target);

  // Refuses (pagoda::Error naming the file) an adapter with a module no projection carries (a
  // target the base model lacks, or one kept unadapted) or of another model's shapes. Reads only
  // what loading left: safe from any thread once the model has loaded.
  void validate(const LoraAdapter& adapter) const;

  // Before a step: adapter `id` (directory `dir`, read again if it is no longer kept) into `slot`
  // of every projection.
  void load(int32_t slot, int32_t id, const std::string& name, const std::string& dir);

  // Allocates the per-step tensors and workspace for steps of up to `max_tokens` tokens.
  void reserve(int32_t max_tokens);
  // Before each step: token t's adapter slot (-1: the base model), for the step's T tokens.
  void set_step(std::span<const int32_t> token_slots);

  // What a projection's forward reads (views of the first T rows).
  struct Step {
    Tensor slots;  // I32 [T]: each row's slot, -1 for the base model's rows
    Tensor low;    // workspace [T, S · rank columns]: every slot's shrink of each row
  };
  Step step(int64_t rank_columns) const;

 private:
  const LoraAdapter& adapter(int32_t id, const std::string& name, const std::string& dir);
  void write(const LoraTarget& t, int32_t slot, const LoraAdapter& a);

  Backend& be_;
  int32_t slots_count_ = 0;
  int64_t max_rank_ = 0;
  int32_t host_adapters_ = 0;
  bool all_projections_ = false;
  std::set<std::string> wanted_;                       // modules of the adapters expected at start
  std::list<std::pair<int32_t, LoraAdapter>> kept_;    // read adapters, most recently used first
  std::vector<LoraTarget> targets_;
  int64_t max_low_ = 0;
  int32_t max_tokens_ = 0, tokens_ = 0;
  Buffer slots_, low_;
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
