// A hand-written kernel for the interpreter's ISA model (tests/interp/test_interp_isa.py): the checks of the former host
// emulation of the device headers, run through the interpreter's model of each instruction (src/heddle/interp/rt)
// instead. `scenario` picks one check; `in` / `out` are raw 32-bit words the test reads.
//
//   0 convert   out[2i] = to_float(f16{in[i]}), out[2i+1] = to_float(bf16{in[i]})      (every 16-bit pattern)
//   1 narrow    out[2i] = from_float<f16>(x).bits, out[2i+1] = from_float<bf16>(x).bits, x = the float of in[i]
//   2 tiles     SmemTile<R, C, T> for the stage shapes the printer uses: offsets a bijection onto the stage, each
//               16-byte chunk contiguous and 16-byte aligned, every ldmatrix phase (8 rows at one chunk) on 8
//               distinct 16-byte bank groups; out[0] = failed checks, out[1] = tiles checked (thread 0 only)
//               out[2], out[3] = the low / high word of make_desc(0x12340, 0x800, 0x400, 1)
//   3 math      out[6i + j] = relu, gelu_erf, gelu_tanh, sigmoid, silu, tanh of the float of in[i]
//   4 fp8 widen out[2i] = to_float(e4m3{in[i]}), out[2i+1] = to_float(e5m2{in[i]})    (every 8-bit pattern)
//   5 fp8 narrow out[2i] = from_float<e4m3>(x).bits, out[2i+1] = from_float<e5m2>(x).bits, x = the float of in[i]
//   20 + i      TmaTile i of kTmaTiles below: the whole tile TMA-loaded from `tm` (a ROWS x COLS tensor, the tile's
//               box and swizzle), then out[r * COLS + c] = the bits of the element at TmaTile::offset(r, c)
//   misuse, each must be refused by the interpreter (an error or deadlock finding):
//   10 ldmatrix_divergence   half of the warp skips an ldmatrix
//   11 ldmatrix_nonuniform   one lane asks for .trans, the others do not
//   12 ldmatrix_misaligned   row addresses 2 bytes off their 16-byte alignment
//   13 cp_async_oob          16 bytes read from 8 bytes before the end of `in` (n words)
//   14 cp_async_src_size     src-size 12 for an 8-byte cp.async
//   15 copy_tile_oob         copy_tile_async told of more valid rows than `in` holds
//   16 wgmma_nonuniform      one thread of the warpgroup passes another A descriptor
#include "heddle/heddle_types.cuh"
#include "heddle/heddle_copy.cuh"
#include "heddle/heddle_math.cuh"
#include "heddle/heddle_mma_sm80.cuh"
#include "heddle/heddle_sm90.cuh"
#include "heddle/heddle_sm90_wgmma.cuh"

namespace {

__device__ __forceinline__ unsigned bits_of(float x) {
  unsigned u;
  __builtin_memcpy(&u, &x, 4);
  return u;
}
__device__ __forceinline__ float float_of(unsigned u) {
  float x;
  __builtin_memcpy(&x, &u, 4);
  return x;
}

template <int ROWS, int COLS, typename T>
__device__ void check_tile(unsigned char* seen, unsigned* failures, unsigned* tiles) {  // seen: kElems bytes
  using Tile = heddle::SmemTile<ROWS, COLS, T>;
  for (int o = 0; o < Tile::kElems; ++o) seen[o] = 0;
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < COLS; ++c) {
      const int o = Tile::offset(r, c);
      if (o < 0 || o >= Tile::kElems) { ++*failures; continue; }
      ++seen[o];
      if (c % Tile::kEpc) *failures += o != Tile::offset(r, c - 1) + 1;  // chunk contiguous
      else *failures += o % Tile::kEpc != 0;                             // chunk 16-byte aligned
    }
  for (int o = 0; o < Tile::kElems; ++o) *failures += seen[o] != 1;
  for (int r0 = 0; r0 + 8 <= ROWS; r0 += 8)
    for (int c = 0; c < COLS; c += Tile::kEpc) {
      unsigned mask = 0;
      for (int i = 0; i < 8; ++i) mask |= 1u << ((Tile::offset(r0 + i, c) * (int)sizeof(T) / 16) % 8);
      *failures += mask != 0xffu;
    }
  ++*tiles;
}

