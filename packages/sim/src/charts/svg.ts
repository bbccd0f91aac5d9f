// Renders a Vega-Lite spec to an SVG string headlessly (no browser, no canvas): the one
// place the charts touch the charting library's runtime.
import * as vega from "vega";
import { compile, type TopLevelSpec } from "vega-lite";
import type { VegaLiteSpec } from "./spec.js";

/**
 * Compile a Vega-Lite spec and render it to a standalone SVG document. The spec is typed as JSON
 * (`VegaLiteSpec`, see spec.ts), so it becomes vega-lite's `TopLevelSpec` here, where vega-lite checks it.
 */
export async function renderSvg(spec: VegaLiteSpec): Promise<string> {
  const view = new vega.View(vega.parse(compile(spec as unknown as TopLevelSpec).spec), { renderer: "none" });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
