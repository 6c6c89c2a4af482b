#!/usr/bin/env bash
# tree_check.sh <repository root>: the shape of the tree that docs/architecture.md promises, measured on
# the tracked files, so that it cannot erode one commit at a time:
#   - benchmarks/results holds at most 150 tracked files (raw logs go into one archive per round);
#   - no file name is used twice under src/ (CMakeLists.txt aside): a name says what a file is;
#   - the backends' per-family dispatch files (<backend>_{reduce,gather,distribute,point_to_point}.cpp)
#     have no `default:` label, so -Werror=switch names every backend a new OpType misses;
#   - getenv is called only in the launch module (src/launch/), which parses every variable once;
#   - in src/torch only the communication layer (src/torch/comm/) calls current_model();
#   - the public headers name no internal type (core::) and declare no protected virtual: the backend
#     interface lives in src/core/backend.hpp, behind the ComputationModel front door.
# Each rule prints what broke it. Exits 1 when any rule is broken, 0 otherwise.
set -euo pipefail
root=${1:?usage: tree_check.sh <repository root>}
cd "$root"
command -v git >/dev/null && git rev-parse --is-inside-work-tree >/dev/null 2>&1 || {
  echo "tree_check: $root is not a git work tree (the rules count tracked files)"
  exit 1
}

status=0
fail() {
  echo "FAILED: $1"
  shift
  printf '  %s\n' "$@"
  status=1
}

results=$(git ls-files benchmarks/results | wc -l)
echo "benchmarks/results: $results tracked files (limit 150)"
((results <= 150)) || fail "benchmarks/results holds $results tracked files, more than 150: pack raw logs into the round's raw.tar.xz" \
  "$(git ls-files benchmarks/results | xargs -n1 dirname | sort | uniq -c | sort -rn | head -5 | tr '\n' ';')"

mapfile -t reused < <(git ls-files src | grep -v '/CMakeLists.txt$' | xargs -n1 basename | sort | uniq -d)
echo "file names used twice under src/: ${#reused[@]}"
((${#reused[@]} == 0)) || fail "file names used twice under src/ (rename one to say what it is):" "${reused[@]}"

mapfile -t defaults < <(git ls-files 'src/*/*_reduce.cpp' 'src/*/*_gather.cpp' 'src/*/*_distribute.cpp' \
  'src/*/*_point_to_point.cpp' | grep -E '^src/(serial|mpi|gloo|nccl)/' | xargs -r grep -n -E '^[[:space:]]*default[[:space:]]*:' || true)
echo "default: labels in the backends' op dispatch: ${#defaults[@]}"
((${#defaults[@]} == 0)) || fail "a default: label in a backend's op dispatch (list every OpType of the family instead):" "${defaults[@]}"

if [[ -d src/launch ]]; then
  mapfile -t getenvs < <(git ls-files src include | grep -v '^src/launch/' | xargs -r grep -n -E '\b(std::)?(secure_)?getenv[[:space:]]*\(' || true)
  echo "getenv outside src/launch: ${#getenvs[@]}"
  ((${#getenvs[@]} == 0)) || fail "getenv outside the launch module (read the typed setting from src/launch instead):" "${getenvs[@]}"
fi

if [[ -d src/torch/comm ]]; then
  mapfile -t raw < <(git ls-files src/torch | grep -v '^src/torch/comm/' | xargs -r grep -n 'current_model()' || true)
  echo "current_model() in src/torch outside src/torch/comm: ${#raw[@]}"
  ((${#raw[@]} == 0)) || fail "src/torch reaches the backend outside its communication layer (src/torch/comm):" "${raw[@]}"
fi

mapfile -t internal < <(git ls-files include | xargs -r grep -n -E '\bcore::' || true)
echo "internal (core::) names in include/: ${#internal[@]}"
((${#internal[@]} == 0)) || fail "a public header names an internal type (move it to src/ or make it public API):" "${internal[@]}"

# A virtual declared after `protected:` and before the next access label, in any public header.
mapfile -t prot < <(git ls-files include | xargs -r awk '
  FNR == 1 || /^[[:space:]]*(public|private):/ { p = 0 }
  /^[[:space:]]*protected:/ { p = 1 }
  p && /(^|[^A-Za-z_])virtual[[:space:]]/ { print FILENAME ":" FNR ": " $0 }' || true)
echo "protected virtuals in include/: ${#prot[@]}"
((${#prot[@]} == 0)) || fail "a protected virtual in a public header (the backend interface belongs in src/core/backend.hpp):" "${prot[@]}"

exit "$status"