__device__ void check_tiles(unsigned char* s, unsigned* out) {
  using heddle::bf16;
  using heddle::f16;
  unsigned f = 0, t = 0;
  check_tile<64, 32, f16>(s, &f, &t);  check_tile<32, 64, f16>(s, &f, &t);  check_tile<128, 32, bf16>(s, &f, &t);
  check_tile<32, 128, f16>(s, &f, &t); check_tile<256, 64, f16>(s, &f, &t); check_tile<64, 256, bf16>(s, &f, &t);
  check_tile<128, 64, f16>(s, &f, &t); check_tile<64, 128, f16>(s, &f, &t); check_tile<16, 64, f16>(s, &f, &t);
  check_tile<16, 32, f16>(s, &f, &t);  check_tile<32, 16, f16>(s, &f, &t);  check_tile<192, 16, f16>(s, &f, &t);
  check_tile<16, 192, f16>(s, &f, &t); check_tile<64, 16, f16>(s, &f, &t);  check_tile<16, 256, f16>(s, &f, &t);
  check_tile<8, 64, f16>(s, &f, &t);   check_tile<32, 32, float>(s, &f, &t); check_tile<64, 8, f16>(s, &f, &t);
  out[0] = f;
  out[1] = t;
}

// TMA-loads the whole TmaTile<R, C, T> from `tm` and writes each element's bits in logical (r, c) order.
template <int R, int C, typename T>
__device__ void tma(unsigned char* smem, const heddle::TmaDesc* tm, unsigned* out) {
  using Tile = heddle::sm90::TmaTile<R, C, T>;
  T* tile = reinterpret_cast<T*>(smem);
  auto* bar = reinterpret_cast<unsigned long long*>(smem + Tile::kBytes);
  heddle::sm90::mbar_init(bar, 1);
  heddle::sm90::fence_mbarrier_init_cluster();
  heddle::sm90::mbar_arrive_expect_tx(bar, Tile::kBytes);
  heddle::sm90::tma_load_tile<Tile, 2>(tile, tm, 0, 0, 0, bar);
  heddle::sm90::mbar_wait(bar, 0);
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      unsigned u = 0;
      __builtin_memcpy(&u, &tile[Tile::offset(r, c)], sizeof(T));
      out[r * C + c] = u;
    }
}

// The tile shapes of scenario 20 + i (tests/interp/test_interp_isa.py lists the same).
__device__ void tma_tiles(int i, unsigned char* smem, const heddle::TmaDesc* tm, unsigned* out) {
  using heddle::bf16;
  using heddle::f16;
  switch (i) {
    case 0: tma<64, 64, f16>(smem, tm, out); break;
    case 1: tma<128, 64, bf16>(smem, tm, out); break;
    case 2: tma<256, 64, f16>(smem, tm, out); break;
    case 3: tma<64, 32, f16>(smem, tm, out); break;
    case 4: tma<128, 16, bf16>(smem, tm, out); break;
    case 5: tma<64, 128, f16>(smem, tm, out); break;
    case 6: tma<16, 256, bf16>(smem, tm, out); break;
    case 7: tma<32, 192, f16>(smem, tm, out); break;
    case 8: tma<128, 128, float>(smem, tm, out); break;
    case 9: tma<64, 64, float>(smem, tm, out); break;
    case 10: tma<8, 64, f16>(smem, tm, out); break;
    default: break;
  }
}

}  // namespace

