#!/usr/bin/env python3
"""The code blocks of README.md and docs/*.md, as the docs tests see them.

Every fenced block needs a language and a way to be tested:
  cpp   after `<!-- snippet:NAME -->`: a how-to of tests/docs/howto_test.cpp (docs_snippets);
        after `<!-- docs-test: program NAME [context=CTX] -->`: a complete program (it has main),
        compiled on its own after tests/docs/contexts/CTX.hpp and run by the docs_program_NAME_* tests;
        after `<!-- docs-test: fragment CTX -->`: statements, compiled as the body of a function whose
        parameters tests/docs/contexts/CTX.hpp declares (DOCS_PARAMS_CTX), all fragments in one file.
  cmake after `<!-- docs-test: cmake-consumer -->`: the lines of a consumer's CMakeLists.txt, configured
        against the build tree by docs_cmake_consumer.
  sh    one command per line (`\\` continues it); each is listed in tests/docs/commands.tsv as run by
        docs_commands or not executable here, with the reason.
  text  trees and output, not code.
A marker is the last non-blank line before the fence. #include lines of C++ blocks are hoisted to the top
of their file.

Usage:
  doc_blocks.py list ROOT                 every block and how it is tested; exit 1 on an unclassified one
  doc_blocks.py generate ROOT OUT         writes OUT/fragments.cpp, OUT/program_NAME.cpp, OUT/programs.txt,
                                          OUT/cmake_consumer.cmake (a file is rewritten only when it changes)
  doc_blocks.py check ROOT OUT            list, then compare OUT with what generate writes now
  doc_blocks.py commands ROOT TABLE [BUILD [SANDBOX]]
                                          every shell command and its status from TABLE; exit 1 on a
                                          command missing from TABLE, a stale row, or a failed static check;
                                          with BUILD, checks each program's options; with SANDBOX, runs the
                                          `run` rows there
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*(docs-test:\s*(.*?)|snippet:([A-Za-z0-9_-]+))\s*-->\s*$")
CPP_LANGS = {"cpp", "c++"}
SHELL_LANGS = {"sh", "bash"}


class Block:
    def __init__(self, path, line, lang, marker, lines):
        self.path, self.line, self.lang, self.marker, self.lines = path, line, lang, marker, lines
        self.kind, self.name, self.context, self.problem = None, None, None, None

    @property
    def where(self):
        return f"{self.path}:{self.line}"

    def ident(self):
        return re.sub(r"[^A-Za-z0-9]", "_", f"{self.path}_L{self.line}")


def pages(root):
    out = ["README.md"]
    docs = os.path.join(root, "docs")
    out += sorted(f"docs/{f}" for f in os.listdir(docs) if f.endswith(".md"))
    return out


def blocks_of(root, page):
    with open(os.path.join(root, page), encoding="utf-8") as f:
        text = f.read().split("\n")
    result, i, last_text = [], 0, None
    while i < len(text):
        m = FENCE.match(text[i])
        if not m:
            if text[i].strip():
                last_text = text[i]
            i += 1
            continue
        indent, lang, start = len(m.group(1)), m.group(2).lower(), i
        i += 1
        body = []
        while i < len(text) and not re.match(r"^\s*```\s*$", text[i]):
            body.append(text[i][indent:] if text[i][:indent].strip() == "" else text[i].lstrip())
            i += 1
        if i == len(text):
            raise SystemExit(f"{page}:{start + 1}: code block never closed")
        i += 1
        marker = None
        mm = MARKER.match(last_text or "")
        if mm:
            marker = ("snippet", mm.group(3)) if mm.group(3) else ("docs-test", mm.group(2).strip())
        result.append(Block(page, start + 1, lang, marker, body))
        last_text = None
    return result


def classify(b, root):
    kind, arg = b.marker if b.marker else (None, None)
    if b.lang == "":
        b.problem = "no language: give the fence one (text for trees and output)"
    elif b.lang == "text":
        b.kind = "text"
    elif b.lang in SHELL_LANGS:
        b.kind = "shell"
    elif b.lang == "cmake":
        if kind == "docs-test" and arg == "cmake-consumer":
            b.kind = "cmake-consumer"
        else:
            b.problem = "a cmake block needs <!-- docs-test: cmake-consumer --> before it"
    elif b.lang in CPP_LANGS:
        if kind == "snippet":
            b.kind, b.name = "snippet", arg
        elif kind == "docs-test":
            words = arg.split()
            opts = dict(w.split("=", 1) for w in words[2:] if "=" in w)
            if words[:1] == ["program"] and len(words) >= 2:
                b.kind, b.name, b.context = "program", words[1], opts.get("context")
                if not any(re.search(r"\bmain\s*\(", l) for l in b.lines):
                    b.problem = "marked program, but it has no main()"
            elif words[:1] == ["fragment"] and len(words) == 2:
                b.kind, b.context = "fragment", words[1]
            else:
                b.problem = f"unknown marker 'docs-test: {arg}'"
        else:
            b.problem = ("a C++ block needs <!-- docs-test: program NAME [context=CTX] -->, "
                         "<!-- docs-test: fragment CTX --> or <!-- snippet:NAME --> before it")
    else:
        b.problem = f"language '{b.lang}' is not tested (cpp, cmake, sh, text are)"
    if b.context and not os.path.isfile(os.path.join(root, "tests/docs/contexts", b.context + ".hpp")):
        b.problem = f"no context tests/docs/contexts/{b.context}.hpp"


def all_blocks(root):
    out = []
    for page in pages(root):
        for b in blocks_of(root, page):
            classify(b, root)
            out.append(b)
    names = {}
    for b in out:
        if b.kind == "program":
            if b.name in names:
                b.problem = f"program name '{b.name}' also used at {names[b.name]}"
            names[b.name] = b.where
    return out


def describe(b):
    return {
        "text": "text, not code",
        "shell": "shell commands: docs_commands",
        "cmake-consumer": "configured by docs_cmake_consumer",
        "snippet": f"how-to '{b.name}': compiled and run in tests/docs/howto_test.cpp (docs_snippets)",
        "program": f"program '{b.name}'" + (f" (context {b.context})" if b.context else "")
        + f": compiled, run by docs_program_{b.name}_*",
        "fragment": f"fragment in context {b.context}: compiled in fragments.cpp",
    }[b.kind]


def cmd_list(root):
    bad = 0
    for b in all_blocks(root):
        if b.problem:
            bad += 1
            print(f"{b.where}: [{b.lang or '?'}] NOT TESTED: {b.problem}")
        else:
            print(f"{b.where}: [{b.lang}] {describe(b)}")
    print(f"doc_blocks: {bad} block(s) without a test" if bad else "doc_blocks: every block is tested")
    return 1 if bad else 0


def split_includes(lines):
    """The #include lines, and the lines with those left blank (line numbers kept for #line)."""
    is_inc = [bool(re.match(r"^\s*#\s*include\b", l)) for l in lines]
    inc = [l.strip() for l, i in zip(lines, is_inc) if i]
    rest = ["" if i else l for l, i in zip(lines, is_inc)]
    return inc, rest


