"""The autotuner's candidate space: configs, problems, the per-target config spaces and static
pruning (split from heddle.autotune, which measures and persists)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from .. import _C

# --- configs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """One matmul schedule. roles: ((name, warps, registers), ...) for warp-specialised targets."""
    bm: int
    bn: int
    bk: int
    warps_m: int
    warps_n: int
    stages: int
    prefetch: int = -1
    load: str = "cp_async"
    roles: Tuple[Tuple[str, int, int], ...] = ()
    war: str = ""          # TMA ring without roles: "mbarrier" | "block_sync" ("" = the default)

    @property
    def key(self) -> str:
        k = (f"{self.bm}x{self.bn}x{self.bk}_w{self.warps_m}x{self.warps_n}_s{self.stages}p{self.prefetch}"
             f"_{self.load}")
        if self.roles:
            k += "_" + "-".join(f"{n}{w}r{r}" for n, w, r in self.roles)
        if self.war:
            k += f"_war-{self.war}"
        return k

    @property
    def warps(self) -> int:
        return self.warps_m * self.warps_n

    @property
    def loads_in_flight(self) -> int:
        p = self.prefetch + self.stages if self.prefetch < 0 else self.prefetch
        return p + 1

    def __str__(self) -> str:
        s = (f"tile {self.bm}x{self.bn}x{self.bk}, warps {self.warps_m}x{self.warps_n}, {self.load}, "
             f"{self.stages} stages ({self.loads_in_flight} loads in flight)")
        if self.roles:
            s += ", roles " + ", ".join(f"{n}: {w} warps" + (f" @ {r} regs" if r else "") for n, w, r in self.roles)
        if self.war:
            s += f", slots released by {self.war}"
        return s

    def to_dict(self) -> dict:
        return {"bm": self.bm, "bn": self.bn, "bk": self.bk, "warps_m": self.warps_m, "warps_n": self.warps_n,
                "stages": self.stages, "prefetch": self.prefetch, "load": self.load,
                "roles": [list(r) for r in self.roles], "war": self.war}

    @classmethod
    def from_dict(cls, d: dict) -> "Config":
        return cls(d["bm"], d["bn"], d["bk"], d["warps_m"], d["warps_n"], d["stages"], d.get("prefetch", -1),
                   d.get("load", "cp_async"), tuple(tuple(r) for r in d.get("roles", ())), d.get("war", ""))

    def apply(self, fd) -> None:
        """Schedule fusion `fd` (unscheduled) with this config through the public scheduling API."""
        mm = fd.schedule()
        mm.split("m", self.bm).split("n", self.bn).split("k", self.bk)
        mm.split("m.i", self.bm // self.warps_m).split("n.i", self.bn // self.warps_n)
        batched = len(mm.shape) == 3
        if batched:
            mm.parallelize("b", "BIDz")
        mm.parallelize("m.o", "BIDy").parallelize("n.o", "BIDx")
        mm.parallelize("m.i.o", "warp").parallelize("n.i.o", "warp")
        mm.reorder((["b"] if batched else []) + ["m.o", "n.o", "k.o", "m.i.o", "n.i.o", "m.i.i", "n.i.i", "k.i"])
        operands = next(e for e in fd.exprs() if e["op"] == "matmul")["inputs"]
        by_name = {t.name: t for t in fd.inputs}
        for name in operands:
            c = fd.cache_after(by_name[name], self.load)
            if self.stages > 1:
                if self.war:
                    c.circular_buffer(self.stages, self.prefetch, self.war)
                else:
                    c.circular_buffer(self.stages, self.prefetch)
        if self.roles:
            mm.warp_specialize({n: ({"warps": w, "registers": r} if r else {"warps": w}) for n, w, r in self.roles})


@dataclass(frozen=True)
class Problem:
    m: int
    n: int
    k: int
    batch: int = 1

    def __str__(self) -> str:
        return f"M={self.m} N={self.n} K={self.k}" + (f" batch={self.batch}" if self.batch != 1 else "")


# --- the config space --------------------------------------------------------------------------

SpaceFn = Callable[[dict, Problem], Iterable[Config]]
_spaces: List[Tuple[str, SpaceFn]] = []


def register_space(name: str, fn: SpaceFn) -> None:
    """Add (or replace) a candidate generator: fn(target_info dict, Problem) -> Configs. Generators
    see heddle.target_info(target) and decide themselves whether the target supports them."""
    for i, (n, _) in enumerate(_spaces):
        if n == name:
            _spaces[i] = (name, fn)
            return
    _spaces.append((name, fn))


def space_names() -> List[str]:
    return [n for n, _ in _spaces]


def config_space(target: str, problem: Problem, names: Optional[Sequence[str]] = None) -> List[Config]:
    """Every candidate the registered generators offer for `target` (deduplicated, in order), less those whose
    role register budgets exceed the CTA's setmaxnreg pool (register_pool_problem: they would hang)."""
    ti = _C.target_info(target)
    out: Dict[Config, None] = {}
    for n, fn in _spaces:
        if names is None or n in names:
            for c in fn(ti, problem):
                if not register_pool_problem(c):
                    out.setdefault(c, None)
    return list(out)


