// The public type of the chart specs. Vega-Lite's own `TopLevelSpec` reaches vega-typings, whose
// declarations name DOM types (Element, MouseEvent, HTMLCanvasElement): a Node project without the
// DOM lib could not type-check @ovl/sim's published declarations against it. The specs are plain
// JSON, so they are typed as such, and only this package's sources see vega-lite's types.

/** A Vega-Lite v5 specification as JSON: render it with `renderSvg`, or pass it to vega-lite's `compile` (as its `TopLevelSpec`). */
export interface VegaLiteSpec {
  readonly $schema?: string;
  readonly [key: string]: unknown;
}
