#!/usr/bin/python3
"""Writes an instrumented copy of benchmarks/peers/mpi_loop.cpp (argv[1] -> argv[2]) for callgrind: the
regions of instrument_example.py (the gradient all-reduces are their own region, 'allreduce', which the
example and DDP spend inside 'backward'), and PROF_SKIP_EVAL=1 skips the test evaluation.
"""
import sys

src, dst = sys.argv[1], sys.argv[2]
s = open(src).read()


def sub(old, new):
    global s
    if s.count(old) != 1:
        sys.exit(f"instrument_mpi_loop: expected one occurrence of {old!r} in {src}")
    s = s.replace(old, new)


sub("#include <mpi.h>\n", "#include <mpi.h>\n#include <valgrind/callgrind.h>\n#define PROF_REGION(name) CALLGRIND_DUMP_STATS_AT(name)\n")
sub("    check_mpi(MPI_Barrier(MPI_COMM_WORLD), \"MPI_Barrier\");  // start the clock together\n",
    "    PROF_REGION(\"setup\");\n    check_mpi(MPI_Barrier(MPI_COMM_WORLD), \"MPI_Barrier\");  // start the clock together\n"
    "    PROF_REGION(\"barrier\");\n")
sub("      const torch::Tensor target = train.targets().index_select(0, idx);\n      optimizer.zero_grad();\n",
    "      const torch::Tensor target = train.targets().index_select(0, idx);\n      PROF_REGION(\"load\");\n"
    "      optimizer.zero_grad();\n      PROF_REGION(\"zero_grad\");\n")
sub("      loss.backward();\n      average_gradients(params, world);\n",
    "      PROF_REGION(\"forward\");\n      loss.backward();\n      PROF_REGION(\"backward\");\n"
    "      average_gradients(params, world);\n      PROF_REGION(\"allreduce\");\n")
sub("      optimizer.step();\n      const auto b = double(local_batch);\n",
    "      optimizer.step();\n      PROF_REGION(\"optimizer\");\n      const auto b = double(local_batch);\n")
sub("        for (int i = 0; i < 3; ++i) local[i] += s[i];\n      }\n    }\n"
    "    trained += std::chrono::duration<double>(Clock::now() - start).count();\n",
    "        for (int i = 0; i < 3; ++i) local[i] += s[i];\n      }\n      PROF_REGION(\"metrics\");\n    }\n"
    "    trained += std::chrono::duration<double>(Clock::now() - start).count();\n    PROF_REGION(\"epoch_end\");\n")
sub("    accuracy = evaluate(*model, test, world, rank);",
    "    if (!(std::getenv(\"PROF_SKIP_EVAL\") && std::string(std::getenv(\"PROF_SKIP_EVAL\")) == \"1\"))\n"
    "      accuracy = evaluate(*model, test, world, rank);")
open(dst, "w").write(s)
