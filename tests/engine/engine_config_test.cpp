// Device, dtypes and sizes resolved once (engine/engine_config.h). Host logic: the cuda cases run
// without a GPU. The expected values are the documented rules, not pagoda's output.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "engine/engine_config.h"

namespace pagoda {
namespace {

ModelConfig model_of(DType checkpoint) {
  ModelConfig m;
  m.dtype = checkpoint;
  m.max_position_embeddings = 4096;
  return m;
}

ResolvedEngineConfig resolve(const std::string& device, const std::string& dtype, DType checkpoint,
                             const std::string& kv = "auto") {
  EngineConfig c;
  c.device = device;
  c.dtype = dtype;
  c.kv_cache_dtype = kv;
  return resolve_engine_config(c, model_of(checkpoint));
}

TEST(EngineConfig, Float32OnCudaGivesAnFp32KvCache) {
  // The bug of issue 14: `serve --device cuda --dtype float32` computed in fp32 and reported bf16.
  const ResolvedEngineConfig r = resolve("cuda", "float32", DType::BF16);
  EXPECT_EQ(r.activation_dtype, DType::F32);
  EXPECT_EQ(r.model_dtype, DType::F32);
  EXPECT_EQ(r.kv_cache_dtype, DType::F32);
  EXPECT_NE(r.describe().find("kv cache float32"), std::string::npos) << r.describe();
  EXPECT_STREQ(torch_dtype_name(r.kv_cache_dtype), "float32");
}

TEST(EngineConfig, AutoOnCudaIsBfloat16WhateverTheCheckpoint) {
  for (DType ckpt : {DType::BF16, DType::F16, DType::F32}) {
    const ResolvedEngineConfig r = resolve("cuda", "auto", ckpt);
    EXPECT_EQ(r.activation_dtype, DType::BF16) << dtype_name(ckpt);
    EXPECT_EQ(r.model_dtype, DType::BF16) << dtype_name(ckpt);
    EXPECT_EQ(r.kv_cache_dtype, DType::BF16) << dtype_name(ckpt);
  }
}

TEST(EngineConfig, AutoOnCpuKeepsTheCheckpointDtypeAndComputesInFp32) {
  for (DType ckpt : {DType::BF16, DType::F16, DType::F32}) {
    const ResolvedEngineConfig r = resolve("cpu", "auto", ckpt);
    EXPECT_EQ(r.activation_dtype, DType::F32) << dtype_name(ckpt);
    EXPECT_EQ(r.model_dtype, ckpt) << dtype_name(ckpt);
    EXPECT_EQ(r.kv_cache_dtype, ckpt) << dtype_name(ckpt);
  }
  EXPECT_EQ(resolve("cpu", "float32", DType::BF16).kv_cache_dtype, DType::F32);
}

TEST(EngineConfig, AutoKvCacheIsTheModelDtypeEverywhere) {
  // One rule: an `auto` KV cache is the model dtype, for every device, --dtype and checkpoint.
  const std::pair<const char*, std::vector<const char*>> cases[] = {
      {"cpu", {"auto", "float32", "fp32"}}, {"cuda", {"auto", "float32", "bfloat16", "bf16"}}};
  for (const auto& [device, dtypes] : cases)
    for (const char* dtype : dtypes)
      for (DType ckpt : {DType::BF16, DType::F16, DType::F32}) {
        const ResolvedEngineConfig r = resolve(device, dtype, ckpt);
        EXPECT_EQ(r.kv_cache_dtype, r.model_dtype) << device << " " << dtype << " " << dtype_name(ckpt);
        // An explicit --dtype is the model dtype, and what the device computes in.
        if (std::string(dtype) != "auto") {
          EXPECT_EQ(r.model_dtype, r.activation_dtype) << device << " " << dtype;
        }
      }
}

TEST(EngineConfig, AnExplicitKvCacheDtypeWins) {
  EXPECT_EQ(resolve("cuda", "float32", DType::BF16, "bf16").kv_cache_dtype, DType::BF16);
  EXPECT_EQ(resolve("cpu", "auto", DType::BF16, "fp32").kv_cache_dtype, DType::F32);
  EXPECT_EQ(resolve("cuda", "auto", DType::BF16, "fp16").kv_cache_dtype, DType::F16);
  // FP8 (vLLM's fp8 / fp8_e4m3): the CPU and CUDA backends'; refused by name on Vulkan.
  EXPECT_EQ(resolve("cpu", "auto", DType::BF16, "fp8").kv_cache_dtype, DType::F8_E4M3);
  EXPECT_EQ(resolve("cpu", "auto", DType::BF16, "fp8_e4m3").kv_cache_dtype, DType::F8_E4M3);
  EXPECT_EQ(resolve("cuda", "auto", DType::BF16, "fp8").kv_cache_dtype, DType::F8_E4M3);
  EXPECT_EQ(resolve("cuda", "float32", DType::BF16, "fp8_e4m3").kv_cache_dtype, DType::F8_E4M3);
  EXPECT_THROW(resolve("vulkan", "auto", DType::BF16, "fp8"), Error);
  EXPECT_THROW(resolve("vulkan:0", "auto", DType::BF16, "fp8"), Error);
  EXPECT_THROW(resolve("cpu", "auto", DType::BF16, "fp8_e5m2"), Error);
}

TEST(EngineConfig, VulkanComputesAndKeepsTheModelInFloat32) {
  for (const char* device : {"vulkan", "vulkan:1"})
    for (DType ckpt : {DType::BF16, DType::F32}) {
      const ResolvedEngineConfig r = resolve(device, "auto", ckpt);
      EXPECT_EQ(r.activation_dtype, DType::F32) << device;
      EXPECT_EQ(r.model_dtype, DType::F32) << device;
      EXPECT_EQ(r.kv_cache_dtype, DType::F32) << device;
    }
  EXPECT_EQ(resolve("vulkan", "auto", DType::BF16, "bf16").kv_cache_dtype, DType::BF16);
  EXPECT_THROW(resolve("vulkan", "bfloat16", DType::BF16), Error);
}

TEST(EngineConfig, TheBackendFactoryReadsDtypeAsTheEngineDoes) {
  // make_backend and resolve_engine_config take --dtype through one function: same answer, same refusal.
  for (const char* device : {"cpu", "cuda", "vulkan"})
    for (const char* dtype : {"auto", "float32", "fp32", "bfloat16", "bf16", "float16", "half", "int8"}) {
      std::string engine_error, backend_error;
      DType engine = DType::I32, backend = DType::I32;
      try {
        engine = resolve(device, dtype, DType::BF16).activation_dtype;
      } catch (const Error& e) {
        engine_error = e.what();
      }
      try {
        backend = parse_activation_dtype(dtype, device);
      } catch (const Error& e) {
        backend_error = e.what();
      }
      EXPECT_EQ(engine, backend) << device << " " << dtype;
      EXPECT_EQ(engine_error, backend_error) << device << " " << dtype;
    }
}

TEST(EngineConfig, RefusesWhatTheDeviceCannotDo) {
  EXPECT_THROW(resolve("cpu", "bfloat16", DType::BF16), Error);
  EXPECT_THROW(resolve("cuda", "float16", DType::BF16), Error);
  EXPECT_THROW(resolve("cuda", "int8", DType::BF16), Error);
  EXPECT_THROW(resolve("tpu", "auto", DType::BF16), Error);
}

TEST(EngineConfig, SizesDefaultPerDeviceAndFollowTheModel) {
  const ResolvedEngineConfig cpu = resolve("cpu", "auto", DType::BF16);
  EXPECT_EQ(cpu.max_num_seqs, 64);
  EXPECT_EQ(cpu.max_num_batched_tokens, 2048);
  EXPECT_EQ(cpu.max_model_len, 4096);
  const ResolvedEngineConfig cuda = resolve("cuda", "auto", DType::BF16);
  EXPECT_EQ(cuda.max_num_seqs, 256);
  EXPECT_EQ(cuda.max_num_batched_tokens, 8192);

  EngineConfig c;
  c.max_num_seqs = 100;
  c.max_num_batched_tokens = 50;  // raised to max_num_seqs: every running sequence decodes each step
  c.max_model_len = 1000;
  const ResolvedEngineConfig r = resolve_engine_config(c, model_of(DType::BF16));
  EXPECT_EQ(r.max_num_batched_tokens, 100);
  EXPECT_EQ(r.max_model_len, 1000);
  c.max_model_len = 5000;
  EXPECT_THROW(resolve_engine_config(c, model_of(DType::BF16)), Error);
  c.max_model_len = 0;
  c.block_size = 12;
  EXPECT_THROW(resolve_engine_config(c, model_of(DType::BF16)), Error);
  c.block_size = 16;
  c.gpu_memory_utilization = 1.5;
  EXPECT_THROW(validate_engine_config(c), Error);
}

TEST(Errors, InvariantFailuresAreNotUserErrors) {
  EXPECT_THROW(check_invariant(false, "broken"), InternalError);
  try {
    check_invariant(false, "broken");
  } catch (const Error&) {
    FAIL() << "an InternalError must not be caught as a user error";
  } catch (const InternalError& e) {
    EXPECT_STREQ(e.what(), "broken");
  }
  EXPECT_NO_THROW(check_invariant(true, "fine"));
}

// --mamba-ssm-cache-dtype: float32 unless bfloat16 is asked for on cuda; a bf16 state is half the
// recurrent bytes of a sequence (Qwen3.5-0.8B's numbers: 18 GDN layers of 16 heads × 128 × 128).
TEST(EngineConfig, RecurrentStateDtype) {
  EngineConfig c;
  c.device = "cuda";
  EXPECT_EQ(resolve_engine_config(c, model_of(DType::BF16)).ssm_state_dtype, DType::F32);
  c.mamba_ssm_cache_dtype = "bfloat16";
  EXPECT_EQ(resolve_engine_config(c, model_of(DType::BF16)).ssm_state_dtype, DType::BF16);
  c.mamba_ssm_cache_dtype = "float16";
  EXPECT_THROW(validate_engine_config(c), Error);
  c.mamba_ssm_cache_dtype = "bfloat16";
  c.device = "cpu";
  EXPECT_THROW(validate_engine_config(c), Error);

  ModelConfig m;
  m.layer_types.assign(24, LayerKind::FullAttention);
  for (int l = 0; l < 24; ++l)
    if (l % 4 != 3) m.layer_types[static_cast<size_t>(l)] = LayerKind::LinearAttention;
  m.linear_num_key_heads = m.linear_num_value_heads = 16;
  m.linear_key_head_dim = m.linear_value_head_dim = 128;
  m.linear_conv_kernel_dim = 4;
  const int64_t conv = (2 * 16 * 128 + 16 * 128) * 3 * 2;  // bf16 conv state, 3 inputs per channel
  EXPECT_EQ(m.state_bytes_per_sequence(DType::BF16, DType::F32), 18 * (conv + 16 * 128 * 128 * 4));
  EXPECT_EQ(m.state_bytes_per_sequence(DType::BF16, DType::BF16), 18 * (conv + 16 * 128 * 128 * 2));
}

}  // namespace
}  // namespace pagoda
