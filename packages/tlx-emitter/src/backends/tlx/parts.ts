// The composable TLX kernel (TLX §4.1, MIMW): a kernel is a compute part (ring buffers,
// producer loads, replicated wgmma consumers, epilogue), communication parts (waits before
// a tile's loads, an optional communication task) and a schedule (the tile loop every task
// runs). `tlxKernel` assembles them into one `@triton.jit` module; any part can be replaced.
import type { ElementType } from "../../core/device/index.js";
import { kernelModule } from "../triton/kernels/common.js";
import type { KernelTemplateInfo } from "../triton/kernels/index.js";
import { EmitError, type PythonWriter } from "../../core/writer/index.js";
import { TLX_DEVICE_FUNCTIONS, writeTlxLibrary } from "./library.js";

/** Parameters a part adds to the kernel: runtime arguments (in order) and constexprs with values. */
export interface TlxPartParams {
  /** Runtime argument names, in launch order. */
  readonly args: readonly string[];
  /** `tl.constexpr` parameters and their values. */
  readonly constexprs: Readonly<Record<string, number>>;
  /** Regular expressions the compiled PTX must match (what the part is for), used by the AOT check. */
  readonly expect: readonly string[];
}

/**
 * The tile order every task walks. `writeTileLoop` opens the loop and defines `pid_m`,
 * `pid_n` (and may read its own arguments) before calling `body`; producer and consumers
 * run the same loop, so they agree on which tile each ring slot holds.
 */
export interface TlxSchedulePart extends TlxPartParams {
  readonly name: string;
  /**
   * How the grid is launched: `persistent` (default; at most one program per SM, each
   * striding over tile ids) or `per-tile` (one program per tile; programs that start
   * early take the tiles of programs not yet launched, e.g. by cluster launch control).
   */
  readonly launch?: "persistent" | "per-tile";
  /** The only target the schedule compiles for (cluster launch control needs `sm_100a`). */
  readonly target?: "sm_100a";
  /** CTAs per cluster along M the loop hands tiles to together (default 1; must match the compute part's). */
  readonly clusterM?: number;
  /**
   * A condition, inside the tile loop, true at the program's last two tiles (undefined where the loop
   * cannot tell, e.g. tiles fetched at run time): notifiers that defer a tile's notify to the next
   * tile notify those at once instead, so the chunks of the last two waves are not both held until the
   * kernel ends.
   */
  readonly lastTiles?: string;
  /** Kernel-scope setup after the compute part's, given the number of tasks that walk the loop. */
  writeSetup?(w: PythonWriter, tasks: number): void;
  /**
   * `role.issuer`: this task fetches the next tile for all of them (exactly one task of a
   * kernel is the issuer; schedules that need no fetch ignore it).
   */
  writeTileLoop(w: PythonWriter, body: (w: PythonWriter) => void, role?: TlxLoopRole): void;
}

/** What a task is to the tile loop it walks. */
export interface TlxLoopRole {
  readonly issuer: boolean;
}

/**
 * The compute of a tile. `writeSetup` allocates ring buffers and mbarriers at kernel scope
 * (`local_alloc`, `alloc_barriers`); `writeProducerTile` issues the TMA loads of the tile
 * at rows `offs_am` (ring position `it`, advanced by the part); `writeConsumerTile` runs
 * in each of `consumers` replicas (`cid`) and ends with the epilogue.
 */
export interface TlxComputePart extends TlxPartParams {
  readonly name: string;
  /** Number of replicated consumer warp groups (`replicate=`). */
  readonly consumers: number;
  /**
   * CTAs per cluster along M (default 1). 2: the kernel is compiled for 2×1 clusters and the
   * schedule must walk tiles in pairs (`TlxSchedulePart.clusterM`).
   */
  readonly clusterM?: number;
  /** Registers per thread of a consumer warp group (`registers=`, a multiple of 8). */
  readonly consumerRegisters: number;
  /** Element type of A, B and C. */
  readonly dtype: ElementType;
  /** fp32 accumulator registers per consumer thread (tile elements of one consumer / 128). */
  readonly accumulatorRegisters: number;
  writeSetup(w: PythonWriter): void;
  writeProducerTile(w: PythonWriter): void;
  /** In the producer after its tile loop and the communication parts' exits (e.g. a cluster's drain). */
  writeProducerExit?(w: PythonWriter): void;
  /** Consumer-task setup before its tile loop (after `it = 0`), e.g. the ping-pong turn. */
  writeConsumerInit?(w: PythonWriter): void;
  /** How the consumers that store one tile sync (what a tile-done notify needs). */
  readonly epilogueSync: EpilogueSync;
  /**
   * A tile's wgmma chain and epilogue in each consumer; `afterStores` (when given) is written
   * right after the tile's epilogue stores, in the branch that made them.
   */
  writeConsumerTile(w: PythonWriter, afterStores?: (w: PythonWriter) => void): void;
  /** In each consumer after its tile loop and the communication parts' exits (e.g. waits for its last stores). */
  writeConsumerExit?(w: PythonWriter): void;
}

