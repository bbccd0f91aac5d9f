// Every relative link of the repository's markdown (READMEs, docs/, packages' docs; the runs of the
// evidence tree aside) names a file or folder that exists and, for `page.md#anchor`, a heading of that
// page as GitHub renders its anchor.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../results/schema.js";

const SKIP = new Set(["node_modules", ".git", "dist", ".turbo", "runs"]);

function markdownFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (SKIP.has(e.name) || e.name.startsWith(".venv")) return [];
    const path = join(dir, e.name);
    return e.isDirectory() ? markdownFiles(path) : e.name.endsWith(".md") ? [path] : [];
  });
}

/** The text outside fenced code blocks. */
const prose = (text: string): string => text.replace(/^```[\s\S]*?^```/gm, "");

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens, repeats numbered. */
export function anchorsOf(text: string): Set<string> {
  const out = new Set<string>();
  for (const [, heading] of prose(text).matchAll(/^#{1,6} (.+)$/gm)) {
    const base = heading!
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\p{M}\- _]/gu, "")
      .replaceAll(" ", "-");
    let anchor = base;
    for (let k = 1; out.has(anchor); k++) anchor = `${base}-${k}`;
    out.add(anchor);
  }
  return out;
}

/** The relative link targets of a markdown text: inline links and reference definitions. */
export function linksOf(text: string): string[] {
  const body = prose(text);
  const inline = [...body.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
  const defined = [...body.matchAll(/^\[[^\]]+\]:\s*(\S+)/gm)].map((m) => m[1]!);
  return [...inline, ...defined].filter((link) => !/^[a-z][a-z0-9+.-]*:/i.test(link));
}

describe("the repository's markdown links", () => {
  it("finds the anchors and links GitHub would", () => {
    expect([...anchorsOf("# Any row count\n## 6. Several GPUs under `torchrun`\n## Any row count\n```\n# not a heading\n```")]).toEqual([
      "any-row-count",
      "6-several-gpus-under-torchrun",
      "any-row-count-1",
    ]);
    expect(linksOf("[a](b.md#c) [d](https://x.y) `[e]`\n[f]: runs/g/\n```\n[h](i.md)\n```")).toEqual(["b.md#c", "runs/g/"]);
  });

  it("resolves every relative link to a file, folder or heading that exists", () => {
    const broken: string[] = [];
    for (const file of markdownFiles(REPO_ROOT)) {
      for (const link of linksOf(readFileSync(file, "utf8"))) {
        const [path = "", anchor] = link.split("#");
        const target = path === "" ? file : join(dirname(file), path);
        const where = `${relative(REPO_ROOT, file)}: ${link}`;
        if (!existsSync(target)) broken.push(`${where} (no such file)`);
        else if (anchor !== undefined && target.endsWith(".md") && !anchorsOf(readFileSync(target, "utf8")).has(anchor)) {
          broken.push(`${where} (no such heading)`);
        }
      }
    }
    expect(broken).toEqual([]);
  });
});