def generated(root):
    """{file name: content} of everything generate writes."""
    files = {}
    blocks = [b for b in all_blocks(root) if not b.problem]
    header = "// Generated by tests/docs/doc_blocks.py from the documentation: edit the .md file, not this.\n"
    frags = [b for b in blocks if b.kind == "fragment"]
    includes, contexts, bodies = [], [], []
    for b in frags:
        inc, rest = split_includes(b.lines)
        includes += [i for i in inc if i not in includes]
        if b.context not in contexts:
            contexts.append(b.context)
        body = "\n".join("  " + l if l else "" for l in rest)
        bodies.append(f"// {b.where}\nnamespace docs_ctx_{b.context} {{\n"
                      f"[[maybe_unused]] void fragment_{b.ident()}(DOCS_PARAMS_{b.context}) {{\n"
                      f"#line {b.line + 1} \"{b.path}\"\n{body}\n}}\n}}  // namespace docs_ctx_{b.context}\n")
    files["fragments.cpp"] = (header + "\n".join(includes) + "\n"
                              + "".join(f'#include "contexts/{c}.hpp"\n' for c in contexts) + "\n"
                              + "\n".join(bodies))
    programs = []
    for b in blocks:
        if b.kind != "program":
            continue
        programs.append(b.name)
        inc, rest = split_includes(b.lines)
        ctx = f'#include "contexts/{b.context}.hpp"\n' if b.context else ""
        files[f"program_{b.name}.cpp"] = (header + f"// {b.where}\n" + "\n".join(inc) + "\n" + ctx
                                          + f"#line {b.line + 1} \"{b.path}\"\n" + "\n".join(rest) + "\n")
    files["programs.txt"] = "".join(p + "\n" for p in programs)
    cm = [b for b in blocks if b.kind == "cmake-consumer"]
    files["cmake_consumer.cmake"] = "".join(f"# {b.where}\n" + "\n".join(b.lines) + "\n" for b in cm)
    return files


def write_all(files, out):
    os.makedirs(out, exist_ok=True)
    for name, content in files.items():
        path = os.path.join(out, name)
        try:
            with open(path, encoding="utf-8") as f:
                if f.read() == content:
                    continue
        except FileNotFoundError:
            pass
        with open(path, "w", encoding="utf-8") as f:
            f.write(content)


