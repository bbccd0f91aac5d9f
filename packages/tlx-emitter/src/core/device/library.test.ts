import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { runPython } from "../../testing/python.js";
import { DEVICE_FUNCTIONS } from "./library.js";

/** The module every emitted kernel imports its primitives from (the runner's `ovl_runtime.language`). */
function library(): string {
  return readFileSync(new URL("../../../../runtime-py/src/ovl_runtime/language.py", import.meta.url), "utf8");
}

/**
 * Runs the device definitions of the runner's module (not the interpreter's) in plain Python
 * against a model of the GPU: `triton.jit` is
 * the identity, inline asm reads a flat int32 memory (acquire loads), a clock that ticks
 * 1 ns per read (`%globaltimer`), or passes the value through (the token move); atomics
 * and barriers are logged. Values are int32 with wrap-around, as on the device.
 */
const HARNESS = `
import json, sys, types
def i32(x):
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= (1 << 31) else x
class I32(int):
    def __sub__(self, o): return I32(i32(int(self) - int(o)))
    def to(self, *a, **k): return int(self)
mem, log, clock, hooks = {}, [], [0], {}
def asm(code, constraints, args, dtype=None, is_pure=None, pack=None):
    if "acquire" in code:
        reads = log.count(("read", args[0])) + 1
        log.append(("read", args[0]))
        if (args[0], reads) in hooks: mem[args[0]] = hooks[(args[0], reads)]
        return I32(i32(mem.get(args[0], 0)))
    if "globaltimer" in code:
        clock[0] += 1
        return clock[0]
    # A statement may wait for this thread's bulk stores and then be a barrier of the program.
    events = sorted((code.find(k), e) for k, e in (("cp.async.bulk.wait_group", "bulk-wait"), ("bar.sync", "barrier")) if k in code)
    if events:
        log.extend((e,) for _, e in events)
        return 0
    return args[0]
def atomic_xchg(p, v): mem[p] = int(v); log.append(("xchg", p, int(v)))
def atomic_add(p, v, mask=None, sem=None, scope=None):
    if mask is None or mask: mem[p] = i32(mem.get(p, 0) + v); log.append(("add", p, v, sem, scope))
tl = types.SimpleNamespace(inline_asm_elementwise=asm, atomic_xchg=atomic_xchg, atomic_add=atomic_add,
    debug_barrier=lambda: log.append(("barrier",)), load=lambda p: I32(mem.get(p, 0)), store=None,
    pointer_type=lambda t: t, int32="i32", int64="i64", bfloat16="bf16", constexpr=type("constexpr", (), {}))
triton = types.ModuleType("triton"); triton.jit = lambda f: f
language = types.ModuleType("triton.language"); language.__dict__.update(vars(tl)); triton.language = language
sys.modules["triton"], sys.modules["triton.language"] = triton, language
import os
os.environ.pop("TRITON_INTERPRET", None)
ns = {"__name__": "ovl_language_model"}
src = sys.stdin.read().replace("from __future__ import annotations", "")
exec(src, ns)
assert not ns["INTERPRET"]
SIG, ERR = 0, 1000
def case(name, sig, target, timeout, hook=None):
    mem.clear(); log.clear(); hooks.clear(); clock[0] = 0
    mem[SIG + 3] = sig
    if hook: hooks[(SIG + 3, hook[0])] = hook[1]
    got = ns["wait_slot"](SIG, 3, I32(i32(target)), ERR, 5, timeout)
    return {"name": name, "got": int(got), "reads": log.count(("read", SIG + 3)), "err": [mem.get(ERR + i, 0) for i in range(5)]}
out = [
    case("ready", 7, 7, 100),
    case("past", 9, 7, 100),
    case("arrives", 6, 7, 100, hook=(4, 7)),
    case("timeout", 6, 7, 50),
    case("wrapped", i32(2**31 + 1), 2**31 - 1, 100),
    case("not-yet-wrapped", 2**31 - 3, i32(2**31 + 1), 20),
]
mem.clear(); log.clear()
ns["notify_slot"](SIG, 2)
out.append({"name": "notify", "log": [list(map(str, e)) for e in log], "value": mem[SIG + 2]})
mem.clear(); log.clear()
ns["notify_slot"](SIG, 2, False)
out.append({"name": "notify-masked", "log": [list(map(str, e)) for e in log], "value": mem.get(SIG + 2, 0)})
mem.clear(); log.clear()
ns["notify_slot_gpu"](SIG, 2)
out.append({"name": "notify-gpu", "log": [list(map(str, e)) for e in log], "value": mem[SIG + 2]})
mem.clear(); log.clear(); mem[2000 + 1] = 500
ns["peer_notify"](2000, 1, 4)
out.append({"name": "peer_notify", "log": [list(map(str, e)) for e in log], "value": mem[504]})
mem.clear(); log.clear(); mem[2000 + 1] = 500
ns["peer_notify"](2000, 1, 4, 3)
out.append({"name": "peer_notify-count", "log": [list(map(str, e)) for e in log], "value": mem[504]})
print(json.dumps(out))
`;