/**
 * The threads that store one tile: named barrier `barrier` (an expression) over `threads`
 * threads syncs them, `leader` (a constexpr expression) is true in the one warp group that
 * speaks for the tile (e.g. notifies it once), and each tile's epilogue commits
 * `storeGroups` bulk-store groups (one per TMA store) in every consumer thread.
 */
export interface EpilogueSync {
  readonly barrier: string;
  readonly threads: number;
  readonly leader: string;
  readonly storeGroups: number;
  /** The schedule's `lastTiles`, where it has one (set by `tlxKernel`). */
  readonly lastTiles?: string;
}

/** A task of its own (its warps and register budget), e.g. the communication task. */
export interface TlxTask {
  readonly numWarps: number;
  readonly registers: number;
  write(w: PythonWriter): void;
}

/**
 * Communication fused into the kernel. `writeBeforeLoads` runs in the producer before a
 * tile's loads (a chunk wait: TileLink's consumer_tile_wait); it may rebind `offs_am` to
 * thread the wait's token into the loads. `task` is an extra warp group (e.g. pushes of
 * this rank's chunks to peers and remote notifies: "arrive remote, wait local").
 */
export interface TlxCommPart extends TlxPartParams {
  readonly name: string;
  /** Kernel-scope setup after the compute part's (e.g. mbarriers the tasks share), given how tiles are stored. */
  writeSetup?(w: PythonWriter, sync: EpilogueSync): void;
  writeBeforeLoads?(w: PythonWriter): void;
  /** In the producer after a tile's loads are issued (it then waits for ring slots anyway). */
  writeAfterLoads?(w: PythonWriter): void;
  /** In the producer before its tile loop. */
  writeProducerInit?(w: PythonWriter): void;
  /** In the producer after its tile loop (e.g. the notifies it still owes). */
  writeProducerExit?(w: PythonWriter): void;
  /** In each consumer before its tile loop (after the compute part's own setup), given how tiles are stored. */
  writeConsumerInit?(w: PythonWriter, sync: EpilogueSync): void;
  /** In the consumers, after a tile's epilogue stores (a tile-done notify: TileLink's producer_tile_notify). */
  writeAfterStores?(w: PythonWriter, sync: EpilogueSync): void;
  /** In each consumer after its tile loop (e.g. the last deferred notify). */
  writeConsumerExit?(w: PythonWriter, sync: EpilogueSync): void;
  readonly task?: TlxTask;
}

/** What `tlxKernel` is built from. */
export interface TlxKernelSpec {
  /** The manifest's `template.kind` (kebab-case). */
  readonly kind: string;
  /** Name of the `@triton.jit` entry. */
  readonly entry: string;
  /** One line on what the kernel computes (the module docstring). */
  readonly summary: string;
  readonly compute: TlxComputePart;
  readonly comm?: TlxCommPart | readonly TlxCommPart[];
  readonly schedule: TlxSchedulePart;
  /** Warps of the default (producer) task: the compile option `num_warps` (default 4). */
  readonly producerWarps?: number;
}

/** An assembled TLX kernel: the template description the manifest follows, its source, and the AOT expectations. */
export interface TlxKernel {
  readonly info: KernelTemplateInfo;
  readonly constexprs: Readonly<Record<string, number>>;
  readonly source: string;
  /** `num_warps` to compile with (the default task's warps). */
  readonly numWarps: number;
  /** Warps launched in total (default task + every other task), as the compiled metadata reports. */
  readonly totalWarps: number;
  /** The cluster shape it is compiled for (`[clusterM, 1, 1]`), absent without clusters. */
  readonly cluster?: readonly [number, number, number];
  /** PTX patterns every part expects. */
  readonly expect: readonly string[];
}

function commParts(comm: TlxKernelSpec["comm"]): readonly TlxCommPart[] {
  if (comm === undefined) return [];
  return Array.isArray(comm) ? (comm as readonly TlxCommPart[]) : [comm as TlxCommPart];
}

