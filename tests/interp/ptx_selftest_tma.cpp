// ptx_selftest_tma.cpp -- the TMA checks of the PTX selftest (ptx_selftest.cpp has the harness):
// tensor-map validation, loads with every swizzle and out-of-bounds fill, stores, a 3-D map.
#include "ptx_selftest.h"

#include <array>
#include <cstring>
#include <string>
#include <vector>

// ---- TMA -----------------------------------------------------------------------------------------
static void test_tma_encode() {
  const char* N = "tma_encode_rejects";
  int f0 = g_fail;
  alignas(64) static uint8_t gbuf[1 << 16];
  uint64_t base = (uint64_t(uintptr_t(gbuf)) + 127) & ~uint64_t(127);
  P::TensorMap tm;
  uint64_t dims[3] = {100, 70, 3}, strides[2] = {208, 208 * 70};
  uint32_t box[3] = {64, 24, 1}, es[3] = {1, 1, 1};
  auto enc = [&](int dt, uint64_t b, int rank, const uint64_t* st, const uint32_t* bx, const uint32_t* e, int il,
                 int sw, int oob) { return P::encode_tensor_map(&tm, dt, b, rank, dims, st, bx, e, il, sw, 0, oob); };
  std::string e;
  CHECK(N, (e = enc(9, base, 2, strides, box, es, 0, 3, 0)).empty(), "valid map rejected: %s", e.c_str());
  CHECK(N, (e = enc(9, base + 8, 2, strides, box, es, 0, 3, 0)).find("globalAddress") != std::string::npos,
        "misaligned base: got '%s'", e.c_str());
  uint64_t bad_st[2] = {200, 208 * 70};  // 200 % 16 = 8
  CHECK(N, (e = enc(9, base, 2, bad_st, box, es, 0, 3, 0)).find("globalStrides") != std::string::npos,
        "stride not multiple of 16: got '%s'", e.c_str());
  uint64_t huge_st[2] = {uint64_t(1) << 40, 0};
  CHECK(N, (e = enc(9, base, 2, huge_st, box, es, 0, 3, 0)).find("globalStrides") != std::string::npos,
        "stride >= 2^40: got '%s'", e.c_str());
  uint32_t big_box[3] = {64, 257, 1};
  CHECK(N, (e = enc(9, base, 2, strides, big_box, es, 0, 0, 0)).find("boxDim") != std::string::npos,
        "box > 256: got '%s'", e.c_str());
  uint32_t wide_box[3] = {128, 8, 1};  // 256 bytes inner with a 128B swizzle
  CHECK(N, (e = enc(9, base, 2, strides, wide_box, es, 0, 3, 0)).find("swizzle") != std::string::npos,
        "inner box over the swizzle span: got '%s'", e.c_str());
  uint32_t box64[3] = {64, 8, 1};  // 128 bytes inner with a 64B swizzle
  CHECK(N, !enc(9, base, 2, strides, box64, es, 0, 2, 0).empty(), "128-byte inner box with 64B swizzle accepted");
  CHECK(N, enc(9, base, 2, strides, box64, es, 0, 0, 0).empty(), "256-byte inner box with no swizzle rejected");
  uint32_t odd_box[3] = {4, 8, 1};  // 8 bytes inner
  CHECK(N, (e = enc(9, base, 2, strides, odd_box, es, 0, 0, 0)).find("boxDim") != std::string::npos,
        "inner box bytes not a multiple of 16: got '%s'", e.c_str());
  uint32_t bad_es[3] = {1, 9, 1};
  CHECK(N, (e = enc(9, base, 2, strides, box, bad_es, 0, 3, 0)).find("elementStrides") != std::string::npos,
        "element stride 9: got '%s'", e.c_str());
  CHECK(N, !enc(9, base, 0, strides, box, es, 0, 3, 0).empty(), "rank 0 accepted");
  CHECK(N, !enc(9, base, 6, strides, box, es, 0, 3, 0).empty(), "rank 6 accepted");
  CHECK(N, !enc(0, base, 2, strides, box, es, 0, 0, 1).empty(), "NaN OOB fill on UINT8 accepted");
  CHECK(N, !enc(9, base, 3, strides, box, es, 2, 3, 0).empty(), "INTERLEAVE_32B with SWIZZLE_128B accepted");
  CHECK(N, !enc(9, base, 2, strides, box, es, 1, 0, 0).empty(), "interleave with rank 2 accepted");
  CHECK(N, !enc(99, base, 2, strides, box, es, 0, 0, 0).empty(), "unknown data type accepted");
  report(N, f0);
}

// Global test tensor: bf16 ids, value(x, y, z) = 1 + (x + 100*y + 7000*z) % 65000 (never 0).
static uint16_t tval(int64_t x, int64_t y, int64_t z) { return uint16_t(1 + (x + 100 * y + 7000 * z) % 65000); }

struct TmaCase {
  int dims[3];  // inner first
  int rank;
  int sw;  // CUtensorMapSwizzle
  uint32_t box[3];
  uint32_t es[3];
};

