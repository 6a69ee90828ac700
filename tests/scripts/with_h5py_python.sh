#!/usr/bin/env bash
# Runs a Python test with the first interpreter that can import h5py and
# numpy (a pyenv python3 on PATH may not see Debian's python3-h5py);
# exit 77 (CTest: skipped) when there is none.
for py in python3 /usr/bin/python3; do
  if command -v "$py" >/dev/null && "$py" -c "import h5py, numpy" 2>/dev/null; then exec "$py" "$@"; fi
done
echo "no Python with h5py and numpy (scripts/install_deps.sh installs python3-h5py): skipped"
exit 77
