# shellcheck shell=bash
# Sourced by the fault scenarios that resume from a checkpoint (torchrun_elastic.sh, slurm_requeue.sh): a
# resume is right only if it continues from the right state, so each scenario keeps a copy of the checkpoint its
# resumed run started from, trains a fault-free reference from that copy at the same world size, and requires
# the two runs to end with the same weights digest (the example's "weights_digest", every rank's agreed).
# The sourcing script defines fail MESSAGE (prints it with its logs and exits non-zero) and log.

# digest_of LOG: the weights_digest of the last summary line in LOG (empty when there is none).
digest_of() { grep -o '"weights_digest": "[0-9a-f]*"' "$1" | tail -n 1 | cut -d'"' -f4 || true; }

# keep_checkpoint SRC_DIR ITERATION DEST_DIR: copies SRC_DIR/checkpoint_<ITERATION>.pt into DEST_DIR, which
# must not exist yet (the reference then resumes from it and nothing else). Called as soon as the fault is
# known, before the resumed run's later saves can rotate the file out (the example keeps two).
keep_checkpoint() {
  local src="$1/checkpoint_$2.pt"
  [ -e "$src" ] || fail "checkpoint_$2.pt is no longer in $1: cannot keep it for the reference run"
  [ ! -e "$3" ] || fail "keep_checkpoint: $3 exists already"
  mkdir -p "$3"
  cp "$src" "$3/" || fail "could not copy $src to $3"
  log "kept checkpoint_$2.pt for the fault-free reference ($3)"
}

# check_resumed WHAT LOG DIR ITERATION WORLD: the run WHAT (output in LOG) last resumed from
# DIR/checkpoint_<ITERATION>.pt and ended at WORLD ranks with that resume in its summary line.
check_resumed() {
  local what=$1 log=$2 dir=$3 iteration=$4 world=$5 line json
  line=$(grep "fashion_mnist: resuming from" "$log" | tail -n 1 || true)
  [[ $line == *"resuming from $dir/checkpoint_$iteration.pt "* ]] ||
    fail "$what did not resume from $dir/checkpoint_$iteration.pt: ${line:-no resume line}"
  json=$(grep '"world_size"' "$log" | tail -n 1 || true)
  [[ $json == *"\"world_size\": $world,"* && $json == *"\"resumed_iteration\": $iteration,"* ]] ||
    fail "$what did not end at world size $world resumed from $iteration: ${json:-no summary line}"
}

# check_reference LOG DIR ITERATION WORLD: check_resumed for the fault-free reference run.
check_reference() { check_resumed "the reference run" "$@"; }

# same_digest WHAT FAULT_LOG REFERENCE_LOG ITERATION: the faulted run's final weights equal the reference's
# (both resumed from checkpoint_<ITERATION>.pt); a mismatch fails with both digests. WHAT names the run in the log.
same_digest() {
  local what=$1 got want
  got=$(digest_of "$2")
  want=$(digest_of "$3")
  [ -n "$got" ] || fail "the resumed run printed no weights_digest"
  [ -n "$want" ] || fail "the fault-free reference run printed no weights_digest"
  [ "$got" = "$want" ] ||
    fail "weights_digest after the fault $got, fault-free run from checkpoint_$4.pt $want: the resumed run did not continue from the checkpoint's state (or the two runs differ in options or thread count)"
  log "$what: weights_digest $got equals the fault-free run's from checkpoint_$4.pt"
}
