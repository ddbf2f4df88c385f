// The Vulkan backend's ops over a step's varlen batch: the paged KV cache and attention, the Gated
// DeltaNet state ops, and the mixture-of-experts routing. Launch shapes come from tensor shapes
// and StepMeta's host scalars only; nothing here reads the device.
#include <algorithm>
#include <cstdint>

#include "backend/vulkan/vulkan_backend.h"
#include "backend/vulkan/vulkan_util.h"

namespace pagoda {

using vulkan::dtype_code;
using vulkan::require;
using vulkan::require_f32;
using vulkan::require_i32;
using vulkan::rows_of;
using vulkan::u32;

void VulkanBackend::reshape_and_cache(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, Tensor& k_cache,
                                      Tensor& v_cache) {
  const char* op = "reshape_and_cache";
  require_f32(k, op, "k");
  require_f32(v, op, "v");
  require_i32(slot_mapping, op, "slot_mapping");
  require(k_cache.ndim == 4 && v_cache.ndim == 4 && k_cache.is_contiguous() && v_cache.is_contiguous(), op,
          "caches must be contiguous [num_blocks, block_size, Hkv, head_dim]");
  const int64_t T = rows_of(k), Hkv = k_cache.size(2), D = k_cache.size(3), Dv = v_cache.size(3);
  require(k.row_numel() == Hkv * D && v.row_numel() == Hkv * Dv && rows_of(v) == T, op,
          "k and v must be [T, Hkv, head_dim] as the caches");
  require(slot_mapping.numel() >= T, op, "fewer slots than tokens");
  require(k_cache.numel() < (int64_t{1} << 32) && v_cache.numel() < (int64_t{1} << 32), op,
          "a cache over 2^32 elements (lower the KV cache size)");
  struct {
    uint64_t k, v, slots, k_cache, v_cache;
    uint32_t T, Hkv, D, Dv, k_stride, v_stride, k_dt, v_dt;
  } p{vk_address(k), vk_address(v), vk_address(slot_mapping), vk_address(k_cache), vk_address(v_cache),
      u32(T), u32(Hkv), u32(D), u32(Dv), u32(k.stride0()), u32(v.stride0()), dtype_code(k_cache.dtype, op, "k_cache"),
      dtype_code(v_cache.dtype, op, "v_cache")};
  run("kv_write", p, groups_for(T * Hkv * std::max(D, Dv), 256));
}

void VulkanBackend::paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                    const StepMeta& meta, const AttentionParams& params, Tensor& out) {
  const char* op = "paged_attention";
  require_f32(q, op, "q");
  require_f32(out, op, "out");
  require(k_cache.ndim == 4 && v_cache.ndim == 4, op, "caches must be [num_blocks, block_size, Hkv, head_dim]");
  const int64_t T = rows_of(q), Hkv = k_cache.size(2), D = k_cache.size(3), Dv = v_cache.size(3);
  require(q.row_numel() % D == 0, op, "q rows are not whole heads");
  const int64_t Hq = q.row_numel() / D;
  require(Hq % Hkv == 0, op, "query heads must be a multiple of kv heads");
  require(D <= 512 && Dv <= 512, op, "head_dim over 512 (the shader's limit)");
  require(rows_of(out) == T && out.row_numel() == Hq * Dv, op, "out must be [T, Hq, Dv]");
  require(meta.num_tokens == T, op, "q must have meta.num_tokens rows");
  require(T <= 65535 && Hq <= 65535, op, "more than 65,535 query rows in one call");
  if (T == 0) return;
  struct {
    uint64_t q, k_cache, v_cache, out, cu_seqlens, seq_lens, block_tables;
    uint32_t num_seqs, Hq, Hkv, D, Dv, block_size, max_blocks, q_stride, out_stride, k_dt, v_dt, window;
    float scale, softcap;
  } p{vk_address(q), vk_address(k_cache), vk_address(v_cache), vk_address(out), vk_address(meta.cu_seqlens_q),
      vk_address(meta.seq_lens), vk_address(meta.block_tables), u32(meta.num_seqs), u32(Hq), u32(Hkv), u32(D),
      u32(Dv), u32(k_cache.size(1)), u32(meta.max_blocks_per_seq), u32(q.stride0()), u32(out.stride0()),
      dtype_code(k_cache.dtype, op, "k_cache"), dtype_code(v_cache.dtype, op, "v_cache"),
      u32(std::max(params.sliding_window, 0)), params.scale, params.softcap};
  run("paged_attention", p, u32(T), u32(Hq));
}