def cmd_check(root, out):
    status = cmd_list(root)
    for name, content in generated(root).items():
        try:
            with open(os.path.join(out, name), encoding="utf-8") as f:
                same = f.read() == content
        except FileNotFoundError:
            same = False
        if not same:
            print(f"doc_blocks: {out}/{name} is older than the documentation: rebuild "
                  "(cmake --build <build>) so that the docs tests compile what the pages say")
            status = 1
    return status


# ---- shell commands ----

def commands_of(root):
    """[(page, line, command)] of every shell block; comments and blank lines dropped."""
    out = []
    for b in all_blocks(root):
        if b.kind != "shell":
            continue
        pending, first = "", None
        for k, l in enumerate(b.lines):
            s = l.strip()
            if not pending and (not s or s.startswith("#")):
                continue
            if first is None:
                first = b.line + 1 + k
            if s.endswith("\\"):
                pending += s[:-1].rstrip() + " "
                continue
            out.append((b.path, first, strip_comment(pending + s)))
            pending, first = "", None
    for page in pages(root):
        out += table_commands(root, page)
    return out


def split_row(line):
    """The cells of a Markdown table row: | outside code spans and not escaped."""
    cells, cur, code, prev = [], "", False, ""
    for c in line.strip().strip("|") if line.strip().endswith("|") else line.strip().lstrip("|"):
        if c == "`":
            code = not code
        if c == "|" and not code and prev != "\\":
            cells.append(cur.strip())
            cur = ""
        else:
            cur += c
        prev = c
    cells.append(cur.strip())
    return cells


def table_commands(root, page):
    """[(page, line, command)]: the code spans of the `command` column of the page's tables."""
    out, col = [], None
    with open(os.path.join(root, page), encoding="utf-8") as f:
        lines = f.read().split("\n")
    in_code = False
    for n, line in enumerate(lines, 1):
        if FENCE.match(line) or re.match(r"^\s*```\s*$", line):
            in_code = not in_code
        if in_code or not line.startswith("|"):
            col = None if not line.startswith("|") else col
            continue
        cells = split_row(line)
        if col is None:
            heads = [c.lower() for c in cells]
            col = heads.index("command") if "command" in heads else -1
            continue
        if col < 0 or re.match(r"^[\s|:-]+$", line) or col >= len(cells):
            continue
        for span in re.findall(r"`([^`]+)`", cells[col]):
            out.append((page, n, span.replace("\\|", "|").strip()))
    return out


def strip_comment(cmd):
    """The command without its trailing comment: a # that starts a word outside quotes."""
    quote, prev = None, " "
    for i, c in enumerate(cmd):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#" and prev.isspace():
            return cmd[:i].rstrip()
        prev = c
    return cmd.strip()


def read_table(path):
    rows = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 4:
                raise SystemExit(f"{path}:{n}: expected 4 tab-separated fields (page, status, reason, command)")
            page, status, reason, command = parts
            if status not in ("run", "no"):
                raise SystemExit(f"{path}:{n}: status must be run or no, not '{status}'")
            if status == "no" and not reason.strip():
                raise SystemExit(f"{path}:{n}: a command not executed needs its reason")
            rows[(page, command)] = (status, reason, n)
    return rows


ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def program_words(cmd):
    """(variables assigned, [(program, its arguments)]) of a command line, looking through sudo, env,
    mpirun's options and `&&` / `;` chains."""
    try:
        words = shlex.split(cmd.replace("&&", " ; ").rstrip("&"), posix=True)
    except ValueError:
        return [], []
    vars_, progs, cur = [], [], []
    for w in words + [";"]:
        if w in (";", "&"):
            if cur:
                progs.append((cur[0], cur[1:]))
            cur = []
        elif not cur and ASSIGN.match(w):
            vars_.append(w.split("=", 1)[0])
        elif not cur and w in ("sudo", "env", "eval"):
            continue
        else:
            cur.append(w)
    return vars_, progs


