"""One torch.compile restart sample (run as a fresh process by test_restart_bench.py): a 2-block Llama
(transformers, tiny config, bf16, random weights) compiled with heddle's backend or inductor; prints one
JSON line with the first call's wall time (inference: a no_grad forward; training: forward + backward) and
the cache counters.

    python benchmarks/restart_probe.py {heddle|inductor} {infer|train} [--profile FILE] [--cold-blas] [--phases]
                                       [--threads N]

--threads N sets torch's intra-op threads (torch.set_num_threads) before the timed call, for both backends.
"""
import json
import sys
import time

t_start = time.perf_counter()
import torch  # noqa: E402
import transformers as tf  # noqa: E402


def model():
    cfg = tf.LlamaConfig(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_hidden_layers=2,
                         vocab_size=128, attn_implementation="eager", num_key_value_heads=2,
                         max_position_embeddings=64)
    torch.manual_seed(0)
    return tf.LlamaModel(cfg).to(torch.bfloat16)


def main():
    backend, mode = sys.argv[1], sys.argv[2]
    prof = sys.argv[sys.argv.index("--profile") + 1] if "--profile" in sys.argv else None
    m = model().train(mode == "train")
    ids = torch.randint(0, 128, (2, 8), generator=torch.Generator().manual_seed(1))

    def first():
        # heddle's backend is imported inside the timed call, as backend="heddle" (the entry point) would be
        if backend == "heddle":
            from heddle.dynamo import heddle_backend as be
        else:
            be = "inductor"
        compiled = torch.compile(lambda x: m(input_ids=x).last_hidden_state, backend=be)
        if mode == "train":
            compiled(ids).float().sum().backward()
        else:
            with torch.no_grad():
                compiled(ids)

    if "--threads" in sys.argv:
        torch.set_num_threads(int(sys.argv[sys.argv.index("--threads") + 1]))
    if "--cold-blas" not in sys.argv:
        # The CPU's BLAS initialises on its first matmul of each dtype (about 0.3 s for float32 here): heddle's
        # ops compute in float32 with torch on CPU tensors, inductor's code in bf16, so without this the first
        # call would charge heddle a one-time CPU cost that is no part of a restart (on CUDA heddle's ops run
        # kernels). Done for both backends; --cold-blas leaves it in.
        for dt in (torch.float32, torch.bfloat16):
            torch.matmul(torch.ones(8, 8, dtype=dt), torch.ones(8, 8, dtype=dt))
    phases = {"backend_ms": 0.0}
    if "--phases" in sys.argv:   # time spent inside the backend call (dynamo's call of the user compiler)
        from torch._dynamo.output_graph import OutputGraph
        inner = OutputGraph._call_user_compiler

        phases["run_ms"] = 0.0

        def timed(self, *a, **k):
            t = time.perf_counter()
            try:
                fn = inner(self, *a, **k)
            finally:
                phases["backend_ms"] += (time.perf_counter() - t) * 1e3

            def run(*args, **kw):   # the compiled graph's own calls (its first execution)
                t = time.perf_counter()
                try:
                    return fn(*args, **kw)
                finally:
                    phases["run_ms"] += (time.perf_counter() - t) * 1e3
            return run
        OutputGraph._call_user_compiler = timed
    t0 = time.perf_counter()
    if prof:
        import cProfile
        cProfile.runctx("first()", globals(), {"first": first}, prof)
    else:
        first()
    t1 = time.perf_counter()
    from torch._dynamo.utils import counters
    out = {"ms": (t1 - t0) * 1e3, "process_ms": (t1 - t_start) * 1e3,
           "aot_hit": counters["aot_autograd"]["autograd_cache_hit"],
           "aot_miss": counters["aot_autograd"]["autograd_cache_miss"],
           "aot_bypass": counters["aot_autograd"]["autograd_cache_bypass"],
           "fx_hit": counters["inductor"]["fxgraph_cache_hit"],
           "fx_miss": counters["inductor"]["fxgraph_cache_miss"], **phases}
    if backend == "heddle":
        import heddle.dynamo as hd
        out["heddle"] = dict(hd.stats)
    print(json.dumps(out))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
