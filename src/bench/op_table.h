// The op table (docs/design.md §3, §9): every backend op's cases written once — shapes, ragged varlen
// batches (decodes, chunked prefills, shuffled block tables), GQA ratios, head dims, dtypes — and
// run on any backend through the Backend interface. Two modes over the same runners:
//  - test (tests/backend/op_table_test.cpp): each test case on every compiled backend, against the
//    CPU op and a naive formula written in the test;
//  - perf (`pagoda bench kernels`, bench/kernel_bench.cpp): the perf cases at model shapes, timed,
//    with the bytes and FLOPs they must move and compute.
// A case's data lives on the host as fp32 values already rounded to the dtype the tensor has on the
// device (ints as int32), so every backend and every reference sees the very same numbers.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"

namespace pagoda::optable {

struct HostTensor {
  DType dtype = DType::F32;   // its dtype on the device
  std::vector<int64_t> shape;
  std::vector<float> f;       // float values, row-major (dense: no padding)
  std::vector<int32_t> i;     // I32 values
  int64_t row_pad = 0;        // extra elements after every dim-0 row on the device (a strided view)
  // Perf cases at model shapes: no host values; the device copy is filled from a repeating pattern
  // of random values (ints in [0, lazy_range)).
  bool lazy = false;
  int32_t lazy_range = 0;

  int64_t numel() const;
  int64_t row_numel() const;  // product of the dims after the first
  float at(int64_t idx) const { return f[static_cast<size_t>(idx)]; }
};

// A perf case's tensor: no host values, the device copy filled from a pattern (HostTensor::lazy).
inline HostTensor lazy(DType dt, std::vector<int64_t> shape, int32_t range = 0) {
  HostTensor h;
  h.dtype = dt;
  h.shape = std::move(shape);
  h.lazy = true;
  h.lazy_range = range;
  return h;
}

// Bytes of one element, as a double (perf cases' byte counts).
inline double es(DType t) { return static_cast<double>(dtype_size(t)); }

// The step metadata of a case, on the host (docs/design.md §4).
struct HostMeta {
  std::vector<int32_t> token_ids, positions, cu_seqlens_q, seq_lens, block_tables, slot_mapping,
      state_slots, has_initial_state;
  int32_t max_blocks_per_seq = 0;
  int32_t block_size = 0;
  int32_t num_seqs() const { return cu_seqlens_q.empty() ? 0 : static_cast<int32_t>(cu_seqlens_q.size()) - 1; }
  int32_t num_tokens() const { return cu_seqlens_q.empty() ? 0 : cu_seqlens_q.back(); }
};

// Inputs of one case (and, after a run, its outputs under the same names).
struct OpData {
  std::map<std::string, HostTensor> t;
  std::map<std::string, double> p;  // scalar parameters (eps, zero_centered, window, ...)
  HostMeta meta;
  const HostTensor& at(const std::string& name) const;
  double param(const std::string& name, double fallback = 0.0) const;
};

// Device copies of a case's tensors (`copies` of each rotated one, so that timed repetitions do not
// run from the cache), its StepMeta and attention plan.
class DeviceData {
 public:
  DeviceData(Backend& be, const OpData& data, int copies = 1, const std::vector<std::string>& rotate = {});
  Tensor& t(const std::string& name, int rep = 0);
  const StepMeta& meta() const { return meta_; }
  StepMeta& meta() { return meta_; }
  // Plans attention for the step (Backend::plan_attention with the host lengths) and stores it.
  // plan_len > 0: as under graph capture, from max_seq_len = plan_len and no lengths.
  void plan_attention(const AttentionShape& shape, int32_t plan_len = 0);
  Backend& backend() { return be_; }

