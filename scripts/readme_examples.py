#!/usr/bin/env python3
"""Rewrites the README's example outputs from real runs. Each example is a fenced ```json block
right after a marker line ``<!-- example: histfit ARGS -->``; the block becomes the output of
``histfit ARGS`` run from the repository root. The CLI test ``readme_examples_match_real_runs``
checks that the blocks still match what the CLI prints (arguments are split at spaces: no
quoting in the marker).

    cargo build --release -p histfit-cli && python scripts/readme_examples.py [path/to/histfit]
"""
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MARKER = re.compile(r"^<!-- example: histfit (.*) -->$")


def main():
    exe = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target", "release", "histfit")
    path = os.path.join(ROOT, "README.md")
    lines = open(path).read().split("\n")
    out, i, n = [], 0, 0
    while i < len(lines):
        out.append(lines[i])
        m = MARKER.match(lines[i])
        if not m:
            i += 1
            continue
        assert lines[i + 1] == "```json", f"README line {i + 2}: expected a ```json block after the marker"
        end = lines.index("```", i + 2)
        text = subprocess.run([exe] + shlex.split(m.group(1)), cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout
        out.append("```json")
        out.extend(text.rstrip("\n").split("\n"))
        out.append("```")
        i, n = end + 1, n + 1
    open(path, "w").write("\n".join(out))
    print(f"{n} examples rewritten", file=sys.stderr)


if __name__ == "__main__":
    main()
