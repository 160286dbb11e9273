// heddle/heddle_math.cuh -- scalar epilogue activations, all in float.
//
// Uses the erff / tanhf / expf builtins (declared by NVRTC without any header; under
// HEDDLE_HOST_EMULATION they come from <cmath>, included by heddle_types.cuh).
//
//   relu(x)      = x < 0 ? 0 : x            (NaN propagates, like torch.relu)
//   gelu_erf(x)  = 0.5 x (1 + erf(x / sqrt 2))
//   gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
//   silu(x)      = x / (1 + exp(-x))         (-> -0 for large negative x, no NaN)
//   sigmoid(x)   = 1 / (1 + exp(-x))
//   tanh(x)      = tanhf(x)
//   f32_bits(b)  = the float whose IEEE bits are b (inf, NaN constants of the epilogue)
#pragma once
#include "heddle/heddle_types.cuh"

namespace heddle {

// A float from its bits: how the printer spells epilogue constants without a literal (inf, NaN).
__host__ __device__ __forceinline__ float f32_bits(unsigned int bits) {
  union { unsigned int u; float f; } x;
  x.u = bits;
  return x.f;
}

__device__ __forceinline__ float relu(float x) { return x < 0.0f ? 0.0f : x; }

__device__ __forceinline__ float gelu_erf(float x) {
  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}

__device__ __forceinline__ float gelu_tanh(float x) {
  const float k = 0.79788456080286536f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__device__ __forceinline__ float tanh(float x) { return tanhf(x); }

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }

}  // namespace heddle