void VulkanBackend::causal_conv1d_silu(const Tensor& x, const Tensor& w, Tensor& conv_state, const StepMeta& meta,
                                       Tensor& out) {
  const char* op = "causal_conv1d_silu";
  require_f32(x, op, "x");
  require_f32(out, op, "out");
  require_f32(conv_state, op, "conv_state");
  require(w.ndim == 2 && w.is_contiguous(), op, "w must be a contiguous [C, K] tensor");
  const int64_t T = rows_of(x), C = x.row_numel(), K = w.size(1);
  require(w.size(0) == C && K >= 1 && K <= 8, op, "w must be [C, K] with K <= 8 (the shader's limit)");
  require(conv_state.ndim == 3 && conv_state.size(1) == C && conv_state.size(2) == K - 1, op,
          "conv_state must be [slots, C, K-1]");
  require(rows_of(out) == T && out.row_numel() == C && out.data != x.data, op, "out must be [T, C], not x");
  require(meta.num_tokens == T, op, "x must have meta.num_tokens rows");
  if (meta.num_seqs == 0) return;
  struct {
    uint64_t x, w, state, out, cu_seqlens, state_slots, has_initial;
    uint32_t num_seqs, C, K, x_stride, out_stride, w_dt;
  } p{vk_address(x), vk_address(w), vk_address(conv_state), vk_address(out), vk_address(meta.cu_seqlens_q),
      vk_address(meta.state_slots), vk_address(meta.has_initial_state), u32(meta.num_seqs), u32(C), u32(K),
      u32(x.stride0()), u32(out.stride0()), dtype_code(w.dtype, op, "w")};
  run("conv1d", p, u32((C + 63) / 64), u32(meta.num_seqs));
}