describe("device primitive library (ovl_runtime.language)", () => {
  it("defines every primitive the emitters import, each a @triton.jit function, under the names both sides list", () => {
    const text = library();
    for (const f of DEVICE_FUNCTIONS) expect(text).toMatch(new RegExp(`@triton\\.jit\\n\\s*def ${f}\\(`));
    const listed = /DEVICE_FUNCTIONS = \(([^)]*)\)/.exec(text)?.[1] ?? "";
    expect([...listed.matchAll(/"(\w+)"/g)].map((m) => m[1])).toEqual([...DEVICE_FUNCTIONS]);
  });

  it("waits wrap-aware and bounded, records timeouts, and notifies with release after a barrier", () => {
    const results = JSON.parse(runPython(HARNESS, library())) as Record<string, unknown>[];
    const byName = Object.fromEntries(results.map((r) => [r.name as string, r]));
    const noError = [0, 0, 0, 0, 0];
    expect(byName.ready).toEqual({ name: "ready", got: 7, reads: 1, err: noError });
    expect(byName.past).toMatchObject({ got: 9, reads: 1, err: noError });
    // The 4th read sees the arrival; no error.
    expect(byName.arrives).toMatchObject({ got: 7, reads: 4, err: noError });
    // Bounded: gives up after the timeout, records (1, rank, slot, seen, expected).
    expect(byName.timeout).toMatchObject({ got: 7, err: [1, 5, 3, 6, 7] });
    expect(byName.timeout!.reads as number).toBeGreaterThan(10);
    // The counter wrapped past 2^31 - 1: still reached (int32 difference 2).
    expect(byName.wrapped).toMatchObject({ reads: 1, err: noError });
    // Target past the wrap, value below it: not reached, times out.
    expect(byName["not-yet-wrapped"]).toMatchObject({ err: [1, 5, 3, 2 ** 31 - 3, -(2 ** 31) + 1] });
    // A notify first waits for this thread's TMA stores, then a barrier, then the release add.
    expect(byName.notify).toEqual({ name: "notify", log: [["bulk-wait"], ["barrier"], ["add", "2", "1", "release", "sys"]], value: 1 });
    // Masked off (a tile that notifies nothing): the wait and the barrier, no add.
    expect(byName["notify-masked"]).toEqual({ name: "notify-masked", log: [["bulk-wait"], ["barrier"]], value: 0 });
    // Where only this device's kernels wait on the slot, the same at gpu scope.
    expect(byName["notify-gpu"]).toMatchObject({ log: [["bulk-wait"], ["barrier"], ["add", "2", "1", "release", "gpu"]], value: 1 });
    expect(byName.peer_notify).toEqual({
      name: "peer_notify",
      log: [["bulk-wait"], ["barrier"], ["add", "504", "1", "release", "sys"]],
      value: 1,
    });
    // Several notifies summed into one release add (a kernel that counts its tiles and notifies once).
    expect(byName["peer_notify-count"]).toMatchObject({
      log: [["bulk-wait"], ["barrier"], ["add", "504", "3", "release", "sys"]],
      value: 3,
    });
  });
});