static void tma_load_case(const std::string& name, const TmaCase& tc, std::vector<std::array<int, 3>> coords_list) {
  int f0 = g_fail;
  const int esz = 2;
  uint64_t dims[3] = {uint64_t(tc.dims[0]), uint64_t(tc.dims[1]), uint64_t(tc.dims[2])};
  uint64_t row_bytes = ((uint64_t(tc.dims[0]) * esz + 15) / 16) * 16 + 16;  // padded rows
  uint64_t strides[2] = {row_bytes, row_bytes * dims[1]};
  std::vector<uint8_t> gmem(size_t(row_bytes * dims[1] * dims[2]) + 256);
  uint8_t* g = reinterpret_cast<uint8_t*>((uintptr_t(gmem.data()) + 127) & ~uintptr_t(127));
  for (int z = 0; z < tc.dims[2]; ++z)
    for (int y = 0; y < tc.dims[1]; ++y)
      for (int x = 0; x < tc.dims[0]; ++x) {
        uint16_t v = tval(x, y, z);
        std::memcpy(g + z * strides[1] + y * strides[0] + x * esz, &v, 2);
      }
  P::TensorMap tm;
  std::string err =
      P::encode_tensor_map(&tm, 9, uint64_t(uintptr_t(g)), tc.rank, dims, strides, tc.box, tc.es, 0, tc.sw, 0, 0);
  CHECK(name.c_str(), err.empty(), "encode failed: %s", err.c_str());
  if (!err.empty()) return;
  int W = tc.sw == 1 ? 32 : tc.sw == 2 ? 64 : tc.sw == 3 ? 128 : 0;
  uint32_t n[3];
  for (int i = 0; i < 3; ++i) n[i] = i < tc.rank ? (i == 0 ? tc.box[0] : (tc.box[i] + tc.es[i] - 1) / tc.es[i]) : 1;
  uint32_t inner = n[0] * esz;
  // shared image per the CUDA guide: rows of the box one after another, each occupying the full swizzle
  // span when swizzled ("ensure that the shared memory is allocated to accommodate the full swizzle width")
  uint32_t pitch = W ? uint32_t(W) : inner;
  uint32_t rows = n[1] * n[2];
  for (auto& c3 : coords_list) {
    const uint32_t dst = 2048, SM = 65536;
    std::vector<uint8_t> smem(SM, 0xAB);
    int32_t coords[3] = {c3[0], c3[1], c3[2]};
    uint32_t tx = 0;
    RecAccess ra;
    err = P::tma_load(tm, coords, smem.data(), SM, dst, &tx, &ra);
    CHECK(name.c_str(), err.empty(), "load at (%d,%d,%d) failed: %s", c3[0], c3[1], c3[2], err.c_str());
    if (!err.empty()) continue;
    CHECK(name.c_str(), tx == rows * inner, "transaction bytes %u want %u", tx, rows * inner);
    std::set<uint32_t> touched;
    int bad = 0;
    for (uint32_t z = 0; z < n[2]; ++z)
      for (uint32_t y = 0; y < n[1]; ++y)
        for (uint32_t x = 0; x < n[0]; ++x) {
          int64_t gx = c3[0] + int64_t(x), gy = c3[1] + int64_t(y) * tc.es[1], gz = c3[2] + int64_t(z) * tc.es[2];
          bool in = gx >= 0 && gx < tc.dims[0] && gy >= 0 && gy < tc.dims[1] && gz >= 0 && gz < tc.dims[2];
          uint16_t want = in ? tval(gx, gy, gz) : 0;
          uint32_t p = test_swz(dst + (z * n[1] + y) * pitch + x * esz, W);
          uint16_t got;
          std::memcpy(&got, &smem[p], 2);
          touched.insert(p);
          touched.insert(p + 1);
          if (got != want && bad++ < 5)
            CHECK(name.c_str(), false, "coords (%d,%d,%d) box (%u,%u,%u) = %04x want %04x%s", c3[0], c3[1], c3[2], x, y,
                  z, got, want, in ? "" : " (OOB zero fill)");
        }
    for (uint32_t i = 0; i < SM; ++i)
      if (!touched.count(i) && smem[i] != 0xAB) {
        CHECK(name.c_str(), false, "byte %u outside the box image was written", i);
        break;
      }
    size_t tot;
    auto rep = RecAccess::bytes_of(ra.wr, &tot);
    CHECK(name.c_str(), rep == touched && tot == touched.size() && ra.rd.empty(),
          "reported writes differ from the image");
  }
  // misaligned destination
  int32_t c0[3] = {0, 0, 0};
  std::vector<uint8_t> smem(65536);
  uint32_t tx;
  CHECK(name.c_str(), !P::tma_load(tm, c0, smem.data(), 65536, 2048 + 64, &tx, nullptr).empty(),
        "64-byte aligned destination accepted");
  CHECK(name.c_str(), !P::tma_load(tm, c0, smem.data(), 2048, 2048, &tx, nullptr).empty(),
        "destination past the window accepted");
  report(name, f0);
}