void VulkanBackend::gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& b,
                                     const Tensor& a, const Tensor& A_log, const Tensor& dt_bias, Tensor& state,
                                     const StepMeta& meta, Tensor& out) {
  const char* op = "gated_delta_rule";
  for (const Tensor* t : {&q, &k, &v, &b, &a, static_cast<const Tensor*>(&out)}) require_f32(*t, op, "an input");
  require_f32(state, op, "state");
  require(q.ndim == 3 && k.ndim == 3 && v.ndim == 3, op, "q, k must be [T, Hk, dk] and v [T, Hv, dv]");
  const int64_t T = q.size(0), Hk = q.size(1), dk = q.size(2), Hv = v.size(1), dv = v.size(2);
  require(dk <= 256, op, "key head dim over 256 (the shader's limit)");
  require(Hv % Hk == 0, op, "value heads must be a multiple of key heads");
  require(state.ndim == 4 && state.size(1) == Hv && state.size(2) == dk && state.size(3) == dv, op,
          "state must be [slots, Hv, dk, dv]");
  require(A_log.numel() == Hv && dt_bias.numel() == Hv, op, "A_log and dt_bias must be [Hv]");
  require(meta.num_tokens == T, op, "q must have meta.num_tokens rows");
  require(meta.num_seqs <= 65535 && Hv <= 65535, op, "more than 65,535 sequences or value heads");
  if (meta.num_seqs == 0 || T == 0) return;
  // Both shaders look at every sequence and take those of their kind (rec_max new tokens or fewer:
  // recurrent), so a mixed step needs no host knowledge of the lengths. The chunked pair keeps its
  // state tile in shared memory: dk <= 128; a larger dk stays recurrent.
  uint32_t rec_max = kGdnRecurrentMaxLen;
  if (gdn_path_ == GdnPath::Recurrent || dk > 128) rec_max = UINT32_MAX;
  else if (gdn_path_ == GdnPath::Chunked) rec_max = 0;
  const bool any_long = rec_max != UINT32_MAX && meta.max_query_len > static_cast<int64_t>(rec_max);
  const bool any_short = rec_max > 0 && !(any_long && meta.num_seqs == 1);
  // Scratch: gates (g, β) [T, Hv, 2]; for the chunked pair also row scalars [T, Hv, 8] and the T and
  // QK rows of each chunk [T, Hv, 2 x 64].
  const size_t gate_floats = static_cast<size_t>(T * Hv) * 2, row_floats = static_cast<size_t>(T * Hv) * 8;
  const size_t mat_floats = static_cast<size_t>(T * Hv) * 128;
  require(!any_long || static_cast<uint64_t>(T * Hv) * 128 < (uint64_t{1} << 32), op,
          "a step over 2^32 chunk-matrix elements (lower the prefill chunk size)");
  const uint64_t gb = scratch((gate_floats + (any_long ? row_floats + mat_floats : 0)) * sizeof(float));
  const uint64_t rows = gb + gate_floats * sizeof(float), mats = rows + row_floats * sizeof(float);
  struct {
    uint64_t b, a, A_log, dt_bias, gb;
    uint32_t T, Hv, b_stride, a_stride, A_dt, dt_dt;
  } pg{vk_address(b), vk_address(a), vk_address(A_log), vk_address(dt_bias), gb, u32(T), u32(Hv),
       u32(b.stride0()), u32(a.stride0()), dtype_code(A_log.dtype, op, "A_log"), dtype_code(dt_bias.dtype, op, "dt_bias")};
  run("delta_gates", pg, groups_for(T * Hv, 256));
  if (any_short) {
    struct {
      uint64_t q, k, v, gb, state, out, cu_seqlens, state_slots, has_initial;
      uint32_t Hk, Hv, dk, dv, q_stride, k_stride, v_stride, out_stride, rec_max;
    } p{vk_address(q), vk_address(k), vk_address(v), gb, vk_address(state), vk_address(out),
        vk_address(meta.cu_seqlens_q), vk_address(meta.state_slots), vk_address(meta.has_initial_state), u32(Hk),
        u32(Hv), u32(dk), u32(dv), u32(q.stride0()), u32(k.stride0()), u32(v.stride0()), u32(out.stride0()), rec_max};
    run("delta_rule", p, u32(meta.num_seqs), u32(Hv), u32((dv + 63) / 64));
  }
  if (!any_long) return;
  struct {
    uint64_t q, k, gb, cu_seqlens, mats, rows;
    uint32_t Hk, Hv, dk, q_stride, k_stride, rec_max;
  } pp{vk_address(q), vk_address(k), gb, vk_address(meta.cu_seqlens_q), mats, rows, u32(Hk), u32(Hv), u32(dk),
       u32(q.stride0()), u32(k.stride0()), rec_max};
  run("delta_chunk_prep", pp, u32((meta.max_query_len + 63) / 64), u32(Hv), u32(meta.num_seqs));
  struct {
    uint64_t q, k, v, rows, mats, state, out, cu_seqlens, state_slots, has_initial;
    uint32_t Hk, Hv, dk, dv, q_stride, k_stride, v_stride, out_stride, rec_max;
  } pc{vk_address(q), vk_address(k), vk_address(v), rows, mats, vk_address(state), vk_address(out),
       vk_address(meta.cu_seqlens_q), vk_address(meta.state_slots), vk_address(meta.has_initial_state), u32(Hk),
       u32(Hv), u32(dk), u32(dv), u32(q.stride0()), u32(k.stride0()), u32(v.stride0()), u32(out.stride0()), rec_max};
  run("delta_rule_chunk", pc, u32((dv + 31) / 32), u32(Hv), u32(meta.num_seqs));
}

// ---- mixture of experts ---------------------------------------------------------------------------

void VulkanBackend::moe_route(const Tensor& logits, bool renormalize, Tensor& expert_ids, Tensor& weights) {
  const char* op = "moe_route";
  require_f32(logits, op, "logits");
  require_i32(expert_ids, op, "expert_ids");
  require_f32(weights, op, "weights");
  const int64_t T = rows_of(logits), E = logits.row_numel(), k = expert_ids.row_numel();
  require(k >= 1 && k <= E && E <= 1024, op, "top-k must lie in [1, E], E at most 1024");
  require(rows_of(expert_ids) == T && rows_of(weights) == T && weights.row_numel() == k, op,
          "expert_ids and weights must be [T, k]");
  struct {
    uint64_t logits, expert_ids, weights;
    uint32_t T, E, k, stride, renormalize;
  } p{vk_address(logits), vk_address(expert_ids), vk_address(weights), u32(T), u32(E), u32(k),
      u32(logits.stride0()), renormalize ? 1u : 0u};
  run("moe_route", p, u32((T + 63) / 64));
}