/**
 * Merge the parts' arguments (first occurrence wins the position; the same name in two
 * parts is one argument) and constexprs (the same name must carry the same value).
 * @throws {EmitError} `bad-param` when two parts give one constexpr different values.
 */
export function mergeParams(parts: readonly TlxPartParams[]): TlxPartParams {
  const args: string[] = [];
  const constexprs: Record<string, number> = {};
  const expect: string[] = [];
  for (const p of parts) {
    for (const a of p.args) if (!args.includes(a)) args.push(a);
    for (const [k, v] of Object.entries(p.constexprs)) {
      if (constexprs[k] !== undefined && constexprs[k] !== v) {
        throw new EmitError(
          "bad-param",
          `constexpr ${k} is ${constexprs[k]} in one part and ${v} in another; give the parts the same value`,
        );
      }
      constexprs[k] = v;
    }
    for (const e of p.expect) if (!expect.includes(e)) expect.push(e);
  }
  for (const a of args) {
    if (constexprs[a] !== undefined) throw new EmitError("bad-param", `${a} is both an argument and a constexpr of the kernel`);
  }
  return { args, constexprs, expect };
}

/**
 * Assemble a warp-specialised kernel: kernel-scope setup of the compute part, then
 * `with tlx.async_tasks():` holding the producer (`async_task("default")`: the schedule's
 * tile loop, each tile's communication waits, then its TMA loads), the `replicate`d
 * consumers (`async_task(num_warps=4, replicate=consumers, registers=...)`: wgmma and the
 * epilogue) and each communication task.
 * @throws {EmitError} `bad-param` on conflicting parts or register budgets.
 */
/**
 * A TLX kernel module: the docstring (`summary`, and what emitted it: `how`), the imports —
 * the device primitives the kernel calls from `ovl_runtime.language`, shipped with the
 * runner, as every emitted kernel imports them — the TLX-only device functions it calls,
 * then the kernel that `kernel` writes (from its `@triton.jit` line). `dtype` is checked.
 */
export function tlxModule(summary: string, how: string, dtype: ElementType, kernel: (w: PythonWriter) => void): string {
  return kernelModule(summary, dtype, kernel, {
    how,
    imports: ["import triton.language.extra.tlx as tlx"],
    prelude: (w, text) => {
      const used = TLX_DEVICE_FUNCTIONS.filter((f) => new RegExp(`(^|[^A-Za-z0-9_.])${f}\\(`).test(text));
      if (used.length === 0) return;
      writeTlxLibrary(w, used);
      w.line().line();
    },
  });
}

/** The `def` line of a kernel taking `merged`'s arguments, then its constexprs. */
export function tlxSignature(entry: string, merged: TlxPartParams): string {
  const params = [...merged.args, ...Object.keys(merged.constexprs).map((c) => `${c}: tl.constexpr`)];
  return `def ${entry}(${params.join(", ")})`;
}

