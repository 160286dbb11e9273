// ptx_selftest.h -- the harness shared by the selftest's parts (ptx_selftest.cpp: numbers, mma.sync,
// ldmatrix and main; ptx_selftest_wgmma.cpp; ptx_selftest_tma.cpp), compiled into one program.
#pragma once
#include "heddle/interp/rt/hrt_ptx.h"

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
#define CHECK(name, cond, ...)                                          \
  do {                                                                  \
    if (!(cond)) {                                                      \
      char _b[512];                                                     \
      std::snprintf(_b, sizeof _b, __VA_ARGS__);                        \
      if (g_printed[name]++ < 8) fail(name, _b); else ++g_fail;         \
    }                                                                   \
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
    for (auto& p : v) { for (uint32_t i = 0; i < p.second; ++i) s.insert(p.first + i); *total += p.second; }
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

void test_wgmma();
void test_tma();
