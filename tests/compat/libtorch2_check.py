#!/usr/bin/env python3
"""Compiles every translation unit that includes LibTorch against another LibTorch's headers.

The linked and tested build uses Debian's LibTorch 1.13; most users build against PyTorch's LibTorch
2.x. This check takes the build's own compile commands (compile_commands.json), swaps LibTorch's
include directories for those of a LibTorch 2.x and runs each with -fsyntax-only, so code that relies
on 1.13's transitive includes, or on an fmt older than the one LibTorch 2.x bundles, fails here.
Files that hold CUDA-only code (guarded by IDIST_TORCH_CUDA) are compiled a second time with that
macro and the CUDA toolkit's headers, where the toolkit exists. A unit that the build compiles with a
target's precompiled header (the LibTorch layer's gtest binaries: <torch/torch.h> and <gtest/gtest.h>,
which these units include anyway) gets the same header precompiled against LibTorch 2.x; every other
unit, the library's above all, is compiled without one, so an include it lacks fails here.

Headers, first found: --headers, $IDIST_LIBTORCH_CHECK_DIR (a LibTorch root, i.e. a folder with
include/torch/csrc/api/include), or the repository's ../shared/libtorch-2.11/include.tar.xz, unpacked
once into the build folder.

Exit status: 0 when every unit compiled, 1 when one failed, 77 (skip) when no headers were found,
except under CI=true, where that is a failure too.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import time

SKIP = 77
TORCH_API_INCLUDE = "torch/csrc/api/include"
CUDA_MACRO = "IDIST_TORCH_CUDA"
PCH_HEADER = "cmake_pch.hxx"  # CMake's name for a target's precompiled header
GCC = {}
# Units built only against a LibTorch with CUDA, so absent from a CPU build's commands: each is
# compiled with the flags of a unit of the same folder that is built here.
CUDA_ONLY_UNITS = {
    "tests/gpu/torch_streams_gpu_test.cpp": "tests/gpu/gpu_main.cpp",
    "tests/gpu/nccl_torch_gpu_test.cpp": "tests/gpu/gpu_main.cpp",
}


def in_ci():
    return os.environ.get("CI", "") in ("true", "1")


def find_headers(args, repo, build):
    """The root of a LibTorch 2.x include tree (a folder with include/), or None with a reason."""
    for root in (args.headers, os.environ.get("IDIST_LIBTORCH_CHECK_DIR")):
        if root:
            if os.path.isdir(os.path.join(root, "include", TORCH_API_INCLUDE)):
                return root, None
            return None, f"{root} has no include/{TORCH_API_INCLUDE}"
    tarball = os.path.join(repo, "..", "shared", "libtorch-2.11", "include.tar.xz")
    if not os.path.isfile(tarball):
        return None, f"no --headers, no IDIST_LIBTORCH_CHECK_DIR and no {os.path.normpath(tarball)}"
    dest = os.path.join(build, "libtorch-2.11-headers")
    stamp = os.path.join(dest, ".unpacked-from")
    signature = f"{os.path.realpath(tarball)} {os.path.getsize(tarball)} {int(os.path.getmtime(tarball))}"
    if not (os.path.isfile(stamp) and open(stamp).read() == signature):
        print(f"unpacking {os.path.normpath(tarball)} into {dest}", flush=True)
        os.makedirs(dest, exist_ok=True)
        with tarfile.open(tarball) as tar:
            tar.extractall(dest)
        with open(stamp, "w") as f:
            f.write(signature)
    return dest, None


def cuda_include_dirs(cuda_root):
    dirs = [os.path.join(cuda_root, "include"), os.path.join(cuda_root, "targets", "x86_64-linux", "include")]
    return [d for d in dirs if os.path.isfile(os.path.join(d, "cuda_runtime_api.h"))]


def rewrite(command, headers, extra, pch=None):
    """The compile command with LibTorch's include directories replaced and output turned off; the
    target's precompiled header, if any, swapped for pch (a header whose .gch is built against 2.x)."""
    argv = shlex.split(command)
    out = [argv[0], "-isystem", os.path.join(headers, "include"),
           "-isystem", os.path.join(headers, "include", TORCH_API_INCLUDE)]
    i = 1
    while i < len(argv):
        a = argv[i]
        if a in ("-o", "-MF", "-MT", "-MQ"):
            i += 2
            continue
        if a in ("-c", "-MD", "-MMD", "-DFMT_SHARED", "-Winvalid-pch"):
            i += 1
            continue
        if a == "-include" and i + 1 < len(argv) and PCH_HEADER in argv[i + 1]:
            if pch:  # the build's .gch holds the other LibTorch's headers
                out += ["-include", pch]
            i += 2
            continue
        if a in ("-isystem", "-I") and i + 1 < len(argv) and TORCH_API_INCLUDE in argv[i + 1]:
            i += 2
            continue
        if (a.startswith("-isystem") or a.startswith("-I")) and TORCH_API_INCLUDE in a:
            i += 1
            continue
        out.append(a)
        i += 1
    if "-DFMT_HEADER_ONLY=1" not in out:
        out.insert(1, "-DFMT_HEADER_ONLY=1")  # LibTorch 2.x bundles its own fmt, headers only
    if is_gcc(out[0]):
        # GCC collects garbage less often: faster on these header-heavy units, for more memory per job
        # (docs/testing.md, "How long the suite takes").
        extra = extra + ["--param=ggc-min-expand=100", "--param=ggc-min-heapsize=2097152"]
    return out[:1] + extra + out[1:] + ["-fsyntax-only"]