void VulkanBackend::moe_permute(const Tensor& x, const Tensor& expert_ids, Tensor& expert_offsets,
                                Tensor& sorted_slots, Tensor& slot_rows, Tensor& x_sorted) {
  const char* op = "moe_permute";
  require_f32(x, op, "x");
  require_f32(x_sorted, op, "x_sorted");
  for (const Tensor* t : {&expert_ids, static_cast<const Tensor*>(&expert_offsets),
                          static_cast<const Tensor*>(&sorted_slots), static_cast<const Tensor*>(&slot_rows)})
    require_i32(*t, op, "a routing index");
  const int64_t T = rows_of(expert_ids), k = expert_ids.row_numel(), R = T * k, E = expert_offsets.numel() - 1;
  const int64_t H = x.row_numel();
  require(E >= 1 && E <= 1024, op, "1 to 1024 experts");
  require(sorted_slots.numel() >= R && slot_rows.numel() >= R && rows_of(x_sorted) >= R && x_sorted.row_numel() == H,
          op, "outputs must hold T*k rows");
  struct {
    uint64_t expert_ids, offsets, sorted_slots, slot_rows;
    uint32_t R, E;
  } ps{vk_address(expert_ids), vk_address(expert_offsets), vk_address(sorted_slots), vk_address(slot_rows), u32(R),
       u32(E)};
  run("moe_sort", ps, 1);
  struct {
    uint64_t x, rows, out, limit;
    uint32_t R, N, x_stride, out_stride, row_div;
  } pg{vk_address(x), vk_address(sorted_slots), vk_address(x_sorted),
       vk_address(expert_offsets) + static_cast<uint64_t>(E) * sizeof(int32_t), u32(R), u32(H), u32(x.stride0()),
       u32(x_sorted.stride0()), u32(k)};
  run("gather_rows", pg, groups_for(R * H, 256));
}

void VulkanBackend::moe_grouped_linear(const Tensor& x, const Tensor& w, const Tensor& expert_offsets, Tensor& out) {
  const char* op = "moe_grouped_linear";
  require_f32(x, op, "x");
  require_f32(out, op, "out");
  require_i32(expert_offsets, op, "expert_offsets");
  require(w.ndim == 3 && w.is_contiguous(), op, "w must be a contiguous [E, N, K] tensor");
  const int64_t R = rows_of(x), K = x.row_numel(), E = w.size(0), N = w.size(1);
  require(w.size(2) == K && expert_offsets.numel() == E + 1, op, "w must be [E, N, K] with E + 1 offsets");
  require(rows_of(out) == R && out.row_numel() == N, op, "out must be [R, N]");
  require(w.numel() < (int64_t{1} << 32), op, "expert weights over 2^32 elements");
  if (R == 0) return;
  struct {
    uint64_t x, w, offsets, out;
    uint32_t R, N, K, E, x_stride, out_stride, w_dt;
  } p{vk_address(x), vk_address(w), vk_address(expert_offsets), vk_address(out), u32(R), u32(N), u32(K), u32(E),
      u32(x.stride0()), u32(out.stride0()), dtype_code(w.dtype, op, "w")};
  run("moe_linear", p, u32((N + 63) / 64), u32((R + 3) / 4));
}

void VulkanBackend::moe_unpermute(const Tensor& y, const Tensor& weights, const Tensor& slot_rows,
                                  const Tensor& shared, const Tensor& shared_gate, Tensor& out) {
  const char* op = "moe_unpermute";
  require_f32(y, op, "y");
  require_f32(weights, op, "weights");
  require_i32(slot_rows, op, "slot_rows");
  require_f32(out, op, "out");
  const int64_t T = rows_of(out), H = out.row_numel(), k = weights.row_numel();
  require(rows_of(weights) == T && slot_rows.numel() >= T * k && y.row_numel() == H, op,
          "weights [T, k], slot_rows [T*k] and y [R, H] must match out [T, H]");
  require(out.data != y.data, op, "out must not alias y");
  if (!shared.empty()) require_f32(shared, op, "shared");
  if (!shared_gate.empty()) require_f32(shared_gate, op, "shared_gate");
  struct {
    uint64_t y, weights, slot_rows, shared, gate, out;
    uint32_t T, H, k, y_stride, shared_stride, gate_stride, out_stride;
  } p{vk_address(y), vk_address(weights), vk_address(slot_rows), vk_address(shared),
      shared.empty() ? 0 : vk_address(shared_gate), vk_address(out), u32(T), u32(H), u32(k), u32(y.stride0()),
      shared.empty() ? 0 : u32(shared.stride0()), shared_gate.empty() ? 0 : u32(shared_gate.stride0()),
      u32(out.stride0())};
  run("moe_unpermute", p, groups_for(T * H, 256));
}

}  // namespace pagoda
