// The shapes of the on-device tuning benchmark (emit-compute.ts tune): per-rank GEMMs OFF the tuned
// tables (which hold MLP-1…6 at worlds 2, 4, 8): other model widths (hidden 5120 / 6144 / 7168,
// intermediate 13824 / 18944 / 24576 / 25600), worlds 3, 5 and 6, and ragged rows per rank — each as
// the torch API keys it (AllGather+GEMM: M = world × rows per rank; GEMM+ReduceScatter: each rank's
// slab padded to whole 128-row blocks, as `matmul_reduce_scatter` pads it) — plus suite shapes as a
// control, where the table's pick was measured at the very shape.
import type { ComputeShape } from "./compute-shapes.js";

/** One benchmark shape: a per-rank GEMM, and whether it is a control (a suite shape, on the table). */
export interface TuneShape extends Omit<ComputeShape, "mlp"> {
  readonly control: boolean;
  /** Rows each rank holds, as the caller passes them (before GEMM+RS's padding). */
  readonly rowsPerRank: number;
  /** The model layer it comes from, for people: `hidden 5120, intermediate 13824`. */
  readonly layer: string;
}

/** The torch API's row padding of GEMM+ReduceScatter (`RS_ROW_BLOCK`): each rank's slab to whole 128-row blocks. */
const RS_ROW_BLOCK = 128;

function ag(hidden: number, inter: number, world: number, rows: number, control = false): TuneShape {
  if (inter % world !== 0) throw new Error(`intermediate ${inter} does not split over ${world} ranks`);
  const tag = `ag_h${hidden}_i${inter}_w${world}_r${rows}`;
  return {
    name: tag,
    op: "ag-gemm",
    role: "consumer",
    world,
    M: world * rows,
    N: inter / world,
    K: hidden,
    control,
    rowsPerRank: rows,
    layer: `hidden ${hidden}, intermediate ${inter}`,
  };
}

function rs(hidden: number, inter: number, world: number, rows: number, control = false): TuneShape {
  if (inter % world !== 0) throw new Error(`intermediate ${inter} does not split over ${world} ranks`);
  const padded = Math.ceil(rows / RS_ROW_BLOCK) * RS_ROW_BLOCK;
  const tag = `rs_h${hidden}_i${inter}_w${world}_r${rows}`;
  return {
    name: tag,
    op: "gemm-rs",
    role: "producer",
    world,
    M: world * padded,
    N: hidden,
    K: inter / world,
    control,
    rowsPerRank: rows,
    layer: `hidden ${hidden}, intermediate ${inter}`,
  };
}

/** Twelve shapes off the tables (six consumers, six producers) and three suite shapes as controls. */
export function tuneShapes(): TuneShape[] {
  return [
    ag(5120, 13824, 3, 2731),
    ag(7168, 18944, 8, 1024),
    ag(5120, 25600, 5, 1638),
    ag(6144, 24576, 6, 1000),
    ag(7168, 18944, 4, 4091),
    ag(5120, 13824, 6, 2048),
    rs(5120, 13824, 3, 2731),
    rs(7168, 18944, 8, 1024),
    rs(5120, 25600, 5, 1638),
    rs(6144, 24576, 6, 1000),
    rs(7168, 18944, 4, 4091),
    rs(5120, 13824, 6, 2048),
    // Controls: MLP-1 and MLP-5 AllGather+GEMM, MLP-2 GEMM+RS, at their suite shapes.
    ag(4096, 11008, 8, 1024, true),
    ag(8192, 28672, 4, 2048, true),
    rs(4096, 14336, 4, 2048, true),
  ];
}

/** Shapes from a JSON file: an array of `{ op: "ag-gemm" | "gemm-rs", hidden, intermediate, world, rowsPerRank, control? }`. */
export function shapesFromJson(data: unknown): TuneShape[] {
  if (!Array.isArray(data)) throw new Error("a shapes file is a JSON array");
  return data.map((d: Record<string, unknown>, i) => {
    const n = (k: string) => {
      const v = d[k];
      if (!Number.isSafeInteger(v) || (v as number) < 1) throw new Error(`shape ${i}: ${k} must be a positive integer`);
      return v as number;
    };
    const make = d.op === "ag-gemm" ? ag : d.op === "gemm-rs" ? rs : undefined;
    if (make === undefined) throw new Error(`shape ${i}: op must be ag-gemm or gemm-rs`);
    return make(n("hidden"), n("intermediate"), n("world"), n("rowsPerRank"), d.control === true);
  });
}
