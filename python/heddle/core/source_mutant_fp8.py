"""Source-mutant kinds of the FP8 kernels (issue 32, docs/fp8.md): the facts an 8-bit wgmma kernel adds,
registered into heddle.core.source_mutants.KINDS (opt-in: source_mutants(src, kinds=...)).

  fp8_k_step      the MMA's k tile (MmaSm90's BK) halved on a kernel with 8-bit operands: each k tile's
                  wgmma steps (BK / 32 of m64nNk32) cover half of the tile the TMA loaded, with the wrong row
                  pitch -- the k step of the 8-bit form taken for the 16-bit one's.
  fp8_drop_scale  an epilogue multiply by a scale operand (a tensor parameter E_scale*) replaced by its other
                  factor: the dequantization (or the output scale) skipped.

The computed output scale (heddle.ops.quantize; docs/fp8.md "Computed output scales"), on the printed
quantize epilogue of the wgmma kernel (codegen/wgmma_printer.cpp quantEpilogue) and of the tcgen05 kernel
(codegen/tcgen05_printer.cpp quantTmemEpilogue: no shuffle there, a row's columns are one thread's):
  quant_shuffle   one shfl.xor step of the quad's amax dropped: lanes see the amax of half the row's columns.
  quant_mask      the ragged-column mask of the amax dropped: columns outside N (their operand reads clamped to
                  the last column) enter the max.
  quant_group     the group index of the scale store off by one column ((g0 - 1) / group): a tile's scales land
                  in the previous group's slot.
  quant_divisor   the scale's divisor the other 8-bit format's largest value (448 <-> 57344).

The MX-format output (heddle.ops.quantize(..., group="mx32"); docs/fp8.md "MX formats"), on the printed store of
codegen/tcgen05_printer.cpp mxTmemEpilogue (one tcgen05.ld of 32 columns is a row's MX block):
  mx_amax         the block's amax without the absolute value: a block whose largest magnitude is negative gets
                  the code of its largest positive value (or 0).
  mx_code         the shared exponent's emax off by one (ebits - emax -> ebits - emax - 1): every code one high,
                  q half as large -- a valid MX encoding, but not the OCP FLOOR one.
  mx_offset       the blocked offset's 32-row sub-block and row-in-sub-block strides swapped ((r % 32) * 4 +
                  ((r % 128) / 32) * 16): the code bytes land in the wrong rows of torch's to_blocked chunk.
  mx_padding      the padding rows (past M) and blocks (past N) store the code of their clamped reads instead of 0.
  mx_inverse      the multiply by 2^-e built one exponent low (254 - code -> 253 - code): q half of y / 2^e.

The TMA-store epilogue with an 8-bit output (codegen/wgmma_printer.cpp stagedPair8; the staged quantize too) has
one more, outside the registry (no mutation family of tests/support/mutation_defs.py stages 8-bit outputs, and
every registered kind must find a family): fp8_staging_mutants(source) gives
  fp8_staging     a pair's staging address without the 128-byte swizzle (TmaTile<R, 128, e4m3>::offset(r, c)
                  -> r * 128 + c): the tile written row-major where the TMA store reads it swizzled.
"""
from __future__ import annotations

import re

from .source_mutant_classic import SourceMutant, _code, _kind

_F8_T = re.compile(r"^using T = heddle::e[45]m[23];")
_MMA = re.compile(r"^(using Mma = heddle::MmaSm90<\d+, \d+, )(\d+)(,)")
_DEF = re.compile(r"const (?:float|heddle::pairf) r(\d+) = (.*?);\s*\\?\s*$")  # pair programs: macro lines


