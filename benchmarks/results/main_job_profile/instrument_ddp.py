#!/usr/bin/python3
"""Writes an instrumented copy of benchmarks/peers/ddp_fashion_mnist.py (argv[1] -> argv[2]) for callgrind.

The regions of each training step are marked as in instrument_example.py, through cg_marker.c's cg_dump
(PROF_CG_LIB names the compiled library; without it the markers do nothing). Variants from the environment:
  PROF_METRICS=step      the example's per-step all-reduce of the progress totals (the peer's --metrics step)
  PROF_LOADER=prestacked batches by index_select on the pre-stacked tensors in the sampler's order, instead of
                         DataLoader's per-example __getitem__ + default_collate
  PROF_SKIP_EVAL=1       no test evaluation and no weights digest (shorter runs under valgrind)
"""
import sys

src, dst = sys.argv[1], sys.argv[2]
s = open(src).read()


def sub(old, new):
    global s
    if s.count(old) != 1:
        sys.exit(f"instrument_ddp: expected one occurrence of {old!r} in {src}")
    s = s.replace(old, new)


sub("import numpy as np\n", "import numpy as np\nimport ctypes\n"
    "_cg = ctypes.CDLL(os.environ['PROF_CG_LIB']).cg_dump if os.environ.get('PROF_CG_LIB') else (lambda name: None)\n"
    "_cg_skip_eval = os.environ.get('PROF_SKIP_EVAL') == '1'\n")
sub("        dist.barrier()  # start the clock together, as the example does\n        start = time.perf_counter()\n",
    "        _cg(b'setup')\n        dist.barrier()  # start the clock together, as the example does\n"
    "        start = time.perf_counter()\n        _cg(b'barrier')\n")
sub("        for step, (x, y) in enumerate(loader):\n            optimizer.zero_grad()\n",
    "        def _prestacked():\n"
    "            order = torch.tensor(list(iter(sampler)), dtype=torch.int64)\n"
    "            for k in range(steps):\n"
    "                idx = order[k * local_batch:(k + 1) * local_batch]\n"
    "                yield train_x.index_select(0, idx), train_y.index_select(0, idx)\n"
    "        batches = _prestacked() if os.environ.get('PROF_LOADER') == 'prestacked' else loader\n"
    "        for step, (x, y) in enumerate(batches):\n            _cg(b'load')\n"
    "            optimizer.zero_grad()\n            _cg(b'zero_grad')\n")
sub("            loss = F.cross_entropy(logits, y)\n            loss.backward()\n",
    "            loss = F.cross_entropy(logits, y)\n            _cg(b'forward')\n            loss.backward()\n"
    "            _cg(b'backward')\n")
sub("            optimizer.step()\n            n = float(y.shape[0])\n",
    "            optimizer.step()\n            _cg(b'optimizer')\n            n = float(y.shape[0])\n")
sub("            if args.metrics == \"step\":", "            if args.metrics == \"step\" or os.environ.get('PROF_METRICS') == 'step':")
sub("        trained += time.perf_counter() - start\n",
    "            _cg(b'metrics')\n        trained += time.perf_counter() - start\n        _cg(b'epoch_end')\n")
sub("        if args.metrics != \"step\":", "        if not (args.metrics == \"step\" or os.environ.get('PROF_METRICS') == 'step'):")
sub("        accuracy = evaluate(model, test_x, test_y, world, rank)",
    "        accuracy = 0.0 if _cg_skip_eval else evaluate(model, test_x, test_y, world, rank)")
sub("\"weights_digest\": weights_digest(model.module)", "\"weights_digest\": '' if _cg_skip_eval else weights_digest(model.module)")
open(dst, "w").write(s)
