#!/usr/bin/env python3
"""Discovers tests/integration/test_*.py and runs every function named test_*.

Each test function raises on failure. Prints one line per test and a closing
"N passed, N failed". An optional argument filters test names by substring.
"""
import importlib.util
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# Suites: the integration tests, then the fault-injection suite.
SUITES = [HERE, os.path.join(os.path.dirname(HERE), "faults")]


def main():
    only = sys.argv[1] if len(sys.argv) > 1 else None
    passed = failed = 0
    files = [(d, f) for d in SUITES if os.path.isdir(d)
             for f in sorted(os.listdir(d))]
    for folder, fname in files:
        if not (fname.startswith("test_") and fname.endswith(".py")):
            continue
        spec = importlib.util.spec_from_file_location(
            fname[:-3], os.path.join(folder, fname))
        mod = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(mod)
        except Exception:
            print(f"FAIL {fname}: import\n{traceback.format_exc()}")
            failed += 1
            continue
        for name in sorted(n for n in dir(mod) if n.startswith("test_")):
            fn = getattr(mod, name)
            if not callable(fn):
                continue
            full = f"{fname[:-3]}.{name}"
            if only and only not in full:
                continue
            start = time.monotonic()
            try:
                fn()
            except Exception:
                failed += 1
                print(f"FAIL {full} ({time.monotonic() - start:.1f}s)")
                print("    " + traceback.format_exc().replace("\n", "\n    "))
            else:
                passed += 1
                print(f"ok   {full} ({time.monotonic() - start:.1f}s)")
            sys.stdout.flush()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
