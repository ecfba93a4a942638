#!/usr/bin/env python3
"""SASS instruction counts of the kernels in a CUDA object, for comparing two versions of a
kernel without a GPU (scripts/sass_counts.sh fetches cuobjdump and nvdisasm and calls this).

  sass_counts.py SASS_FILE PATTERN [--loops] [--top N]

SASS_FILE is `cuobjdump -sass` output; PATTERN a substring of the mangled kernel names to show.
Per kernel: its instruction count and most frequent opcodes (with their modifiers). With
--loops, each backward branch's body instead (a loop, as the compiler laid it out, with the
loops inside it): what one turn of it issues per warp, the count a chunk loop's cost follows.
Static counts: a loop the compiler did not unroll counts once.
"""
import argparse
import collections
import re
import subprocess
import sys

INSTR = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
PREDICATE = re.compile(r"^@!?U?P\w+\s+")


def demangle(name):
    try:
        return subprocess.run(["c++filt", name], capture_output=True, text=True).stdout.strip()
    except OSError:
        return name


def kernels(text):
    """(mangled name, [(address, instruction text)]) per function of cuobjdump -sass output."""
    for part in re.split(r"\n\s*Function : ", text)[1:]:
        name, body = part.split("\n", 1)
        yield name.strip(), [(int(m.group(1), 16), m.group(2)) for m in map(INSTR.match, body.split("\n")) if m]


def opcode(instruction):
    return PREDICATE.sub("", instruction).split()[0]


def histogram(instructions, top):
    counts = collections.Counter(opcode(t) for _, t in instructions)
    return ", ".join(f"{op} {n}" for op, n in counts.most_common(top))


def loops(instructions):
    """(start, end) of each backward branch: BRA to an address before it."""
    found = []
    for address, text in instructions:
        if opcode(text).startswith("BRA"):
            target = re.search(r"0x([0-9a-f]+)", text)
            if target and int(target.group(1), 16) < address:
                found.append((int(target.group(1), 16), address))
    return sorted(found)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sass")
    ap.add_argument("pattern")
    ap.add_argument("--loops", action="store_true", help="count each loop body instead")
    ap.add_argument("--top", type=int, default=30, help="opcodes listed per line")
    args = ap.parse_args()
    with open(args.sass) as f:
        text = f.read()
    shown = 0
    for name, instructions in kernels(text):
        if args.pattern not in name:
            continue
        shown += 1
        print(f"{demangle(name)}: {len(instructions)} instructions")
        if not args.loops:
            print("  " + histogram(instructions, args.top))
            continue
        for start, end in loops(instructions):
            body = [(a, t) for a, t in instructions if start <= a <= end]
            print(f"  loop {start:#x}..{end:#x}: {len(body)} instructions")
            print("    " + histogram(body, args.top))
    if shown == 0:
        sys.exit(f"sass_counts: no kernel name contains {args.pattern!r}")


if __name__ == "__main__":
    main()
