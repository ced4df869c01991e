#!/usr/bin/python3
"""Two or more versions of the Python package, alternated: each configuration of
bench/read_python.py in a fresh process (its first epoch is the process's first), for
every version in turn (their order reversed every other round), ROUNDS times; after each round the medians so far, first epoch
and warm samples/s, and each checked configuration's first epoch against its
--no-verify twin. Run from the repository root.

    rm -rf /tmp/pyold && mkdir /tmp/pyold && git archive HEAD python | tar -x -C /tmp/pyold
    /usr/bin/python3 bench/read_python_ab.py WAREHOUSE 3 head=/tmp/pyold/python new=python
    CFGS="numpy|numpy --no-verify" /usr/bin/python3 bench/read_python_ab.py WAREHOUSE 5 a=A b=B

A directory of python/ sources runs without the compiled part (warehouse_etl._copycrc):
build one as pip would with bench/python_package.sh, e.g. the package with and without it:

    bash bench/python_package.sh /usr/bin/python3 /tmp/pkg
    /usr/bin/python3 bench/read_python_ab.py WAREHOUSE 7 two=python one=/tmp/pkg   # python/: no in-place build

CFGS: read_python.py arguments per configuration, separated by |. EPOCHS (default 1): warm
epochs a process times after its first.
"""
import collections
import json
import os
import statistics
import subprocess
import sys

CFGS = ("numpy|numpy --no-verify|torch --workers 0|torch --workers 0 --no-verify|torch --workers 1|"
        "torch --workers 1 --no-verify|torch --workers 2|torch --workers 2 --no-verify")


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    d, rounds = sys.argv[1], int(sys.argv[2])
    versions = [a.split("=", 1) for a in sys.argv[3:]]
    cfgs = os.environ.get("CFGS", CFGS).split("|")
    epochs = os.environ.get("EPOCHS", "1")
    res = collections.defaultdict(list)  # (cfg, version) -> [(first, warm)]
    for r in range(rounds):
        # Each configuration alternates the versions, in reverse order every other round:
        # run as blocks of one version's configurations, drift between blocks landed on
        # one version (1.11-1.18x where alternating gave 1.01-1.10x).
        for c in cfgs:
            for name, path in (versions if r % 2 == 0 else versions[::-1]):
                out = subprocess.run([sys.executable, "bench/read_python.py"] + c.split() +
                                     ["--tensor-warehouse", d, "--epochs", epochs],
                                     env=dict(os.environ, PYTHONPATH=path), capture_output=True, text=True)
                if out.returncode:
                    sys.exit(f"{name} {c}: {out.stderr[-2000:]}")
                j = json.loads(out.stdout.strip().splitlines()[-1])
                res[(c, name)].append((j["first_samples"] / j["first_seconds"], j["samples"] / j["seconds"]))
        print(f"round {r + 1}", flush=True)
        for c in cfgs:
            for name, _ in versions:
                v = res[(c, name)]
                first, warm = statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)
                twin = res.get((c + " --no-verify", name)) if "--no-verify" not in c else None
                ratio = f"  checked/unchecked first {first / statistics.median(x[0] for x in twin):.2f}x" if twin else ""
                print(f"{c:30s} {name:6s} first {first:8.0f} warm {warm:8.0f}  firsts "
                      f"{[round(x[0]) for x in v]}{ratio}", flush=True)


if __name__ == "__main__":
    main()