extern "C" __global__ void isa_checks(int scenario, const unsigned* in, unsigned* out, int n,
                                      const __grid_constant__ heddle::TmaDesc tm) {
  extern __shared__ __align__(1024) unsigned char heddle_smem[];
  const int tid = threadIdx.x, lane = tid % 32;
  unsigned r[4];
  float acc[32];
  switch (scenario) {
    case 0:
      for (int i = tid; i < n; i += blockDim.x) {
        out[2 * i] = bits_of(heddle::to_float(heddle::f16{(unsigned short)in[i]}));
        out[2 * i + 1] = bits_of(heddle::to_float(heddle::bf16{(unsigned short)in[i]}));
      }
      break;
    case 1:
      for (int i = tid; i < n; i += blockDim.x) {
        out[2 * i] = heddle::from_float<heddle::f16>(float_of(in[i])).bits;
        out[2 * i + 1] = heddle::from_float<heddle::bf16>(float_of(in[i])).bits;
      }
      break;
    case 4:
      for (int i = tid; i < n; i += blockDim.x) {
        out[2 * i] = bits_of(heddle::to_float(heddle::e4m3{(unsigned char)in[i]}));
        out[2 * i + 1] = bits_of(heddle::to_float(heddle::e5m2{(unsigned char)in[i]}));
      }
      break;
    case 5:
      for (int i = tid; i < n; i += blockDim.x) {
        out[2 * i] = heddle::from_float<heddle::e4m3>(float_of(in[i])).bits;
        out[2 * i + 1] = heddle::from_float<heddle::e5m2>(float_of(in[i])).bits;
      }
      break;
    case 2:
      if (tid == 0) {
        check_tiles(heddle_smem, out);
        const unsigned long long d = heddle::sm90::make_desc(0x12340, 0x800, 0x400, 1);
        out[2] = (unsigned)d;
        out[3] = (unsigned)(d >> 32);
      }
      break;
    case 3:
      for (int i = tid; i < n; i += blockDim.x) {
        const float x = float_of(in[i]);
        const float y[6] = {heddle::relu(x), heddle::gelu_erf(x), heddle::gelu_tanh(x), heddle::sigmoid(x),
                            heddle::silu(x), heddle::tanh(x)};
        for (int j = 0; j < 6; ++j) out[6 * i + j] = bits_of(y[j]);
      }
      break;
    case 10:
      if (lane < 16) heddle::detail::ldmatrix<4, false>(r, heddle::detail::smem_addr(heddle_smem + 16 * lane));
      break;
    case 11:
      if (lane == 3) heddle::detail::ldmatrix<4, true>(r, heddle::detail::smem_addr(heddle_smem + 16 * lane));
      else heddle::detail::ldmatrix<4, false>(r, heddle::detail::smem_addr(heddle_smem + 16 * lane));
      break;
    case 12:
      heddle::detail::ldmatrix<4, false>(r, heddle::detail::smem_addr(heddle_smem + 16 * lane + 2));
      break;
    case 13:
      if (tid == 0) heddle::detail::cp_async<16>(heddle_smem, in + n - 2, 16);
      heddle::cp_async_commit();
      heddle::cp_async_wait<0>();
      break;
    case 14:
      if (tid == 0) heddle::detail::cp_async<8>(heddle_smem, in, 12);
      heddle::cp_async_commit();
      heddle::cp_async_wait<0>();
      break;
    case 15:  // `in` holds n / 4 rows of 8 f16; 16 rows claimed valid
      heddle::copy_tile_async<16, 8, 8, 32, heddle::f16>(reinterpret_cast<heddle::f16*>(heddle_smem),
                                                         reinterpret_cast<const heddle::f16*>(in), 8, 0, 0, 16, 8, tid);
      heddle::cp_async_commit();
      heddle::cp_async_wait<0>();
      break;
    case 16: {
      for (int i = 0; i < 32; ++i) acc[i] = 0.0f;
      const unsigned s = heddle::sm90::smem_u32(heddle_smem);
      const heddle::sm90::u64 db = heddle::sm90::make_desc(s + 2048, 16, 1024, 1);
      const heddle::sm90::u64 da = heddle::sm90::make_desc(tid == 1 ? s + 1024 : s, 16, 1024, 1);
      heddle::sm90::wgmma_fence();
      heddle::sm90::WgmmaSS<64, heddle::f16>::run<0, 0>(acc, da, db, 0);
      heddle::sm90::wgmma_commit();
      heddle::sm90::wgmma_wait<0>();
      out[tid] = bits_of(acc[0]);
      break;
    }
    default:
      if (scenario >= 20 && tid == 0) tma_tiles(scenario - 20, heddle_smem, &tm, out);
      break;
  }
}
