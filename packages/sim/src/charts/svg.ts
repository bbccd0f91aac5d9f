// Renders a Vega-Lite spec to an SVG string headlessly (no browser, no canvas): the one
// place the charts touch the charting library's runtime.
import * as vega from "vega";
import { compile, type TopLevelSpec } from "vega-lite";

/** Compile a Vega-Lite spec and render it to a standalone SVG document. */
export async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: "none" });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
