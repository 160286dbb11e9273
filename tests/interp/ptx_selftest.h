// ptx_selftest.h -- the harness shared by the selftest's parts (ptx_selftest.cpp: numbers, mma.sync,
// ldmatrix and main; ptx_selftest_wgmma.cpp; ptx_selftest_tma.cpp), compiled into one program.
#pragma once
#include "heddle/interp/rt/hrt_ptx.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace P = heddle_rt::ptx;

extern int g_fail;
extern std::map<std::string, int> g_printed;  // at most 8 detail lines per check group
void fail(const std::string& name, const std::string& msg);
bool report(const std::string& name, int errors_before);
#define CHECK(name, cond, ...)                   \
  do {                                           \
    if (!(cond)) {                               \
      char _b[512];                              \
      std::snprintf(_b, sizeof _b, __VA_ARGS__); \
      if (g_printed[name]++ < 8) fail(name, _b); \
      else ++g_fail;                             \
    }                                            \
  } while (0)

uint32_t rnd();                              // deterministic RNG
double urand();                              // [0, 1)
uint16_t rand_half(bool bf16, double* val);  // a random f16/bf16 in [-2, 2) and its exact value

// Records the shared byte ranges a primitive reports.
struct RecAccess : P::Access {
  std::vector<std::pair<uint32_t, uint32_t>> rd, wr;
  void read(uint32_t off, uint32_t bytes) override { rd.push_back({off, bytes}); }
  void write(uint32_t off, uint32_t bytes) override { wr.push_back({off, bytes}); }
  static std::set<uint32_t> bytes_of(const std::vector<std::pair<uint32_t, uint32_t>>& v, size_t* total) {
    std::set<uint32_t> s;
    *total = 0;
    for (auto& p : v) {
      for (uint32_t i = 0; i < p.second; ++i) s.insert(p.first + i);
      *total += p.second;
    }
    return s;
  }
};

// Swizzle written from the CUDA guide's index relation: y = addr/128 (128-byte row), x = 16-byte chunk,
// x' = x ^ (y % R) with R = W/16.
inline uint32_t test_swz(uint32_t a, int W) {
  if (!W) return a;
  uint32_t y = a / 128, x = (a % 128) / 16;
  uint32_t x2 = x ^ (y % uint32_t(W / 16));
  return y * 128 + x2 * 16 + a % 16;
}

// Shared by the wgmma and tcgen05 checks (both read the canonical layouts).
// Test-side canonical layouts (PTX ISA 9.7.15.5.1.2.1.3), for 16-bit elements, T = 8:
//   K-major  none: ((8,m),(T,2k)):((1T,SBO),(1,LBO))        K-major  W: ((8,m),(T,2k)):((W/16*T,SBO),(1,T))
//   MN-major none: ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))     MN-major W: ((T,W/16,m),(8,k)):((1,T,LBO),(W/16*T,SBO))
// A tile stored for several k-steps: K-major tiles are BK wide (BK = W/2 elements for swizzled, 32 for
// none), MN-major tiles are BK deep.  Returns the byte offset (relative to the 1024-aligned tile base)
// of element (mn, k), before swizzling, and the LBO/SBO that describe it.
struct TileFmt {
  bool mn_major;
  int W;   // 0, 32, 64, 128
  int MN;  // rows of the operand (64 for A, N for B)
  int BK;  // K extent stored
  uint32_t lbo, sbo;
};
inline TileFmt make_fmt(bool mn_major, int W, int MN) {
  TileFmt f{mn_major, W, MN, 0, 0, 0};
  if (!mn_major) {
    if (W) {
      f.BK = W / 2;
      f.sbo = uint32_t(8 * W);
      f.lbo = 16; /* unused, "assumed 1" */
    } else {
      f.BK = 32;
      f.lbo = 128;
      f.sbo = uint32_t(128 * (32 / 8));
    }  // core matrices: K-adjacent contiguous
  } else {
    f.BK = 32;
    if (W) {
      f.sbo = uint32_t(8 * W);
      f.lbo = uint32_t(W * f.BK);
    }  // 8-row K groups contiguous, atoms along MN
    else {
      f.lbo = 128;
      f.sbo = uint32_t(128 * (f.BK / 8));
    }  // K groups contiguous, MN groups spaced SBO
  }
  return f;
}
inline uint32_t tile_off(const TileFmt& f, int mn, int k) {
  const int e = 2;
  if (!f.mn_major) {
    if (f.W) return uint32_t((mn / 8) * f.sbo + (mn % 8) * f.W + k * e);
    return uint32_t((mn / 8) * f.sbo + (k / 8) * f.lbo + (mn % 8) * 16 + (k % 8) * e);
  }
  if (f.W) {
    int atom = f.W / e;  // MN elements per swizzle row
    return uint32_t((mn / atom) * f.lbo + (k / 8) * f.sbo + (k % 8) * f.W + (mn % atom) * e);
  }
  return uint32_t((mn / 8) * f.sbo + (k / 8) * f.lbo + (k % 8) * 16 + (mn % 8) * e);
}
inline uint32_t tile_bytes(const TileFmt& f) {
  uint32_t mx = 0;
  for (int mn = 0; mn < f.MN; ++mn)
    for (int k = 0; k < f.BK; ++k) mx = std::max(mx, tile_off(f, mn, k) + 2);
  return (mx + 1023) & ~1023u;
}
// Descriptor start for k-step s (16 elements each).
inline uint32_t kstep_start(const TileFmt& f, uint32_t base, int s) {
  if (!f.mn_major) return f.W ? base + uint32_t(32 * s) : base + uint32_t(2 * s) * f.lbo;
  // two 8-row K groups per k-step: spaced SBO when swizzled, LBO without swizzle
  return base + uint32_t(2 * s) * (f.W ? f.sbo : f.lbo);
}
void test_wgmma();
void test_wgmma_f8();  // ptx_selftest_wgmma_f8.cpp: 8-bit operands (m64nNk32)
void test_tcgen05();
void test_tcgen05_mx();  // ptx_selftest_tcgen05_mx.cpp: tcgen05.cp and the block-scaled kind::mxf8f6f4
void test_tma();
