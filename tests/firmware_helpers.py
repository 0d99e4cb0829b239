#!/usr/bin/env python3
"""The libgcc helpers a model's run can reach in a firmware image.

Walks the static call graph of an Arm ELF from `arm-none-eabi-objdump -d`:
from the entry function (NAME_run) every `bl`/`b`/`b.w`/`cbz`... to a
named symbol outside the function is an edge (tail calls included).  An
indirect call (`blx rN`) cannot be followed and is reported as a failure
unless --allow-indirect.  Fails (exit 1) when a 64-bit division, double
arithmetic or any other `__aeabi_*` / soft-float / 64-bit libgcc routine
is reachable, naming the chain of callers; memcpy/memset and their
`__aeabi_mem*` forms are the C library, not arithmetic helpers, and pass.

usage: firmware_helpers.py ELF ENTRY [--objdump arm-none-eabi-objdump]
"""
import re
import subprocess
import sys

HELPER = re.compile(
    r"^(__aeabi_(?!mem)\w+"                      # the EABI's arithmetic helpers
    r"|__(u?divmod|u?div|u?mod)[sd]i[34]"        # 64-bit division
    r"|__\w*(df|sf)[23i]\w*"                     # soft-float (double, single)
    r"|__(ashl|ashr|lshr|mul|neg|cmp|ucmp|ffs|clz|ctz|popcount)di[23]"
    r"|__(fix|float)\w*[sd]i\w*)$")


def call_graph(elf, objdump):
    text = subprocess.run([objdump, "-d", "--no-show-raw-insn", elf], check=True,
                          capture_output=True, text=True).stdout
    graph, indirect, current = {}, {}, None
    for line in text.splitlines():
        m = re.match(r"^[0-9a-f]+ <([^>]+)>:$", line)
        if m:
            current = m.group(1)
            graph.setdefault(current, set())
            continue
        if current is None:
            continue
        m = re.search(r"\t(b|bl|b\.w|b\.n|bx|blx|cbz|cbnz|b[a-z]{2}(\.[nw])?)\t.*<([^>+]+)(\+0x[0-9a-f]+)?>",
                      line)
        if m and m.group(3) != current:
            graph[current].add(m.group(3))
        elif re.search(r"\tblx\t(r\d+|ip|lr)", line):
            indirect.setdefault(current, 0)
            indirect[current] += 1
    return graph, indirect


def main():
    args = sys.argv[1:]
    allow_indirect = "--allow-indirect" in args
    args = [a for a in args if a != "--allow-indirect"]
    objdump = "arm-none-eabi-objdump"
    if "--objdump" in args:
        k = args.index("--objdump")
        objdump = args[k + 1]
        del args[k:k + 2]
    elf, entry = args
    graph, indirect = call_graph(elf, objdump)
    if entry not in graph:
        sys.exit(f"FAIL: {elf}: no function {entry}")
    parent, order, todo = {entry: None}, [], [entry]
    while todo:
        f = todo.pop()
        order.append(f)
        for g in sorted(graph.get(f, ())):
            if g not in parent:
                parent[g] = f
                todo.append(g)

    def chain(f):
        names = []
        while f is not None:
            names.append(f)
            f = parent[f]
        return " <- ".join(names)

    bad = [f for f in order if HELPER.match(f)]
    fails = [f"{chain(f)}" for f in sorted(bad)]
    if not allow_indirect:
        fails += [f"indirect call in {chain(f)}" for f in sorted(indirect) if f in parent]
    if fails:
        print(f"FAIL: {elf}: {entry} reaches {len(fails)} helpers or indirect calls:")
        for f in fails:
            print("  " + f)
        sys.exit(1)
    print(f"ok: {entry}: {len(order)} functions reachable, no libgcc arithmetic helper "
          f"(64-bit division, double, soft-float) among them")


if __name__ == "__main__":
    main()
