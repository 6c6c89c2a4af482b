#!/usr/bin/env python3
"""The rule on GoogleTest skips (docs/testing.md, "No green skip in CI").

A gtest binary reports a skipped test as passed to ctest, so ctest's own "(Skipped)" never shows it.
Every gtest process of the suite writes its outcomes to <build>/test-records/<registration>/<pid>.rec
(support/test_record.cpp). This script reads them after ctest: every skip outside the GPU tests
(registrations gpu_*) must be listed in support/allowed_skips.txt with its reason and a registration
that runs the test, and that registration's record must show the test passed (on at least one rank,
skipped on none). Under CI (--ci) any other skip, or a listed registration that did not run the test,
fails; elsewhere they are reported as warnings.

  check_skips.py [--ci] <allowed_skips.txt> <build dir> [<build dir>...]

The first build dir is the main build: its records and its ctest registrations (ctest -N) also serve
the later ones (the sanitizer builds run a subset of the suite).
"""
import fnmatch
import os
import subprocess
import sys
from collections import defaultdict


def read_allowed(path):
    """Entries (test, skipped_in, reason, runner, line number): globs except runner."""
    entries = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = [p.strip() for p in line.split("|")]
            if len(parts) != 4 or not all(parts):
                sys.exit(f"{path}:{n}: expected '<test> | <registrations> | <reason> | <runner>', got: {line}")
            entries.append((*parts, n))
    return entries


def read_records(build):
    """{registration: {test: [(outcome, reason), ...]}} from <build>/test-records."""
    records = defaultdict(lambda: defaultdict(list))
    top = os.path.join(build, "test-records")
    if not os.path.isdir(top):
        return records
    for reg in sorted(os.listdir(top)):
        folder = os.path.join(top, reg)
        for name in sorted(os.listdir(folder)):
            with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                for line in f:
                    fields = line.rstrip("\n").split("\t")
                    if len(fields) >= 2:
                        records[reg][fields[1]].append((fields[0], fields[2] if len(fields) > 2 else ""))
    return records


def registered(build):
    """The names ctest -N lists in this build."""
    try:
        out = subprocess.run(["ctest", "-N", "--test-dir", build], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return set()
    names = set()
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("Test") and ":" in line:
            names.add(line.split(":", 1)[1].strip())
    return names


def ran_without_skipping(records, test):
    """True when some process passed the test and none skipped it."""
    outcomes = [o for o, _ in records.get(test, [])]
    return "PASSED" in outcomes and "SKIPPED" not in outcomes


def main(argv):
    ci = "--ci" in argv
    args = [a for a in argv if a != "--ci"]
    if len(args) < 2:
        sys.exit(__doc__)
    allowed = read_allowed(args[0])
    builds = args[1:]
    main_records = read_records(builds[0])
    main_registered = registered(builds[0])
    problems, listed, found = [], defaultdict(set), set()
    for build in builds:
        records = main_records if build == builds[0] else read_records(build)
        names = main_registered if build == builds[0] else registered(build) | main_registered
        where = "" if build == builds[0] else os.path.basename(os.path.normpath(build)) + "/"
        for reg, tests in sorted(records.items()):
            if reg.startswith("gpu_"):
                continue
            for test, outcomes in sorted(tests.items()):
                for reason in sorted({r for o, r in outcomes if o == "SKIPPED"}):
                    found.add((where, reg, test))
                    match = [e for e in allowed
                             if fnmatch.fnmatchcase(test, e[0]) and fnmatch.fnmatchcase(reg, e[1])
                             and fnmatch.fnmatchcase(reason, e[2])]
                    if not match:
                        problems.append(f"{where}{reg}: {test} skipped, not in the allowed list: {reason}")
                        continue
                    runner, line = match[0][3], match[0][4]
                    if runner not in names:
                        problems.append(f"{where}{reg}: {test}: the listed registration {runner} "
                                        f"(allowed_skips.txt:{line}) does not exist")
                    elif not (ran_without_skipping(records.get(runner, {}), test)
                              or ran_without_skipping(main_records.get(runner, {}), test)):
                        problems.append(f"{where}{reg}: {test}: the listed registration {runner} "
                                        f"(allowed_skips.txt:{line}) did not run it without skipping "
                                        f"(not run by this ctest invocation, skipped or failed there)")
                    else:
                        listed[(test, reason, runner)].add(f"{where}{reg}")
    # Every entry names a registration that exists (a renamed test must not leave a stale promise).
    for test, skipped_in, reason, runner, line in allowed:
        if runner not in main_registered:
            problems.append(f"allowed_skips.txt:{line}: {test}: runner registration {runner} is not registered "
                            f"in {builds[0]}")
    print(f"gtest skips outside the GPU tests: {len(found)} (registration, test) pairs, "
          f"{sum(len(v) for v in listed.values())} allowed by the list")
    for (test, reason, runner), regs in sorted(listed.items()):
        print(f"  {test} ({reason}) in {', '.join(sorted(regs))}; runs in {runner}")
    for p in problems:
        print(("FAILED: " if ci else "WARNING: ") + p)
    return 1 if problems and ci else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
