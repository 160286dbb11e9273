// heddle/interp/rt/hrt_fp8.cpp -- the FP8 conversion instructions the device headers call under
// HEDDLE_INTERPRET (hrt_api.h), on the formats of hrt_fp8.h (PTX ISA "cvt", f8x2 types).
#include "heddle/interp/rt/hrt_api.h"
#include "heddle/interp/rt/hrt_fp8.h"
#include "heddle/interp/rt/hrt_ptx.h"

namespace heddle_rt {

namespace {
const ptx::MiniFloat& format(int fmt) { return fmt == 1 ? ptx::kE5M2 : ptx::kE4M3; }
}  // namespace

// cvt.rn.f16x2.{e4m3x2|e5m2x2} d, a: the upper byte of a to the upper half of d, the lower to the lower
// (every e4m3 / e5m2 value is exact in binary16)
uint32_t cvt_rn_f16x2_f8x2(int fmt, uint16_t a) {
  auto one = [&](uint32_t code) -> uint32_t {
    return ptx::f32_to_f16_rn(float(ptx::minifloat_decode(format(fmt), code)));
  };
  return (one((a >> 8) & 0xFFu) << 16) | one(a & 0xFFu);
}

// cvt.rn.satfinite.{e4m3x2|e5m2x2}.f32 d, a, b: a to the upper byte, b to the lower
uint16_t cvt_rn_satfinite_f8x2_f32(int fmt, float a, float b) {
  return uint16_t((ptx::minifloat_encode_satfinite(format(fmt), a) << 8) |
                  ptx::minifloat_encode_satfinite(format(fmt), b));
}

}  // namespace heddle_rt