export function tlxKernel(spec: TlxKernelSpec): TlxKernel {
  const comms = commParts(spec.comm);
  if (spec.schedule.target !== undefined) {
    throw new EmitError(
      "bad-param",
      `schedule ${spec.schedule.name} compiles only for ${spec.schedule.target}; the Hopper kernel is sm_90a: use tlxBlackwellKernel`,
    );
  }
  const clusterM = spec.compute.clusterM ?? 1;
  if ((spec.schedule.clusterM ?? 1) !== clusterM) {
    throw new EmitError(
      "bad-param",
      `compute part ${spec.compute.name} runs clusters of ${clusterM} CTA(s) along M but schedule ${spec.schedule.name} hands out tiles to ${spec.schedule.clusterM ?? 1}`,
    );
  }
  const merged = mergeParams([spec.compute, ...comms, spec.schedule]);
  if (merged.constexprs.BLOCK_M === undefined)
    throw new EmitError("bad-param", `compute part ${spec.compute.name} must define the constexpr BLOCK_M (rows of a tile)`);
  const producerWarps = spec.producerWarps ?? 4;
  if (![1, 2, 4].includes(producerWarps)) throw new EmitError("bad-param", `producerWarps must be 1, 2 or 4, got ${producerWarps}`);
  const tasks = comms.flatMap((c) => (c.task === undefined ? [] : [c.task]));
  for (const t of [{ numWarps: 4, registers: spec.compute.consumerRegisters }, ...tasks]) {
    if (!Number.isInteger(t.registers) || t.registers % 8 !== 0 || t.registers < 24 || t.registers > 256) {
      throw new EmitError("bad-param", `a task's register budget must be a multiple of 8 in [24, 256], got ${t.registers}`);
    }
  }
  // setmaxnreg redistributes one register file (64K 32-bit registers per SM on Hopper):
  // the budgets of the other tasks must leave the producer at least 24 per thread.
  const used = spec.compute.consumers * 128 * spec.compute.consumerRegisters + tasks.reduce((s, t) => s + t.numWarps * 32 * t.registers, 0);
  if (used + producerWarps * 32 * 24 > 65536) {
    throw new EmitError(
      "bad-param",
      `register budgets use ${used} of 65536 registers and leave the producer fewer than 24 per thread; lower consumerRegisters or the communication task's registers`,
    );
  }
  // ptxas compiles every task under the launch cap (64K registers over all threads), before
  // setmaxnreg hands consumers more: a consumer's fp32 accumulator must fit under that cap.
  const totalWarps = producerWarps + spec.compute.consumers * 4 + tasks.reduce((s, t) => s + t.numWarps, 0);
  const cap = Math.min(255, Math.floor(65536 / (totalWarps * 32) / 8) * 8);
  const need = spec.compute.accumulatorRegisters + 24;
  if (need > cap) {
    throw new EmitError(
      "bad-param",
      `with ${totalWarps} warps ptxas caps a thread at ${cap} registers, but a consumer's accumulator needs ${spec.compute.accumulatorRegisters} (+24): use a narrower tile (BLOCK_N) or more consumers`,
    );
  }
  const info: KernelTemplateInfo = { kind: spec.kind, entry: spec.entry, args: merged.args, constexprs: Object.keys(merged.constexprs) };
  const source = tlxModule(spec.summary, "TLX, warp-specialised", spec.compute.dtype, (w) =>
    w.block(tlxSignature(spec.entry, merged), (b) => {
      spec.compute.writeSetup(b);
      for (const x of comms) x.writeSetup?.(b, spec.compute.epilogueSync);
      b.block("with tlx.async_tasks()", (t) => {
        t.block(`with tlx.async_task("default")`, (p) => {
          p.comment("Producer: per tile, the communication waits, then TMA loads into the ring.");
          p.line("it = 0");
          for (const x of comms) x.writeProducerInit?.(p);
          spec.schedule.writeTileLoop(p, (l) => {
            l.line("offs_am = pid_m * BLOCK_M");
            for (const c of comms) c.writeBeforeLoads?.(l);
            spec.compute.writeProducerTile(l);
            for (const c of comms) c.writeAfterLoads?.(l);
          });
          for (const x of comms) x.writeProducerExit?.(p);
          spec.compute.writeProducerExit?.(p);
        });
        t.block(
          `with tlx.async_task(num_warps=4, replicate=${spec.compute.consumers}, registers=${spec.compute.consumerRegisters})`,
          (c) => {
            c.comment("Consumers: wgmma on the ring slots, then the epilogue.");
            c.line("cid: tl.constexpr = tlx.async_task_replica_id()");
            c.line("it = 0");
            spec.compute.writeConsumerInit?.(c);
            const lastTiles = spec.schedule.lastTiles;
            const sync: EpilogueSync = { ...spec.compute.epilogueSync, ...(lastTiles === undefined ? {} : { lastTiles }) };
            for (const x of comms) x.writeConsumerInit?.(c, sync);
            const after = comms.filter((x) => x.writeAfterStores !== undefined);
            spec.schedule.writeTileLoop(c, (l) => {
              l.line("offs_am = pid_m * BLOCK_M");
              spec.compute.writeConsumerTile(
                l,
                after.length === 0 ? undefined : (a) => after.forEach((x) => x.writeAfterStores?.(a, sync)),
              );
            });
            for (const x of comms) x.writeConsumerExit?.(c, sync);
            spec.compute.writeConsumerExit?.(c);
          },
        );
        for (const task of tasks) {
          t.block(`with tlx.async_task(num_warps=${task.numWarps}, registers=${task.registers})`, (x) => task.write(x));
        }
      });
    }),
  );
  return {
    info,
    constexprs: merged.constexprs,
    source,
    numWarps: producerWarps,
    totalWarps,
    expect: merged.expect,
    ...(clusterM === 1 ? {} : { cluster: [clusterM, 1, 1] as const }),
  };
}
