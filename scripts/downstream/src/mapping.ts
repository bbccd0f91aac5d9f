// @ovl/mapping README: collective maps, simplification, tables and index maps.
import {
  add,
  allGatherPull,
  coversExactlyOnce,
  dynamicMap,
  evaluate,
  evaluateMap,
  fillTable,
  floorDiv,
  lookupTable,
  MappingError,
  mapToPython,
  mod,
  mul,
  rankMapConsistent,
  rowSharding,
  simplify,
  sub,
  toPython,
  variable,
} from "@ovl/mapping";
import { holds, same } from "./check.js";

const ag = allGatherPull({ rows: 1024, cols: 512, worldSize: 4, tileRows: 64, channelsPerRank: 2 });
same(mapToPython(ag.shape.ranges[0]!.start), "64 * tile", "f_S");
same(mapToPython(ag.rank.rank), "tile // 4", "f_R");
same(mapToPython(ag.channel.channel), "tile // 2", "f_C");
same(coversExactlyOnce(ag.shape, [1024, 512]), { ok: true, tileCount: 16, emptyTiles: [] }, "exact cover");
same(rankMapConsistent(ag, rowSharding(1024, 4)), { ok: true }, "rank map");

const x = variable("x", { min: 0, max: 7 });
const y = variable("y", { min: 0, max: 100 });
same(toPython(simplify(floorDiv(add(mul(y, 8), x), 8))), "y", "simplify floorDiv");
same(toPython(simplify(mod(sub(x, 1), 8))), "(x + 7) % 8", "simplify mod");

const tile = variable("tile", { min: 0, max: 3 });
const peers = fillTable(lookupTable("src_rank", 8), [5, 4, 7, 6, 1, 0, 3, 2]);
const m = dynamicMap(peers, add(mul(tile, 2), 1));
same(evaluateMap(m, { tile: 1 }), 6, "dynamic map");
same(mapToPython(m), "src_rank[2 * tile + 1]", "its Python");

try {
  evaluate(floorDiv(x, 0), { x: 3 });
  throw new Error("division by zero passed");
} catch (e) {
  holds(e instanceof MappingError, "MappingError");
  same(e.code, "division-by-zero", "its code");
}
console.log("@ovl/mapping: README example ok");
