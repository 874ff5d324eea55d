#!/usr/bin/env python3
"""Check that README.md shows examples/minimal.c verbatim.

The README's minimal example is the ```c block that follows the line
"<!-- examples/minimal.c -->"; it must equal the file byte for byte (apart from the
final newline), so the example the README shows is the one the tests build and run.
"""
import sys

MARKER = "<!-- examples/minimal.c -->"


def main(readme_path, example_path):
    readme = open(readme_path, encoding="utf-8").read()
    example = open(example_path, encoding="utf-8").read()
    at = readme.find(MARKER)
    if at < 0:
        print(f"{readme_path}: no '{MARKER}' line before the minimal example")
        return 1
    start = readme.find("```c\n", at)
    end = readme.find("\n```", start + 5)
    if start < 0 or end < 0:
        print(f"{readme_path}: no ```c block after '{MARKER}'")
        return 1
    shown = readme[start + 5:end].rstrip("\n")
    if shown != example.rstrip("\n"):
        a, b = shown.splitlines(), example.rstrip("\n").splitlines()
        for i, (x, y) in enumerate(zip(a + [""] * len(b), b + [""] * len(a))):
            if x != y:
                print(f"README.md and {example_path} differ at line {i + 1} of the example:")
                print(f"  README:    {x!r}")
                print(f"  minimal.c: {y!r}")
                break
        return 1
    print(f"README.md shows {example_path} verbatim ({len(example.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
