"""Random sync_lab programs for the planner's property test (tests/sync/test_sync_property.py).

A program has up to three buffers of two stages, three thread mappings, a serial loop over the trip
count N (sometimes two, sometimes nested), branches on uniform kernel scalars ("f0"), on the thread
("tid < 64") and on a scalar and the loop index together ("(i + f1) % 2"), synchronous and async
writes (cp.async on sm_80, LDS DMA counted by vmcnt on the AMD targets) and reads. The planner
places every sync; the property is that the simulator finds the plan clean for every trip count and
every value of the scalars, and flags every plan with one placed sync deleted or loosened.
"""
from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from typing import Dict, List

BUFFERS = ("X", "Y", "Z")
MAPPINGS = ("a", "b", "c")
FLAGS = ("f0", "f1", "f2")
STAGES = 2


@dataclass
class Case:
    program: list
    target: str
    flags: List[str] = field(default_factory=list)  # uniform scalars the program branches on

    def bindings(self, max_trips: int = 2 * STAGES + 2) -> List[Dict[str, int]]:
        """Every trip count 1..max_trips crossed with every value of the flags."""
        out = []
        for n in range(1, max_trips + 1):
            for vals in itertools.product((0, 1), repeat=len(self.flags)):
                out.append({"N": n, **dict(zip(self.flags, vals))})
        return out


class _Gen:
    def __init__(self, rng: random.Random, target: str):
        self.rng, self.target = rng, target
        self.flags: set = set()
        self.size = 0
        self.cp_async = target.startswith("sm_")  # cp.async groups; AMD LDS DMA is counted per op

    def stage(self, loop_var):
        if loop_var is None:
            return self.rng.choice([0, 1])
        return self.rng.choice([f"{loop_var} % 2", f"({loop_var} + 1) % 2", 0])

    def cond(self, loop_var):
        kinds = ["flag", "flag", "thread"] + (["loopflag"] if loop_var else [])
        k = self.rng.choice(kinds)
        if k == "flag":
            f = self.rng.choice(FLAGS)
            self.flags.add(f)
            return f
        if k == "thread":
            return self.rng.choice(["tid < 64", "tid < 32", "warp == 1"])
        f = self.rng.choice(FLAGS)
        self.flags.add(f)
        return f"({loop_var} + {f}) % 2"

    def block(self, depth, loop_var, in_loop_count):
        stmts = []
        pending_async = False
        for _ in range(self.rng.randint(1, 4)):
            if self.size > 14:
                break
            self.size += 1
            r = self.rng.random()
            if r < 0.15 and depth < 2 and in_loop_count < 2:
                var = "i" if loop_var is None else "j"
                stop = "N" if loop_var is None else 2
                stmts.append(("loop", var, 0, stop, "serial", self.block(depth + 1, var, in_loop_count + 1)))
            elif r < 0.3 and depth < 2:
                then = self.block(depth + 1, loop_var, in_loop_count)
                other = self.block(depth + 1, loop_var, in_loop_count) if self.rng.random() < 0.5 else []
                stmts.append(("if", self.cond(loop_var), then, other))
            elif r < 0.65:
                asy = self.rng.random() < 0.45
                stmts.append(("write", self.rng.choice(BUFFERS), self.stage(loop_var), self.rng.choice(MAPPINGS), asy))
                pending_async |= asy and self.cp_async
                if asy and self.cp_async and self.rng.random() < 0.6:
                    stmts.append(("commit",))
                    pending_async = False
            else:
                stmts.append(("read", self.rng.choice(BUFFERS), self.stage(loop_var), self.rng.choice(MAPPINGS)))
        if pending_async:  # every async copy joins a group before the block ends
            stmts.append(("commit",))
        return stmts


def random_case(seed: int, target: str) -> Case:
    rng = random.Random(seed)
    g = _Gen(rng, target)
    # every stage of every buffer starts written, so every read has data on every path
    init = [("write", b, st, rng.choice(MAPPINGS)) for b in BUFFERS for st in range(STAGES)]
    # straight-line code, the loop over N (most hazards worth finding are loop-carried), more code
    pre = g.block(1, None, 1) if rng.random() < 0.5 else []
    prog = pre + [("loop", "i", 0, "N", "serial", g.block(1, "i", 1))] + g.block(1, None, 1)
    return Case(init + prog, target, sorted(g.flags))
