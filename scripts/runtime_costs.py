#!/usr/bin/env python3
"""Writes codegen/runtime_costs.c: what each runtime function costs on a
Cortex-M4F, for `fxcc compile --report` on the firmware targets.

The runtime (runtime/*.c) is compiled as examples/firmware builds it
(arm-none-eabi-gcc -O2 -mcpu=cortex-m4 -mthumb -mfpu=fpv4-sp-d16
-mfloat-abi=hard -std=c99 -ffunction-sections), twice: as --target cortex-m
writes its fxrt_config.h (FXRT_SMALL_KERNELS=1; every activation, an upper
bound) and as --target portable (the default config).  For every function:

  - its code bytes, from `arm-none-eabi-nm -S` (one section per function);
  - its own stack frame, from GCC's -fcallgraph-info=su ("N bytes (static)";
    GCC marks a frame that varies at run time "dynamic", none does here);
  - the functions it calls, from the same call graph.

Library functions the runtime calls (libgcc's __aeabi_*, newlib's memcpy,
expf, ...) have no call graph here: each one is linked alone into an empty
image and the linker's map says which archive members it pulls in, with
their flash and RAM (newlib's reentrancy struct that errno brings, 1 KiB);
the table lists a library function as calling its members, so that fxcc
counts a member shared by several (libgcc's double routines live in one)
once.  A library function's stack is a fixed guess noted in the table.

fxcc sums, over the functions the generated code can reach from the kernels
it calls, the code bytes (each once), and for the stack the deepest chain of
frames.  tests/firmware_qemu.sh compares both with the image the example
builds; rerun this script when the runtime changes:

usage: scripts/runtime_costs.py [OUT.c]   (default codegen/runtime_costs.c)
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CROSS = "arm-none-eabi-"
ARCH = ["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"]
CFLAGS = ARCH + ["-std=c99", "-O2", "-ffunction-sections", "-fdata-sections"]
# A library function's stack: these are leaf or nearly leaf routines in
# libgcc and newlib; 64 bytes covers the float ones' spills.
LIBRARY_STACK = 64

CONFIGS = {
    # name in the table: extra flags
    "small": ["-DFXRT_SMALL_KERNELS=1"],
    "portable": [],
}


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def compile_config(flags, work):
    """{qualified name: (code, stack, [callees])}, externals called."""
    sources = sorted(f for f in os.listdir(os.path.join(ROOT, "runtime")) if f.endswith(".c"))
    functions, externals = {}, set()
    for src in sources:
        obj = os.path.join(work, src + ".o")
        run([CROSS + "gcc", *CFLAGS, *flags, "-fcallgraph-info=su", "-I", os.path.join(ROOT, "runtime"),
             "-c", os.path.join(ROOT, "runtime", src), "-o", obj], cwd=work)
        ci = open(os.path.join(work, src + ".ci")).read()
        sizes = {}
        for line in run([CROSS + "nm", "-S", obj]).splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[2] in "tT":
                sizes[parts[3]] = int(parts[1], 16)
        def key(title):
            # "PATH/file.c:name" for a static function, "name" otherwise.
            if ":" in title:
                path, name = title.rsplit(":", 1)
                return f"{os.path.basename(path)}:{name}"
            return title
        for m in re.finditer(r'node: \{ title: "([^"]+)" label: "([^"]*)"', ci):
            title, label = m.group(1), m.group(2)
            frame = re.search(r"\\n(\d+) bytes \((static|dynamic[^)]*)\)", label)
            if not frame:
                continue  # declared here, defined elsewhere
            k = key(title)
            name = k.split(":", 1)[1] if ":" in k else k
            if name not in sizes:
                continue  # inlined everywhere, no code of its own
            functions[k] = [sizes[name], int(frame.group(1)), []]
        for m in re.finditer(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"', ci):
            s, t = key(m.group(1)), key(m.group(2))
            if s in functions and t not in functions[s][2]:
                functions[s][2].append(t)
    names = set(functions)
    for f in functions.values():
        for t in f[2]:
            if t not in names and ":" not in t:
                externals.add(t)
    return functions, externals


def library_costs(externals, work):
    """{function: [archive members]}, {member: (flash, ram)}: what linking
    each library function alone pulls in, from the linker's map, member by
    member, so that fxcc counts a member two functions share once (libgcc's
    double routines share one object, newlib's errno struct serves all)."""
    ld = os.path.join(ROOT, "examples", "firmware", "mps2_an386.ld")
    functions, members = {}, {}
    for symbol in sorted(externals):
        src = os.path.join(work, "probe.c")
        with open(src, "w") as f:
            f.write(f"extern char {symbol}[];\n")
            f.write(f"void *const probe_table[] = {{{symbol}}};\n")
            f.write("void fw_reset(void) { for (;;) (void)*(void *volatile const *)probe_table; }\n")
        elf, map_path = os.path.join(work, "probe.elf"), os.path.join(work, "probe.map")
        run([CROSS + "gcc", *ARCH, "-O2", "-fno-builtin", "-nostartfiles", "-T", ld,
             "-Wl,--gc-sections", "-Wl,--defsym=FW_STACK_BYTES=0", "-Wl,--defsym=fw_systick=0",
             "-Wl,--defsym=fw_fault=0", f"-Wl,-Map={map_path}", "-o", elf, src, "-lm"], cwd=work)
        text = open(map_path).read()
        text = text[text.index("Linker script and memory map"):]
        out_section, pending, pulled = None, None, {}
        for line in text.splitlines():
            m = re.match(r"^(\.\S+)\s+0x[0-9a-f]+\s+0x[0-9a-f]+", line) or re.match(r"^(\.\S+)\s*$", line)
            if m:
                out_section = m.group(1)
                continue
            m = re.match(r"^ (\S+)?\s+0x[0-9a-f]+\s+0x([0-9a-f]+) (\S+)$", line)
            if not m:
                pending = line.strip() if re.match(r"^ \.\S+$", line) else None
                continue
            member = re.search(r"lib[^/]*\.a\([^)]*\)$", m.group(3))
            if not member:
                continue
            size = int(m.group(2), 16)
            flash = size if out_section in (".text", ".ARM.exidx", ".data") else 0
            ram = size if out_section in (".data", ".bss") else 0
            f0, r0 = pulled.get(member.group(0), (0, 0))
            pulled[member.group(0)] = (f0 + flash, r0 + ram)
        functions[symbol] = sorted(pulled)
        for k, (flash, ram) in pulled.items():
            f0, r0 = members.get(k, (0, 0))
            members[k] = (max(f0, flash), max(r0, ram))
    return functions, members


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "codegen", "runtime_costs.c")
    version = run([CROSS + "gcc", "--version"]).splitlines()[0]
    rows = {}
    with tempfile.TemporaryDirectory() as work:
        externals = set()
        for config, flags in CONFIGS.items():
            functions, ext = compile_config(flags, work)
            rows[config] = functions
            externals |= ext
        library = library_costs(externals, work)
    lines = [
        "/*",
        " * runtime_costs.c - written by scripts/runtime_costs.py; do not edit.",
        " *",
        f" * The runtime's functions on a Cortex-M4F ({version},",
        " * " + " ".join(CFLAGS) + "):",
        " * code bytes, RAM (0), own stack frame (-fcallgraph-info=su) and callees, for",
        " * the small kernels (--target cortex-m) and the portable ones; then the library",
        " * functions they call, as the flash and RAM each adds to an empty image and a stack",
        f" * guess of {LIBRARY_STACK} bytes.  Rerun the script when the runtime changes;",
        " * tests/firmware_qemu.sh checks --report against the built example.",
        " */",
        '#include "codegen.h"',
        "",
    ]
    for config, functions in rows.items():
        names = sorted(functions)
        callees = []
        lines.append(f"static const CgCostFunction {config}_functions[] = {{")
        for n in names:
            code, stack, calls = functions[n]
            first = len(callees)
            callees += sorted(calls)
            lines.append(f'    {{"{n}", {code}, 0, {stack}, {first}, {len(calls)}}},')
        lines.append("};")
        lines.append(f"static const char *const {config}_callees[] = {{")
        for i in range(0, len(callees), 4):
            lines.append("    " + " ".join(f'"{c}",' for c in callees[i:i + 4]))
        if not callees:
            lines.append("    NULL,")
        lines.append("};")
        lines.append("")
    # The library: each function (its stack a guess, no code of its own)
    # calling the archive members it pulls in, then the members.
    library_functions, members = library
    entries = [(f, 0, 0, LIBRARY_STACK, [f"member:{m}" for m in ms])
               for f, ms in library_functions.items()]
    entries += [(f"member:{m}", flash, ram, 0, []) for m, (flash, ram) in members.items()]
    entries.sort()
    lib_callees = []
    lines.append("static const CgCostFunction library_functions[] = {")
    for name, flash, ram, stack, calls in entries:
        lines.append(f'    {{"{name}", {flash}, {ram}, {stack}, {len(lib_callees)}, {len(calls)}}},')
        lib_callees += calls
    lines.append("};")
    lines.append("static const char *const library_callees[] = {")
    for c in lib_callees:
        lines.append(f'    "{c}",')
    lines.append("};")
    lines.append("")
    for config in rows:
        lines.append(f"const CgCostTable cg_costs_{config} = {{")
        lines.append(f"    {config}_functions, (int)(sizeof {config}_functions / sizeof {config}_functions[0]),")
        lines.append(f"    {config}_callees,")
        lines.append("    library_functions, (int)(sizeof library_functions / sizeof library_functions[0]),")
        lines.append("    library_callees};")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {out}: " + ", ".join(f"{c} {len(r)} functions" for c, r in rows.items())
          + f", {len(library[0])} library functions, {len(library[1])} archive members")


if __name__ == "__main__":
    main()