def register_pool_problem(c: Config) -> str:
    """Why c's role budgets do not fit the register pool setmaxnreg draws from ('' when they do, or without
    budgets): each role takes whole warpgroups (a 1-warp load role one), the pool is the __launch_bounds__ cap
    times the CTA's threads (schedule/register_pool.h). E.g. 128x128 with mma and epilogue of 8 warps at 160
    and 80 and load at 24 needs 64,512 of the 61,440 registers (96 x 640) of its 640 threads."""
    if not any(r for _, _, r in c.roles):
        return ""
    return _C.register_pool_problem([(n, -(-w // 4), r) for n, w, r in c.roles])


def _tiles(problem: Problem):
    tiles = [(128, 128, 2, 2), (128, 256, 2, 4), (256, 128, 4, 2), (128, 64, 2, 2), (64, 128, 2, 2),
             (64, 64, 2, 2), (64, 256, 1, 4), (256, 64, 4, 1)]
    if problem.m <= 64:  # decode-like: few rows, wide n tiles, all warps along n
        tiles = [(16, 128, 1, 4), (16, 256, 1, 4), (32, 128, 1, 4), (32, 256, 1, 4), (64, 128, 1, 4),
                 (64, 64, 1, 2)] + tiles
    return tiles


def _async_copy_space(ti: dict, problem: Problem) -> Iterable[Config]:
    """cp.async circular buffers, all warps computing: tile x k-tile x stages x prefetch."""
    if not ti["cp_async"]:
        return
    for bm, bn, wm, wn in _tiles(problem):
        for bk in (32, 64):
            for stages in (2, 3, 4, 5):
                yield Config(bm, bn, bk, wm, wn, stages, -1, "cp_async")
                if stages >= 4:  # one fewer load in flight: a free slot loosens the refill barrier
                    yield Config(bm, bn, bk, wm, wn, stages, stages - 2, "cp_async")


def _plain_space(ti: dict, problem: Problem) -> Iterable[Config]:
    """Targets without async copies: synchronous loads, single-buffered and double-buffered."""
    if ti["cp_async"]:
        return
    for bm, bn, wm, wn in [(64, 64, 2, 2), (64, 128, 2, 2), (128, 64, 2, 2), (128, 128, 2, 2)]:
        for bk in (32, 64):
            for stages in (1, 2):
                yield Config(bm, bn, bk, wm, wn, stages, -1, "plain")


def _wgmma_space(ti: dict, problem: Problem) -> Iterable[Config]:
    """Hopper: TMA loads into mbarrier rings feeding warpgroup MMAs (wgmma). Warps split m only, in
    whole warpgroups (64-row slabs); n tiles are wgmma widths. Without roles (empty mbarriers, or a
    block sync releasing the slots), and warp-specialized: a load role and an MMA role with register
    budgets (setmaxnreg), cooperative (the MMA warpgroups split one tile) or ping-pong (two tiles in
    flight), optionally an epilogue role storing through TMA."""
    if not (ti["tma"] and ti["wgmma"]):
        return
    tiles = [(128, 128, 4), (128, 256, 8), (256, 128, 8), (128, 128, 8), (128, 64, 4), (64, 256, 4)]
    if problem.m <= 64:
        tiles = [(64, 128, 4), (64, 256, 4), (64, 64, 4)] + tiles
    for bm, bn, wm in tiles:
        for stages in (3, 4, 5, 6):
            base = dict(bm=bm, bn=bn, bk=64, warps_m=wm, warps_n=1, stages=stages, prefetch=-1, load="tma_load")
            yield Config(**base)
            if stages == 4:
                yield Config(**base, war="block_sync")
            yield Config(**base, roles=(("load", 1, 40), ("mma", wm, 232)))         # cooperative
            yield Config(**base, roles=(("load", 1, 24), ("mma", wm, 240)))
            if wm == 4:
                yield Config(**base, roles=(("load", 1, 40), ("mma", 8, 232)))      # ping-pong
                yield Config(**base, roles=(("load", 1, 24), ("mma", 4, 240), ("epilogue", 4, 232)))
            else:
                yield Config(**base, roles=(("load", 1, 24), ("mma", wm, 160), ("epilogue", wm, 80)))


register_space("cp_async", _async_copy_space)
register_space("plain", _plain_space)
register_space("sm90_tma_wgmma", _wgmma_space)


def static_prune(c: Config, p: Problem) -> Optional[str]:
    """Why `c` cannot or should not run problem `p`, decided without lowering (None: keep it)."""
    # a k loop with fewer k-tiles than stages runs correctly (the prologue's surplus loads are
    # predicated off), so c.stages > k-tiles is kept: it only spends shared memory on slots that stay
    # idle, which the timing weighs like any other cost
    if c.bm > 64 and c.bm > 2 * _round_up(p.m, 16):
        return f"m tile {c.bm} is more than twice M={p.m}"
    if c.bn > 64 and c.bn > 2 * _round_up(p.n, 16):
        return f"n tile {c.bn} is more than twice N={p.n}"
    if c.warps_m > 0 and c.warps_n > 0:
        # the tile's accumulators are spread over the warps that split it (warps_m x warps_n)
        acc = c.bm * c.bn // (c.warps_m * c.warps_n * 32)
        budget = next((r for n, _, r in c.roles if n not in ("load", "producer", "tma", "epilogue", "store",
                                                              "output") and r), 255)
        if acc > min(budget, 255):
            return (f"accumulators need {acc} registers per thread (at most 255)" if budget >= 255 else
                    f"accumulators need {acc} registers per thread, over the MMA role's budget of {budget}")
    return None


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m
