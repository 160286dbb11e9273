// hrt_fp8.h -- the 8-, 6- and 4-bit float formats of the FP8 / block-scaled GEMMs, for the CPU interpreter.
//
// Written from the OCP "8-bit Floating Point Specification (OFP8)" rev 1.0 and the OCP "Microscaling
// Formats (MX) Specification" v1.0 (element and scale encodings), and PTX ISA "cvt" (9.7.9.21: the
// .e4m3x2 / .e5m2x2 / .e2m1x2 packings, .satfinite) and "Alternate Floating-Point Data Formats" (5.2.5),
// independently of heddle's device headers. Header-only, C++17, standard headers only; heddle_rt::ptx.
//
//   e4m3 (torch.float8_e4m3fn): bias 7, no infinities, S.1111.111 is NaN, max normal 448, min 2^-9.
//   e5m2 (torch.float8_e5m2):   bias 15, IEEE-like (inf at e=31 m=0, NaN e=31 m!=0), max 57344.
//   e2m1 (MX FP4):              bias 1, no inf/NaN, values 0 .5 1 1.5 2 3 4 6.
//   ue8m0 (MX scale):           2^(e-127), no sign, no zero, 0xFF is NaN.
// Narrowing is cvt.rn.satfinite: round to nearest even; |x| beyond the largest finite value (inf included)
// gives the largest finite value with x's sign; NaN gives NaN (e4m3: 0x7F, e5m2: 0x7F, with the sign).
// The two-element packings: `a` lands in the upper byte, `b` in the lower (PTX ISA "cvt", f8x2 types).
#ifndef HEDDLE_RT_HRT_FP8_H
#define HEDDLE_RT_HRT_FP8_H

#include <cmath>
#include <cstdint>

namespace heddle_rt {
namespace ptx {

struct MiniFloat {
  int exp_bits, man_bits, bias;
  bool ieee_inf;      // e all ones: inf (m = 0) / NaN (m != 0), as IEEE 754 (e5m2)
  bool top_code_nan;  // only S.1..1.1..1 is NaN (e4m3)
  bool has_sign;
};
constexpr MiniFloat kE4M3{4, 3, 7, false, true, true};
constexpr MiniFloat kE5M2{5, 2, 15, true, false, true};
constexpr MiniFloat kE2M1{2, 1, 1, false, false, true};

inline double minifloat_max(const MiniFloat& f) {
  const int emax_field = (1 << f.exp_bits) - 1 - (f.ieee_inf ? 1 : 0);
  const int mmax = (1 << f.man_bits) - 1 - (f.top_code_nan ? 1 : 0);
  return std::ldexp(1.0 + double(mmax) / double(1 << f.man_bits), emax_field - f.bias);
}

// code -> value (exact in a double; NaN codes give NaN)
inline double minifloat_decode(const MiniFloat& f, uint32_t code) {
  const int width = 1 + f.exp_bits + f.man_bits;
  const bool neg = f.has_sign && ((code >> (width - 1)) & 1u);
  const uint32_t e = (code >> f.man_bits) & ((1u << f.exp_bits) - 1u), m = code & ((1u << f.man_bits) - 1u);
  const uint32_t eall = (1u << f.exp_bits) - 1u, mall = (1u << f.man_bits) - 1u;
  double v;
  if (f.ieee_inf && e == eall) v = m ? NAN : INFINITY;
  else if (f.top_code_nan && e == eall && m == mall) v = NAN;
  else if (e == 0) v = std::ldexp(double(m), 1 - f.bias - f.man_bits);  // subnormal: m * 2^(emin - man)
  else v = std::ldexp(1.0 + double(m) / double(1 << f.man_bits), int(e) - f.bias);
  return neg ? -v : v;
}

// value -> code, round to nearest even, saturating to the largest finite value (cvt.rn.satfinite)
inline uint32_t minifloat_encode_satfinite(const MiniFloat& f, double x) {
  const int width = 1 + f.exp_bits + f.man_bits;
  const uint32_t sign = (f.has_sign && std::signbit(x)) ? (1u << (width - 1)) : 0u;
  if (std::isnan(x))  // e4m3 / e5m2: the all-ones magnitude (a NaN in both); e2m1 has none: its largest value
    return sign | ((1u << (width - 1)) - 1u);
  const double a = std::fabs(x), mx = minifloat_max(f);
  const int emin = 1 - f.bias;
  double v;
  if (a >= mx) {
    v = mx;
  } else {
    int ex;
    std::frexp(a, &ex);  // a = fr * 2^ex, fr in [0.5, 1): the binade exponent is ex - 1
    int e = a == 0 ? emin : ex - 1;
    if (e < emin) e = emin;                            // subnormal range: the quantum of the lowest binade
    const double q = std::ldexp(1.0, e - f.man_bits);  // a / q and r * q are exact in a double
    v = std::nearbyint(a / q) * q;                     // FE_TONEAREST: ties to even
    if (v > mx) v = mx;
  }
  if (v == 0) return sign;
  int ex;
  std::frexp(v, &ex);
  int e = ex - 1;
  if (e < emin) return sign | uint32_t(std::ldexp(v, f.man_bits - emin));  // subnormal: e field 0
  const uint32_t m = uint32_t(std::ldexp(v, f.man_bits - e)) - (1u << f.man_bits);
  return sign | (uint32_t(e + f.bias) << f.man_bits) | m;
}

// ue8m0: 2^(code - 127); 0xFF NaN
inline double ue8m0_decode(uint32_t code) { return code == 0xFFu ? NAN : std::ldexp(1.0, int(code) - 127); }

}  // namespace ptx
}  // namespace heddle_rt

#endif  // HEDDLE_RT_HRT_FP8_H
