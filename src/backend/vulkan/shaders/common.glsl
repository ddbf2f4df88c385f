// Shared by every shader: tensors are 64-bit device addresses (GL_EXT_buffer_reference), read and
// written as fp32, bf16 or f16 storage with fp32 math. The dtype codes match vulkan_backend.cpp's
// dtype_code(): 0 = f32, 1 = bf16, 2 = f16.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_16bit_storage : require

layout(buffer_reference, std430, buffer_reference_align = 4) buffer F32Ref { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer I32Ref { int v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer U16Ref { uint16_t v[]; };

const uint DT_F32 = 0u;
const uint DT_BF16 = 1u;
const uint DT_F16 = 2u;

float bf16_to_f32(uint16_t h) { return uintBitsToFloat(uint(h) << 16); }
// Round to nearest even, as every other backend rounds (NaN stays a quiet NaN).
uint16_t f32_to_bf16(float f) {
  if (isnan(f)) return uint16_t(0x7fc0u);
  uint u = floatBitsToUint(f);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

float ld(uint64_t p, uint dt, uint i) {
  if (dt == DT_F32) return F32Ref(p).v[i];
  uint16_t h = U16Ref(p).v[i];
  if (dt == DT_BF16) return bf16_to_f32(h);
  return unpackHalf2x16(uint(h)).x;
}

void st(uint64_t p, uint dt, uint i, float x) {
  if (dt == DT_F32) {
    F32Ref(p).v[i] = x;
  } else if (dt == DT_BF16) {
    U16Ref(p).v[i] = f32_to_bf16(x);
  } else {
    U16Ref(p).v[i] = uint16_t(packHalf2x16(vec2(x, 0.0)) & 0xffffu);
  }
}

float ldf(uint64_t p, uint i) { return F32Ref(p).v[i]; }
void stf(uint64_t p, uint i, float x) { F32Ref(p).v[i] = x; }
int ldi(uint64_t p, uint i) { return I32Ref(p).v[i]; }
void sti(uint64_t p, uint i, int x) { I32Ref(p).v[i] = x; }

// tanh without the overflow of sinh/cosh for large |x| (some drivers return NaN there).
float safe_tanh(float x) {
  float e = exp(-2.0 * abs(x));
  return sign(x) * (1.0 - e) / (1.0 + e);
}
float sigmoid(float x) { return 1.0 / (1.0 + exp(-x)); }
float silu(float x) { return x / (1.0 + exp(-x)); }

// The first invocation index and the stride of a grid-stride loop over a 1-D dispatch. Macros, not
// functions: gl_WorkGroupSize is (1, 1, 1) in code placed before the shader's local_size layout.
#define grid_start() (gl_GlobalInvocationID.x)
#define grid_stride() (gl_NumWorkGroups.x * gl_WorkGroupSize.x)