def is_gcc(compiler):
    """Whether the compiler is GCC (its --version names no other), asked once per compiler."""
    if compiler not in GCC:
        p = subprocess.run([compiler, "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        GCC[compiler] = p.returncode == 0 and "Free Software Foundation" in p.stdout and "clang" not in p.stdout
    return GCC[compiler]


def pch_of(command):
    """The precompiled header a compile command includes (CMake's cmake_pch.hxx), or None."""
    argv = shlex.split(command)
    for a, b in zip(argv, argv[1:]):
        if a == "-include" and PCH_HEADER in b:
            return b
    return None


def precompile(header, copy, argv, cwd):
    """Copies the build's precompiled header source to copy and precompiles it there (copy + ".gch",
    which GCC takes for -include copy); returns (ok, compiler output)."""
    os.makedirs(os.path.dirname(copy), exist_ok=True)
    shutil.copyfile(header, copy)
    p = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode == 0, p.stdout


def compile_one(job):
    name, argv, cwd = job
    t0 = time.monotonic()
    p = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return name, p.returncode, p.stdout, time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True, help="a build folder configured with compile_commands.json")
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    ap.add_argument("--headers", help="a LibTorch 2.x root (a folder with include/)")
    ap.add_argument("--cuda", default=os.environ.get("CUDA_HOME", "/usr/local/cuda"), help="CUDA toolkit root")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS", os.cpu_count() or 1)))
    ap.add_argument("--filter", default="", help="only files whose path matches this regular expression")
    args = ap.parse_args()
    repo, build = os.path.realpath(args.repo), os.path.realpath(args.build)

    db = os.path.join(build, "compile_commands.json")
    if not os.path.isfile(db):
        print(f"libtorch2 check: FAILED: {db} is missing (configure with CMAKE_EXPORT_COMPILE_COMMANDS=ON)")
        return 1
    headers, why = find_headers(args, repo, build)
    if headers is None:
        print(f"libtorch2 check: no LibTorch 2.x headers: {why}")
        return 1 if in_ci() else SKIP
    version = "?"
    for vfile in ("torch/headeronly/version.h", TORCH_API_INCLUDE + "/torch/version.h"):
        vfile = os.path.join(headers, "include", vfile)
        parts = re.findall(r"#define TORCH_VERSION_(?:MAJOR|MINOR|PATCH) (\d+)", open(vfile).read()) \
            if os.path.isfile(vfile) else []
        if len(parts) == 3:
            version = ".".join(parts)
            break
    cuda = cuda_include_dirs(args.cuda)

    # Repository-relative path -> (compile command, its directory): of a file built by several targets,
    # the first command that includes LibTorch, else the first.
    entries, sources = {}, {}
    for entry in json.load(open(db)):
        path = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
        if path.startswith(repo + os.sep):
            command = entry.get("command") or shlex.join(entry["arguments"])
            rel = os.path.relpath(path, repo)
            if rel not in entries or (TORCH_API_INCLUDE in command and TORCH_API_INCLUDE not in entries[rel][0]):
                entries[rel] = (command, entry["directory"])
                sources[rel] = entry["file"]
    cuda_flags = [f"-D{CUDA_MACRO}=1"] + [x for d in cuda for x in ("-isystem", d)]
    wanted = lambda rel: not args.filter or re.search(args.filter, os.path.join(repo, rel))

    # A job: (name, argv, directory, the build's precompiled header it waits for or None).
    jobs, seen, cuda_units = [], set(), 0
    pchs = {}  # the build's cmake_pch.hxx -> (its copy in the build folder, the precompile command, directory)
    for rel, (command, directory) in entries.items():
        if TORCH_API_INCLUDE not in command or PCH_HEADER in rel or not wanted(rel):
            continue
        seen.add(rel)
        header = pch_of(command)
        if header and header not in pchs:
            copy = os.path.join(build, "libtorch2-pch", str(len(pchs)), PCH_HEADER)  # removed at the end
            flags = [a for a in rewrite(command, headers, []) if a not in ("-fsyntax-only", sources[rel])]
            pchs[header] = (copy, flags + ["-x", "c++-header", copy, "-o", copy + ".gch"], directory)
        jobs.append((rel, rewrite(command, headers, [], pchs[header][0] if header else None), directory, header))
        if cuda and CUDA_MACRO in open(os.path.join(repo, rel), errors="replace").read():
            jobs.append((rel + " [CUDA]", rewrite(command, headers, cuda_flags), directory, None))
            cuda_units += 1
    for unit, like in CUDA_ONLY_UNITS.items() if cuda else ():
        # Absent: no CUDA tests in this build; present: a build with CUDA LibTorch compiled it above.
        if like not in entries or unit in entries or not wanted(unit):
            continue
        command, directory = entries[like]
        jobs.append((unit + " [CUDA]", rewrite(command.replace(like, unit), headers, cuda_flags), directory, None))
        cuda_units += 1
    if not jobs:
        print("libtorch2 check: FAILED: no translation unit includes LibTorch (is the LibTorch layer configured?)")
        return 1
    print(f"libtorch2 check: {len(seen)} translation units against LibTorch {version} headers in {headers}; "
          f"{cuda_units} again with {CUDA_MACRO} and CUDA headers"
          + ("" if cuda else f" (none: no CUDA toolkit headers under {args.cuda})") + f"; {args.jobs} jobs", flush=True)

    failed = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        # The headers are queued first and their units last, so no worker waits on a header still queued.
        built = {h: pool.submit(precompile, h, *pchs[h]) for h in pchs}

        def run(job):
            name, argv, cwd, header = job
            if header:
                ok, output = built[header].result()
                if not ok:
                    return name, 1, f"precompiling {header} against LibTorch {version} failed:\n{output}", 0.0
            return compile_one((name, argv, cwd))

        for name, rc, output, seconds in pool.map(run, sorted(jobs, key=lambda job: job[3] is not None)):
            print(f"  {'ok  ' if rc == 0 else 'FAIL'} {name} ({seconds:.1f} s)", flush=True)
            if rc != 0:
                failed.append(name)
                errors = [line for line in output.splitlines() if "error" in line]
                print("\n".join("      " + line for line in (errors or output.splitlines())[:30]), flush=True)
    shutil.rmtree(os.path.join(build, "libtorch2-pch"), ignore_errors=True)  # each .gch is most of a GB
    print(f"libtorch2 check: {len(jobs) - len(failed)} of {len(jobs)} compiled, {len(failed)} failed"
          + (": " + ", ".join(failed) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
