// Test support: run one python3 process over many inputs (parse checks, literal round
// trips), so the suite stays fast however many files it checks.
import { execFileSync } from "node:child_process";

/** Run `script` with `input` on stdin; returns stdout. */
export function runPython(script: string, input: string): string {
  return execFileSync("python3", ["-c", script], { input, encoding: "utf8", maxBuffer: 64 << 20 });
}

const PARSE = `
import ast, json, sys
out = {}
for name, text in json.load(sys.stdin).items():
    try:
        ast.parse(text, filename=name)
        out[name] = "ok"
    except SyntaxError as e:
        out[name] = f"{e.msg} at line {e.lineno}"
print(json.dumps(out))
`;

/** `ast.parse` every file in one python3 call: name → "ok" or the syntax error. */
export function parseWithPython(files: Readonly<Record<string, string>>): Record<string, string> {
  return JSON.parse(runPython(PARSE, JSON.stringify(files))) as Record<string, string>;
}
