// Numbers of the simulator: rounding to the storage dtypes (round to nearest even, like the
// device's __float2half_rn / __float2bfloat16_rn) and the per-element epilogue program, evaluated
// in float exactly as the printed CUDA does (codegen/printer.cpp, heddle_math.cuh).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "heddle/kir/kir.h"
#include "heddle/verify/simulator.h"

namespace heddle::verify {

float roundTo(DType t, float x);

// Default comparison tolerances for an output dtype (|d - ref| <= atol + rtol * |ref|).
void defaultTolerance(DType t, double& atol, double& rtol);

// The value the epilogue stores for accumulator `acc` at output (batch, row, col), already
// rounded to the output dtype. `oob` is set to the name of an input read out of its bounds.
// `fromSmem`: the values of TMA-loaded operands (EpiOp::smem) by parameter, as the thread read them.
// `parts`: a matmul group's accumulators at this element, by member (EpiOp op == Matmul reads them).
// `extras`: set to the further outputs' values (Kernel::extraOutputs, D1, ...), each rounded to its dtype.
float epilogueValue(const kir::Kernel& k, const SimInputs& in, float acc, int64_t batch, int64_t row, int64_t col,
                    std::string* oob, const std::map<std::string, float>* fromSmem = nullptr,
                    const float* parts = nullptr, std::vector<float>* extras = nullptr);

}  // namespace heddle::verify