 private:
  Tensor upload(const HostTensor& h);
  Tensor upload_ints(const std::vector<int32_t>& v, std::initializer_list<int64_t> dims);
  Backend& be_;
  const OpData& data_;
  std::vector<Buffer> bufs_;
  std::map<std::string, std::vector<Tensor>> t_;
  StepMeta meta_;
  std::unique_ptr<AttentionPlan> plan_;
};

// Tolerance of a comparison: |got - want| <= atol + rtol * |want| element-wise.
struct Tol {
  double atol = 0, rtol = 0;
};

struct OpCase {
  std::string op;     // the Backend method
  std::string label;  // shape and parameters, unique within the op
  // Makes the inputs for a backend whose activation dtype is `act` (values rounded to it).
  std::function<OpData(DType act)> make;
  // Runs the op once; `rep` selects the copy of rotated tensors (perf mode).
  std::function<void(Backend&, DeviceData&, int rep)> run;
  std::vector<std::string> outputs;  // tensors compared after a run (in/out ones included)
  // Tolerance against the naive formula and against the CPU op, by activation dtype and output.
  std::function<Tol(DType act, const std::string& output)> tol;
  // Perf accounting: bytes that must move (each input read once, each output written once) and
  // floating-point operations; tensors rotated between repetitions.
  std::function<double(DType act)> bytes, flops;
  std::vector<std::string> rotate;
  // Why `be` cannot run this case (empty: it can). A test reports such a case as skipped, by name.
  std::function<std::string(Backend& be)> unsupported;
  // Too slow for the CPU backend under the sanitizers in CI (long contexts); run where
  // PAGODA_OPTABLE_LARGE=1 and always as the CPU reference of another backend.
  bool large = false;
};

// The case's tolerance: `f32` for fp32 activations, `bf16` for bf16 ones.
std::function<Tol(DType, const std::string&)> tol_by_act(Tol f32, Tol bf16);
// An unsupported() that names the backends (by Backend::device()) that lack a feature.
std::function<std::string(Backend&)> not_on_cuda(std::string why);

// The test cases: small shapes covering the contract's corners (fast on the CPU under ASan).
std::vector<OpCase> test_cases();
// The perf cases: the shapes of the models we serve. quick: fewer of them.
std::vector<OpCase> perf_cases(bool quick);
// The test cases of one family of ops (op_table_*.cpp).
void add_dense_cases(std::vector<OpCase>& out);
void add_attention_cases(std::vector<OpCase>& out);
void add_gdn_cases(std::vector<OpCase>& out);
void add_moe_cases(std::vector<OpCase>& out);
void add_lora_cases(std::vector<OpCase>& out);
void add_vision_cases(std::vector<OpCase>& out);
// Perf cases of the MoE ops at a Qwen3-30B-A3B layer's shapes (op_table_moe.cpp).
void add_moe_perf_cases(std::vector<OpCase>& out, bool quick);
// Perf cases of lora_expand at a Qwen3-8B projection (op_table_lora.cpp).
void add_lora_perf_cases(std::vector<OpCase>& out);
// Perf cases of the vision encoder's ops at Qwen3.5-9B's vision tower (op_table_vision.cpp).
void add_vision_perf_cases(std::vector<OpCase>& out, bool quick);

// Runs a case on `be` and returns its outputs (fp32 values; ints as floats), by name.
std::map<std::string, std::vector<float>> run_case(Backend& be, const OpCase& c, const OpData& in);

// Builds (host) the block tables and slot mapping of ragged sequences: sequence s has ctx[s]
// tokens of context after the step, the last q_len[s] of them new. Blocks are dealt out in a
// shuffled order (some belong to nobody), tables padded with one spare column.
HostMeta make_meta(const std::vector<int32_t>& ctx, const std::vector<int32_t>& q_len, int32_t block_size,
                   uint32_t seed, int32_t* num_blocks);

// Bits of every case builder.
float round_to(float v, DType t);
HostTensor random_tensor(uint32_t seed, DType dtype, std::vector<int64_t> shape, float lo = -1.0f,
                         float hi = 1.0f);
// I32 values with their shape (empty: one dimension of v.size()).
HostTensor ints(std::vector<int32_t> v, std::vector<int64_t> shape = {});

}  // namespace pagoda::optable
