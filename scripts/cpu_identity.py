#!/usr/bin/env python3
"""Are two histfit builds' CPU results bit-identical? Runs every inference command (fit, scan,
hypotest, limit, significance, ranking, toys, hypotest-toys) with --json on every shipped golden
workspace in both interpolation settings, once per binary, and compares the documents exactly
(floats by their repr, i.e. to the last bit), ignoring only wall-clock fields.

    scripts/cpu_identity.py OLD_BINARY NEW_BINARY [--out DIR]

Exit status 0 when every document is identical, 1 otherwise (the differing paths are listed).
Used to show that a refactoring changed no number (e.g. the likelihood seam, issue 12).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
WORKSPACES = ["simple_workspace", "two_channel_workspace", "complex_workspace", "workspace_tHu"]
COMMANDS = [
    ["fit"],
    ["scan", "--points", "11"],
    ["hypotest", "--mu", "1"],
    ["limit"],
    ["significance"],
    ["ranking"],
    ["toys", "--n-toys", "200", "--seed", "3"],
    ["hypotest-toys", "--mu", "1", "--n-toys", "100", "--seed", "4"],
]
# Timing and counters of wall-clock work: they differ run to run.
VOLATILE = {"fit_seconds", "seconds", "elapsed_seconds", "toys_per_second", "wall_seconds"}


def run(binary, ws, setting, cmd):
    path = os.path.join(ROOT, "tests", "fixtures", ws + ".json")
    args = [binary, cmd[0], path, "--interp-defaults", setting, "--json", *cmd[1:]]
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        return {"exit": p.returncode, "stderr": p.stderr.strip()}
    return json.loads(p.stdout)


def differences(a, b, path=""):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k in VOLATILE or k.endswith("_seconds"):
                continue
            if k not in a or k not in b:
                yield f"{path}/{k}: present in one only"
            else:
                yield from differences(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            yield f"{path}: lengths {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            yield from differences(x, y, f"{path}[{i}]")
    elif type(a) is not type(b) or repr(a) != repr(b):
        yield f"{path}: {a!r} vs {b!r}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--out", help="keep the documents here (default: a temporary directory)")
    a = ap.parse_args()
    out = a.out or tempfile.mkdtemp(prefix="cpu-identity-")
    os.makedirs(out, exist_ok=True)
    compared = failed = errors = 0
    for ws in WORKSPACES:
        for setting in ["smooth", "pyhf"]:
            for cmd in COMMANDS:
                docs = [run(b, ws, setting, cmd) for b in (a.old, a.new)]
                name = f"{ws}.{setting}.{cmd[0]}"
                for tag, d in zip(("old", "new"), docs):
                    with open(os.path.join(out, f"{name}.{tag}.json"), "w") as f:
                        json.dump(d, f, indent=1, sort_keys=True)
                diff = list(differences(*docs))
                compared += 1
                if diff:
                    failed += 1
                    print(f"DIFFERENT {name}: {len(diff)} values, first: {diff[:3]}")
                elif "exit" in docs[0]:
                    # The same refusal from both builds: identical, but not a result.
                    errors += 1
                    print(f"same error {name}: {docs[0]['stderr']}")
    print(f"{compared - failed}/{compared} documents bit-identical, {errors} of them the same error "
          f"on both sides (kept in {out})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
