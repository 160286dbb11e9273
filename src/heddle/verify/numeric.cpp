// Rounding to f16 / bf16 / e4m3 / e5m2 and the epilogue program in float (see numeric.h).
#include "heddle/verify/numeric.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace heddle::verify {

namespace {

float roundF16(float x) {
  if (std::isnan(x) || std::isinf(x)) return x;
  float ax = std::fabs(x);
  if (ax < 6.103515625e-05f)  // below the smallest normal: multiples of 2^-24
    return std::nearbyint(x * 16777216.0f) / 16777216.0f;
  int e = 0;
  std::frexp(ax, &e);                               // ax = f * 2^e, f in [0.5, 1)
  float quantum = std::ldexp(1.0f, e - 11);         // 10 fraction bits
  float r = std::nearbyint(x / quantum) * quantum;  // exact: x / quantum fits in float
  if (std::fabs(r) > 65504.0f) return std::copysign(std::numeric_limits<float>::infinity(), x);
  return r;
}

float roundBF16(float x) {
  if (std::isnan(x)) return x;
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  u &= 0xFFFF0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

// e4m3 (3 fraction bits, smallest normal 2^-6, largest 448) and e5m2 (2 bits, 2^-14, 57344) as the FP8
// convert instruction rounds: to nearest even, saturating at the largest finite value (satfinite); NaN stays.
float roundFloat8(float x, int fractionBits, int minExp, float largest) {
  if (std::isnan(x)) return x;
  const float ax = std::fabs(x);
  if (ax >= largest) return std::copysign(largest, x);
  int e = 0;
  std::frexp(ax, &e);  // ax = f * 2^e, f in [0.5, 1): the binade is 2^(e-1)
  const int binade = std::max(e - 1, minExp);
  const float quantum = std::ldexp(1.0f, binade - fractionBits);
  const float r = std::nearbyint(ax / quantum) * quantum;
  return std::copysign(std::min(r, largest), x);
}

float gelu(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }
float geluTanh(float x) {
  const float k = 0.79788456080286536f;
  return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
}

}  // namespace

float roundTo(DType t, float x) {
  switch (t) {
    case DType::F16: return roundF16(x);
    case DType::BF16: return roundBF16(x);
    case DType::F32: return x;
    case DType::E4M3: return roundFloat8(x, 3, -6, 448.0f);
    case DType::E5M2: return roundFloat8(x, 2, -14, 57344.0f);
    case DType::E8M0:              // MX scale inputs only (powers of two, given as values); nothing casts to e8m0
    case DType::E2M1X2: return x;  // NVFP4 operands only
  }
  return x;
}

void defaultTolerance(DType t, double& atol, double& rtol) {
  switch (t) {
    case DType::F16:
      atol = 1e-2;
      rtol = 1e-2;
      break;
    case DType::BF16:
      atol = 4e-2;
      rtol = 2e-2;
      break;
    case DType::F32:
      atol = 1e-3;
      rtol = 1e-3;
      break;
    case DType::E4M3:  // half a unit in the last place: 2^-4 relative (3 fraction bits), 2^-3 for e5m2
      atol = 6.25e-2;
      rtol = 6.25e-2;
      break;
    case DType::E5M2:
      atol = 1.25e-1;
      rtol = 1.25e-1;
      break;
    case DType::E8M0:  // never an output (Fusion::cast refuses it): exact
    case DType::E2M1X2:
      atol = 0;
      rtol = 0;
      break;
  }
}

float epilogueValue(const kir::Kernel& k, const SimInputs& in, float acc, int64_t batch, int64_t row, int64_t col,
                    std::string* oob, const std::map<std::string, float>* fromSmem, const float* parts,
                    std::vector<float>* extras) {
  if (k.quant)  // a group's amax spans threads: the printed kernel's shuffles, which heddle.interpret runs
    fail<HeddleError>("simulate: ", k.name,
                      " quantizes with a computed output scale, which the kernel-IR simulator "
                      "does not model; heddle.interpret runs the printed kernel (docs/fp8.md)");
  std::vector<float> r(k.epilogue.size() + 2, 0.0f);
  int maxReg = 0;
  for (auto& op : k.epilogue) maxReg = std::max(maxReg, op.dst);
  r.resize(maxReg + 1 > (int)r.size() ? maxReg + 1 : r.size());
  r[0] = acc;
  auto scalar = [&](const std::string& name) -> int64_t {
    if (name.empty()) return 0;
    auto it = in.scalars.find(name);
    if (it == in.scalars.end()) fail<HeddleError>("simulate: no value for kernel parameter '", name, "'");
    return it->second;
  };
  for (auto& op : k.epilogue) {
    float a = op.a >= 0 ? r[op.a] : 0.0f;
    float b = op.b >= 0 ? r[op.b] : 0.0f;
    if (op.scalar) b = (float)*op.scalar;
    if (op.scalar && op.scalarOnLeft) std::swap(a, b);
    float v = 0.0f;
    switch (op.op) {
      case OpKind::Input: {
        if (op.smem) {
          if (!fromSmem || !fromSmem->count(op.tensorParam))
            fail<HeddleError>("simulate: epilogue input '", op.tensorParam, "' lives in ", op.smem->name,
                              " but no shared-memory value was read for it");
          v = fromSmem->at(op.tensorParam);
          break;
        }
        auto it = in.tensors.find(op.tensorParam);
        if (it == in.tensors.end()) fail<HeddleError>("simulate: no data for epilogue input '", op.tensorParam, "'");
        int64_t idx = batch * scalar(op.batchStride) + row * scalar(op.rowStride) + col * scalar(op.colStride);
        if (idx < 0 || idx >= (int64_t)it->second.size()) {
          if (oob) *oob = op.tensorParam;
          v = std::numeric_limits<float>::quiet_NaN();
        } else {
          v = it->second[idx];
        }
        break;
      }
      case OpKind::Matmul:  // member op.a of a matmul group at this element
        if (!parts) fail<HeddleError>("simulate: epilogue reads matmul-group member ", op.a, " but no value was given");
        v = parts[op.a];
        break;
      case OpKind::Add: v = a + b; break;
      case OpKind::Sub: v = a - b; break;
      case OpKind::Mul: v = a * b; break;
      case OpKind::Div: v = a / b; break;
      case OpKind::Relu: v = a < 0.0f ? 0.0f : a; break;
      case OpKind::GeluErf: v = gelu(a); break;
      case OpKind::GeluTanh: v = geluTanh(a); break;
      case OpKind::Silu: v = a / (1.0f + std::exp(-a)); break;
      case OpKind::Sigmoid: v = 1.0f / (1.0f + std::exp(-a)); break;
      case OpKind::Tanh: v = std::tanh(a); break;
      case OpKind::Neg: v = -a; break;
      case OpKind::Cast: v = roundTo(op.dtype, a); break;
      default: fail<HeddleError>("simulate: epilogue op ", opName(op.op), " is not modelled");
    }
    r[op.dst] = v;
  }
  if (extras) {
    extras->clear();
    for (auto& o : k.extraOutputs) extras->push_back(roundTo(o.dtype, r[o.reg]));
  }
  return roundTo(k.outDtype, r[k.epilogueResult]);
}

}  // namespace heddle::verify
