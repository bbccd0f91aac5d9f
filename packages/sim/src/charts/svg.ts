// Renders a Vega-Lite spec to an SVG string headlessly (no browser, no canvas): the one
// place the charts touch the charting library's runtime. Vega and Vega-Lite load on the first
// render, not with the package: they are most of @ovl/sim's import time (~0.3 s of CPU), which
// every `ovl` command and every process importing the simulator would otherwise pay.
import type { TopLevelSpec } from "vega-lite";
import type { VegaLiteSpec } from "./spec.js";

/**
 * Compile a Vega-Lite spec and render it to a standalone SVG document. The spec is typed as JSON
 * (`VegaLiteSpec`, see spec.ts), so it becomes vega-lite's `TopLevelSpec` here, where vega-lite checks it.
 */
export async function renderSvg(spec: VegaLiteSpec): Promise<string> {
  const [vega, { compile }] = await Promise.all([import("vega"), import("vega-lite")]);
  const view = new vega.View(vega.parse(compile(spec as unknown as TopLevelSpec).spec), { renderer: "none" });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