@_kind("fp8_k_step")
def _fp8_k_step(lines):
    if not any(_F8_T.match(ln) for ln in lines):
        return
    for i, ln in enumerate(lines):
        m = _MMA.match(ln)
        if m and int(m.group(2)) >= 64:
            bk = int(m.group(2))
            yield i, ln[:m.start(2)] + str(bk // 2) + ln[m.end(2):], f"MmaSm90 k tile {bk} -> {bk // 2}"


@_kind("fp8_drop_scale")
def _fp8_drop_scale(lines):
    scales = set()  # registers loaded from a scale tensor, in the scalar and the pair programs
    for ln in lines:
        m = _DEF.search(_code(ln))
        if m and re.search(r"\bE_scale\w*", m.group(2)):
            scales.add(m.group(1))
    for i, ln in enumerate(lines):
        m = _DEF.search(_code(ln))
        if not m:
            continue
        rhs = m.group(2)
        for s in sorted(scales):
            # scalar: rA * rS / rS * rA; pair: {rA.x * rS.x, rA.y * rS.y}
            pm = re.fullmatch(r"\{(r\d+)\.x \* r(\d+)\.x, \1\.y \* r\2\.y\}", rhs)
            sm = re.fullmatch(r"(r\d+) \* (r\d+)", rhs)
            other = None
            if pm and pm.group(2) == s:
                other = pm.group(1)
            elif pm and pm.group(1) == "r" + s:
                other = "r" + pm.group(2)
            elif sm and sm.group(2) == "r" + s:
                other = sm.group(1)
            elif sm and sm.group(1) == "r" + s:
                other = sm.group(2)
            if other:
                start = ln.index(rhs, ln.index("="))
                yield i, ln[:start] + other + ln[start + len(rhs):], f"r{m.group(1)}: the multiply by scale r{s} dropped"


_SHFL = re.compile(r"^(\s*)amax = fmaxf\(amax, __shfl_xor_sync\(0xffffffffu, amax, (\d+)\)\);")
# wgmma: a pair's column (n0 + lc0 [+ 1], y.x / y.y); tcgen05: the column n0 + c0 + j of a tcgen05.ld (y a float)
_MASK = re.compile(r"if \((?:n0 \+ lc0(?: \+ 1)?|n0 \+ c0 \+ j) < N\) (amax = fmaxf\(amax, fabsf\(r\d+(?:\.[xy])?\)\);)")
_GROUP = re.compile(r"\[\(long long\)qrow \* \d+ \+ \((n0 \+ (?:\d+|g0))\) / (\d+)\] = qs;")  # g0: tcgen05's group loop
_DIVISOR = re.compile(r"const float qs = fmaxf\(amax, [^)]*\) / (448\.0f|57344\.0f);")


@_kind("quant_shuffle")
def _quant_shuffle(lines):
    for i, ln in enumerate(lines):
        m = _SHFL.match(ln)
        if m:
            yield i, m.group(1) + "(void)0;", f"the quad's shfl.xor {m.group(2)} step dropped"


@_kind("quant_mask")
def _quant_mask(lines):
    for i, ln in enumerate(lines):
        m = _MASK.search(ln)
        if m:
            yield i, ln[:m.start()] + m.group(1) + ln[m.end():], "the amax's ragged-column mask dropped"


@_kind("quant_group")
def _quant_group(lines):
    for i, ln in enumerate(lines):
        m = _GROUP.search(ln)
        if m:
            at = m.start(1)
            yield i, ln[:at] + m.group(1) + " - 1" + ln[m.end(1):], f"scale group index ({m.group(1)} - 1) / {m.group(2)}"


@_kind("quant_divisor")
def _quant_divisor(lines):
    other = {"448.0f": "57344.0f", "57344.0f": "448.0f"}
    for i, ln in enumerate(lines):
        m = _DIVISOR.search(ln)
        if m:
            d = m.group(1)
            yield i, ln[:m.start(1)] + other[d] + ln[m.end(1):], f"scale divisor {d} -> {other[d]}"


_STAGE8 = re.compile(r"heddle::sm90::TmaTile<\d+, (\d+), heddle::e[45]m[23]>::offset\(lr, (lc0(?: - \d+)?)\)")


def fp8_staging_mutants(source: str):
    """The fp8_staging mutants of a printed kernel (see the module docstring), one per staging store line."""
    lines = source.split("\n")
    out = []
    for i, ln in enumerate(lines):
        m = _STAGE8.search(ln)
        if m:
            new = lines[:i] + [ln[:m.start()] + f"(lr) * {m.group(1)} + ({m.group(2)})" + ln[m.end():]] + lines[i + 1:]
            out.append(SourceMutant("fp8_staging", i + 1, "the 8-bit staging pair stored without the 128-byte swizzle",
                                    "\n".join(new)))
    return out


# the MX-format output (codegen/tcgen05_printer.cpp mxTmemEpilogue)
_MX_AMAX = re.compile(r"amax = fmaxf\(amax, fabsf\((r\d+)\)\);(?=  // N is a multiple of 32)")
_MX_CODE = re.compile(r"const int code = live && ebits > (\d+) \? ebits - (\d+) : 0;")
_MX_OFFSET = re.compile(r"\(qrow % 32\) \* 16 \+ \(\(qrow % 128\) / 32\) \* 4")
_MX_INVERSE = re.compile(r"__uint_as_float\(\(unsigned\)\((254) - code\) << 23\)")


@_kind("mx_amax")
def _mx_amax(lines):
    for i, ln in enumerate(lines):
        m = _MX_AMAX.search(ln)
        if m:
            yield i, ln[:m.start()] + f"amax = fmaxf(amax, {m.group(1)});" + ln[m.end():], "the MX block's amax without fabsf"


@_kind("mx_code")
def _mx_code(lines):
    for i, ln in enumerate(lines):
        m = _MX_CODE.search(ln)
        if m:
            e = int(m.group(2))
            yield i, ln[:m.start(2)] + str(e + 1) + ln[m.end(2):], f"the e8m0 code's emax {e} -> {e + 1}"


@_kind("mx_offset")
def _mx_offset(lines):
    for i, ln in enumerate(lines):
        m = _MX_OFFSET.search(ln)
        if m:
            yield i, ln[:m.start()] + "(qrow % 32) * 4 + ((qrow % 128) / 32) * 16" + ln[m.end():], \
                "the blocked offset's row strides 16 and 4 swapped"


@_kind("mx_padding")
def _mx_padding(lines):
    for i, ln in enumerate(lines):
        m = _MX_CODE.search(ln)
        if m:
            at = ln.index("live && ")
            yield i, ln[:at] + ln[at + len("live && "):], "the padding rows and blocks store their computed code"


@_kind("mx_inverse")
def _mx_inverse(lines):
    for i, ln in enumerate(lines):
        m = _MX_INVERSE.search(ln)
        if m:
            yield i, ln[:m.start(1)] + "253" + ln[m.end(1):], "the 2^-e multiply one exponent low"