static void tma_store_case(const std::string& name, int sw, std::array<int, 2> c2) {
  int f0 = g_fail;
  const int esz = 2, X = 100, Y = 70;
  uint64_t dims[2] = {X, Y}, strides[1] = {208};
  int W = sw == 1 ? 32 : sw == 2 ? 64 : sw == 3 ? 128 : 0;
  uint32_t box[2] = {uint32_t(W ? W / 2 : 40), 24}, es[2] = {1, 1};
  std::vector<uint8_t> gmem(208 * Y + 256);
  uint8_t* g = reinterpret_cast<uint8_t*>((uintptr_t(gmem.data()) + 127) & ~uintptr_t(127));
  std::memset(g, 0x5A, 208 * Y);
  P::TensorMap tm;
  std::string err = P::encode_tensor_map(&tm, 6, uint64_t(uintptr_t(g)), 2, dims, strides, box, es, 0, sw, 0, 0);
  CHECK(name.c_str(), err.empty(), "encode failed: %s", err.c_str());
  const uint32_t src = 4096, SM = 32768;
  std::vector<uint8_t> smem(SM, 0);
  uint32_t pitch = W ? uint32_t(W) : box[0] * esz;
  for (uint32_t y = 0; y < box[1]; ++y)
    for (uint32_t x = 0; x < box[0]; ++x) {
      uint16_t v = uint16_t(0x1000 + y * 256 + x);
      std::memcpy(&smem[test_swz(src + y * pitch + x * esz, W)], &v, 2);
    }
  int32_t coords[2] = {c2[0], c2[1]};
  RecAccess ra;
  err = P::tma_store(tm, coords, smem.data(), SM, src, &ra);
  CHECK(name.c_str(), err.empty(), "store failed: %s", err.c_str());
  int bad = 0;
  for (int y = 0; y < Y; ++y)
    for (int b = 0; b < 208; ++b) {
      int x = b / 2;
      int64_t bx = x - c2[0], by = y - c2[1];
      bool in_box = b < X * esz && bx >= 0 && bx < int64_t(box[0]) && by >= 0 && by < int64_t(box[1]);
      uint8_t want = 0x5A;
      if (in_box) {
        uint16_t v = uint16_t(0x1000 + by * 256 + bx);
        want = uint8_t(v >> (8 * (b & 1)));
      }
      uint8_t got = g[y * 208 + b];
      if (got != want && bad++ < 5)
        CHECK(name.c_str(), false, "global (x=%d y=%d byte %d) = %02x want %02x", x, y, b & 1, got, want);
    }
  size_t tot;
  auto rep = RecAccess::bytes_of(ra.rd, &tot);
  CHECK(name.c_str(), rep.size() == size_t(box[0]) * box[1] * esz && tot == rep.size() && ra.wr.empty(),
        "reported reads: %zu bytes, want %u", rep.size(), box[0] * box[1] * esz);
  report(name, f0);
}

void test_tma() {
  test_tma_encode();
  // 2-D, bf16, 100 x 70, each swizzle mode, interior and partial (negative / past-the-end) boxes
  std::vector<std::array<int, 3>> cl = {{0, 0, 0}, {40, 10, 0}, {-8, -5, 0}, {90, 60, 0}, {-3, 66, 0}, {99, -23, 0}};
  tma_load_case("tma_load_swizzle_none", TmaCase{{100, 70, 1}, 2, 0, {48, 24, 1}, {1, 1, 1}}, cl);
  tma_load_case("tma_load_swizzle_32B", TmaCase{{100, 70, 1}, 2, 1, {16, 24, 1}, {1, 1, 1}}, cl);
  tma_load_case("tma_load_swizzle_64B", TmaCase{{100, 70, 1}, 2, 2, {32, 24, 1}, {1, 1, 1}}, cl);
  tma_load_case("tma_load_swizzle_128B", TmaCase{{100, 70, 1}, 2, 3, {64, 24, 1}, {1, 1, 1}}, cl);
  // inner box narrower than the swizzle span (rows padded to the span)
  tma_load_case("tma_load_swizzle_128B_narrow_inner", TmaCase{{100, 70, 1}, 2, 3, {32, 16, 1}, {1, 1, 1}}, cl);
  // 3-D (batched): box spills past dims 1 and 2
  tma_load_case("tma_load_3d_batched_128B", TmaCase{{64, 20, 3}, 3, 3, {64, 8, 2}, {1, 1, 1}},
                {{0, 0, 0}, {0, 16, 2}, {0, -4, -1}, {0, 8, 1}});
  // element strides along dimension 1
  tma_load_case("tma_load_element_stride", TmaCase{{100, 70, 1}, 2, 0, {16, 9, 1}, {1, 2, 1}}, {{0, 0, 0}, {8, 64, 0}});
  tma_store_case("tma_store_swizzle_none", 0, {{70, 55}});
  tma_store_case("tma_store_swizzle_32B", 1, {{-5, -3}});
  tma_store_case("tma_store_swizzle_64B", 2, {{80, 10}});
  tma_store_case("tma_store_swizzle_128B", 3, {{50, 60}});
  tma_store_case("tma_store_swizzle_128B_interior", 3, {{8, 8}});
}
