#!/usr/bin/env bash
# `mrmf datagen` and `mrmf downsample` under mpiexec: the ranks share a
# CosmoFlow folder by files, a Neuron Inverter file is written by rank 0 alone
# (before, every rank wrote every file at once). The output of 3 ranks must
# equal that of 1 rank dataset for dataset (h5diff), --force over a folder
# that holds more files than the new data set must leave none of the old ones,
# and a refused run must change nothing.
#   data_tools_multirank.sh MPIEXEC MRMF_BINARY
MPIEXEC=$1 MRMF=$2
source "$(dirname "$0")/cli_test_setup.sh"
command -v h5diff >/dev/null || fail "h5diff not found (Debian package hdf5-tools; scripts/install_deps.sh installs it)"
same_tree() {  # every *.h5 of $1 equals its namesake in $2, and the sets of names match
  diff <(cd "$1" && find . -name '*.h5' | sort) <(cd "$2" && find . -name '*.h5' | sort) || fail "$1 and $2 hold different files"
  for f in $(cd "$1" && find . -name '*.h5'); do
    h5diff -q "$1/$f" "$2/$f" || fail "$1/$f differs from $2/$f"
  done
}
CF="cosmoflow --size 16 --train 5 --val 2 --test 1 --per-file 2 --seed 4"

"$MRMF" datagen $CF --out "$DIR/cf1" >/dev/null || fail "1-rank datagen"
# An older, bigger data set in the folder first: --force must remove it all.
"$MRMF" datagen cosmoflow --size 16 --train 9 --val 1 --test 1 --per-file 1 --seed 9 --out "$DIR/cf3" >/dev/null || fail "old data"
timeout 90 "$MPIEXEC" -n 3 "$MRMF" datagen $CF --out "$DIR/cf3" > "$DIR/log" 2>&1
[[ $? -eq 2 ]] || { cat "$DIR/log"; fail "3-rank datagen over existing files without --force was not refused with exit 2"; }
[[ $(find "$DIR/cf3" -name '*.h5' | wc -l) -eq 11 ]] || fail "a refused datagen changed the folder"
timeout 90 "$MPIEXEC" -n 3 "$MRMF" datagen $CF --out "$DIR/cf3" --force > "$DIR/log" 2>&1 || { cat "$DIR/log"; fail "3-rank datagen"; }
grep -q "wrote 5 files" "$DIR/log" || { cat "$DIR/log"; fail "the summary does not count all ranks' files"; }
same_tree "$DIR/cf1" "$DIR/cf3"

"$MRMF" downsample --in "$DIR/cf1" --out "$DIR/cf1_half" --factor 2 --axes x >/dev/null || fail "1-rank downsample"
timeout 90 "$MPIEXEC" -n 3 "$MRMF" downsample --in "$DIR/cf1" --out "$DIR/cf3_half" --factor 2 --axes x > "$DIR/log" 2>&1 \
  || { cat "$DIR/log"; fail "3-rank downsample"; }
grep -q "wrote 5 file(s).*(8 samples" "$DIR/log" || { cat "$DIR/log"; fail "the downsample summary does not count all ranks"; }
same_tree "$DIR/cf1_half" "$DIR/cf3_half"

NI="neuron-inverter --train 40 --val 8 --test 8 --time-bins 32 --seed 5"
"$MRMF" datagen $NI --out "$DIR/ni1.h5" >/dev/null || fail "1-rank NI datagen"
timeout 90 "$MPIEXEC" -n 3 "$MRMF" datagen $NI --out "$DIR/ni3.h5" > "$DIR/log" 2>&1 || { cat "$DIR/log"; fail "3-rank NI datagen"; }
[[ $(grep -c "datagen neuron-inverter: wrote" "$DIR/log") -eq 1 ]] || { cat "$DIR/log"; fail "not exactly one rank wrote the NI file"; }
h5diff -q "$DIR/ni1.h5" "$DIR/ni3.h5" || fail "NI files differ"
timeout 90 "$MPIEXEC" -n 3 "$MRMF" downsample --in "$DIR/ni1.h5" --out "$DIR/ni3_t16.h5" --factor 2 --axes t > "$DIR/log" 2>&1 \
  || { cat "$DIR/log"; fail "3-rank NI downsample"; }
"$MRMF" downsample --in "$DIR/ni1.h5" --out "$DIR/ni1_t16.h5" --factor 2 --axes t >/dev/null || fail "1-rank NI downsample"
h5diff -q "$DIR/ni1_t16.h5" "$DIR/ni3_t16.h5" || fail "NI downsampled files differ"
echo "PASS: 3-rank datagen and downsample equal 1-rank output"
