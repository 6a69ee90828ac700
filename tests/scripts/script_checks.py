"""Shared by the tests of the analysis scripts in scripts/: run one, check a
condition with the output shown on failure, and read its markdown tables."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_script(name, args):
    """scripts/<name> with args under this interpreter: (exit code, stdout + stderr)."""
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", name)] + args, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def check(cond, what, out):
    if not cond:
        print("FAILED:", what, "\n", out)
        sys.exit(1)


def table_rows(text):
    """{first cell: the other cells} of every markdown table row but headers and rules."""
    rows = {}
    for line in text.splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 1 and not cells[0].startswith("---") and cells[0] not in ("resolution", "method"):
            rows[cells[0]] = cells[1:]
    return rows