def static_problems(root, build, cmd):
    """What a command names that does not exist: a repository script, a build/ program, one of its
    --options (against its --help, REQUIRED ones given), or a variable the script never reads."""
    problems = []
    vars_, progs = program_words(cmd)
    for prog, args in progs:
        # Look through a launcher to the program it starts.
        if prog in ("mpirun", "srun", "torchrun", "timeout"):
            for k, a in enumerate(args):
                if a.startswith(("build/", "./", "scripts/", "benchmarks/", "tests/")):
                    prog, args = a, args[k + 1:]
                    break
        if prog.startswith(("scripts/", "benchmarks/", "tests/")):
            path = os.path.join(root, prog)
            if not os.path.isfile(path):
                problems.append(f"{prog} does not exist")
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            for v in vars_:
                if not re.search(rf"\b{v}\b", text) and not script_sources_read(root, text, v):
                    problems.append(f"{prog} never reads {v}")
        elif prog.startswith("build/") and build:
            exe = os.path.join(build, prog[len("build/"):])
            if not os.access(exe, os.X_OK):
                problems.append(f"{prog} is not built ({exe})")
                continue
            try:
                help_text = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=30).stdout
            except (OSError, subprocess.TimeoutExpired) as e:
                problems.append(f"{prog} --help failed: {e}")
                continue
            known = set(re.findall(r"(--[A-Za-z0-9][A-Za-z0-9-]*)", help_text))
            for a in args:
                opt = a.split("=", 1)[0]
                if opt.startswith("--") and opt not in known:
                    problems.append(f"{prog} has no option {opt}")
            for line in help_text.splitlines():
                m = re.match(r"^\s*(--[A-Za-z0-9-]+)\b.*\bREQUIRED\b", line)
                if m and not any(a.split("=", 1)[0] == m.group(1) for a in args):
                    problems.append(f"{prog} requires {m.group(1)}")
    return problems


def script_sources_read(root, text, var):
    """True when a script it sources (benchmarks/bench_env.sh ...) reads the variable."""
    for rel in re.findall(r"(?:source|\.)\s+\"?\$\(dirname[^)]*\)\"?/([A-Za-z0-9_./-]+)", text):
        for base in ("benchmarks", "scripts", "tests"):
            p = os.path.join(root, base, rel)
            if os.path.isfile(p):
                with open(p, encoding="utf-8", errors="replace") as f:
                    if re.search(rf"\b{var}\b", f.read()):
                        return True
    return False


def block_of(root, page, line):
    for b in blocks_of(root, page):
        if b.line < line <= b.line + len(b.lines):
            return (page, b.line)
    return (page, line)


def cmd_commands(root, table_path, build=None, sandbox=None):
    table = read_table(table_path)
    found, bad, counts = set(), [], {"run": 0, "no": 0}
    rows = []
    for page, line, cmd in commands_of(root):
        found.add((page, cmd))
        entry = table.get((page, cmd))
        if entry is None:
            bad.append(f"{page}:{line}: `{cmd}` is neither run nor marked: add it to {table_path}")
            continue
        status, reason, _ = entry
        counts[status] += 1
        problems = static_problems(root, build, cmd)
        for p in problems:
            bad.append(f"{page}:{line}: `{cmd}`: {p}")
        rows.append((page, line, status, reason, cmd))
    for (page, cmd), (status, reason, n) in table.items():
        if (page, cmd) not in found:
            bad.append(f"{table_path}:{n}: `{cmd}` is no longer in {page}: remove the row")
    for page, line, status, reason, cmd in rows:
        label = "RUN" if status == "run" else f"not run ({reason})"
        print(f"{page}:{line}: {label}: {cmd}")
    if sandbox:
        by_block = {}
        for page, line, status, reason, cmd in rows:
            if status == "run":
                by_block.setdefault(block_of(root, page, line), []).append((page, line, cmd))
        for cmds in by_block.values():
            # One script per block: a line ending in & runs beside the next ones, and its status is
            # checked at the end, as a reader typing the block would see it.
            script = ["set -u", "pids=()"]
            for page, line, cmd in cmds:
                script.append("echo " + shlex.quote(f"--- {page}:{line}: {cmd}"))
                if cmd.endswith("&"):
                    script.append(f"{cmd}\npids+=($!)")
                else:
                    script.append(f"{cmd} || {{ echo 'exit status '$?' of {page}:{line}'; exit 1; }}")
            script.append('for p in "${pids[@]}"; do wait "$p" || { echo "a background command exited with $?"; exit 1; }; done')
            r = subprocess.run(["bash", "-c", "\n".join(script)], cwd=sandbox, stdin=subprocess.DEVNULL)
            if r.returncode != 0:
                bad.append(f"{cmds[0][0]}:{cmds[0][1]}: the block's commands failed (exit {r.returncode})")
    print(f"doc commands: {counts['run'] + counts['no']} in all, {counts['run']} run by the docs tests, "
          f"{counts['no']} not executable here (reason given)")
    for b in bad:
        print("FAILED: " + b)
    return 1 if bad else 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "list":
        return cmd_list(argv[2])
    if len(argv) == 4 and argv[1] == "generate":
        write_all(generated(argv[2]), argv[3])
        return 0
    if len(argv) == 4 and argv[1] == "check":
        return cmd_check(argv[2], argv[3])
    if 4 <= len(argv) <= 6 and argv[1] == "commands":
        return cmd_commands(argv[2], argv[3], *argv[4:])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
