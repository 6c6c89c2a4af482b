#!/usr/bin/python3
"""Writes an instrumented copy of examples/fashion_mnist/training.cpp (argv[1] -> argv[2]) for callgrind.

The copy marks the regions of each training step with CALLGRIND_DUMP_STATS_AT (no-ops outside valgrind),
so that callgrind writes one profile per region and step, and reads variants from the environment:
  PROF_METRICS=epoch     reduce the progress totals once per epoch instead of every step (reduce_step)
  PROF_LOADER=prestacked batches by index_select on the pre-stacked tensors in the sampler's order,
                         instead of auto_dataloader's per-example get() + Stack collation
  PROF_SKIP_EVAL=1       no test evaluation (shorter runs under valgrind)
Fails when the example no longer has the lines it patches.
"""
import sys

src, dst = sys.argv[1], sys.argv[2]
s = open(src).read()


def sub(old, new):
    global s
    if s.count(old) != 1:
        sys.exit(f"instrument_example: expected one occurrence of {old!r} in {src}")
    s = s.replace(old, new)


sub('#include "threads.hpp"\n',
    '#include "threads.hpp"\n#include <cstdlib>\n#include <valgrind/callgrind.h>\n'
    'static bool prof_env(const char* k, const char* v) { const char* e = std::getenv(k); '
    'return e && std::string(e) == v; }\n'
    '#define PROF_REGION(name) CALLGRIND_DUMP_STATS_AT(name)\n')
sub("""    idist::barrier();  // start the clock together
    progress.start_epoch(epoch);
    std::int64_t step = 0;
    for (auto& batch : loader) {
      const torch::Tensor data = batch.data.to(device);
      const torch::Tensor target = batch.target.to(device);
      optimizer->zero_grad();
      const torch::Tensor logits = model->forward(data);
      const torch::Tensor loss = torch::nn::functional::cross_entropy(logits, target);
      loss.backward();  // auto_model has averaged the gradients over the ranks when this returns
      set_lr(*optimizer, learning_rate(o, double((epoch - 1) * steps + step) / double(o.epochs * steps)));
      optimizer->step();
      const auto [global, print] = reduce_step(step_totals(loss.detach(), logits.detach(), target), progress.due());
      progress.step(++step, global, print);
    }
    progress.end_epoch();
    accuracy = evaluate(*model, test_loader, device);""",
    """    const bool per_epoch_metrics = prof_env("PROF_METRICS", "epoch");
    const bool prestacked = prof_env("PROF_LOADER", "prestacked");
    Totals local_totals;
    PROF_REGION("setup");
    idist::barrier();  // start the clock together
    progress.start_epoch(epoch);
    PROF_REGION("barrier");
    std::int64_t step = 0;
    const auto train_step = [&](const torch::Tensor& batch_data, const torch::Tensor& batch_target) {
      const torch::Tensor data = batch_data.to(device);
      const torch::Tensor target = batch_target.to(device);
      optimizer->zero_grad();
      PROF_REGION("zero_grad");
      const torch::Tensor logits = model->forward(data);
      const torch::Tensor loss = torch::nn::functional::cross_entropy(logits, target);
      PROF_REGION("forward");
      loss.backward();  // auto_model has averaged the gradients over the ranks when this returns
      PROF_REGION("backward");
      set_lr(*optimizer, learning_rate(o, double((epoch - 1) * steps + step) / double(o.epochs * steps)));
      optimizer->step();
      PROF_REGION("optimizer");
      if (per_epoch_metrics) {
        local_totals += step_totals(loss.detach(), logits.detach(), target);
        progress.step(++step, Totals{}, false);
      } else {
        const auto [global, print] = reduce_step(step_totals(loss.detach(), logits.detach(), target), progress.due());
        progress.step(++step, global, print);
      }
      PROF_REGION("metrics");
    };
    if (prestacked) {
      const std::vector<std::size_t> order = train_sampler->indices();
      const std::int64_t b = local_batch;
      const torch::Tensor all = torch::tensor(std::vector<std::int64_t>(order.begin(), order.end()), torch::kLong);
      for (std::int64_t k = 0; k < steps; ++k) {
        const torch::Tensor idx = all.slice(0, k * b, (k + 1) * b);
        const torch::Tensor x = train_set.images().index_select(0, idx);
        const torch::Tensor y = train_set.targets().index_select(0, idx);
        PROF_REGION("load");
        train_step(x, y);
      }
    } else {
      for (auto& batch : loader) {
        PROF_REGION("load");
        train_step(batch.data, batch.target);
      }
    }
    progress.end_epoch();
    PROF_REGION("epoch_end");
    if (per_epoch_metrics) reduce_step(local_totals, false);
    if (!prof_env("PROF_SKIP_EVAL", "1")) accuracy = evaluate(*model, test_loader, device);""")
open(dst, "w").write(s)
