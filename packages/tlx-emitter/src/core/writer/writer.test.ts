import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { runPython } from "../../testing/python.js";
import {
  checkIdentifier,
  EmitError,
  isSafeIdentifier,
  PYTHON_KEYWORDS,
  pyLiteral,
  pyString,
  PythonWriter,
  RESERVED_NAMES,
  sanitizeText,
} from "./index.js";

function codeOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (e) {
    return e instanceof EmitError ? e.code : `not an EmitError: ${String(e)}`;
  }
  return undefined;
}

describe("identifiers", () => {
  it("accepts exactly the identifier grammar minus keywords, reserved names and dunders", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 12 }), (s) => {
        const expected = /^[A-Za-z_][A-Za-z0-9_]*$/.test(s) && !PYTHON_KEYWORDS.has(s) && !RESERVED_NAMES.has(s) && !s.startsWith("__");
        expect(isSafeIdentifier(s)).toBe(expected);
        expect(codeOf(() => checkIdentifier(s)) === undefined).toBe(expected);
      }),
      { numRuns: 300 },
    );
  });

  it("names the rule broken", () => {
    expect(codeOf(() => checkIdentifier("a-b"))).toBe("bad-identifier");
    expect(codeOf(() => checkIdentifier("1a"))).toBe("bad-identifier");
    expect(codeOf(() => checkIdentifier("x\nimport os"))).toBe("bad-identifier");
    expect(codeOf(() => checkIdentifier("lambda"))).toBe("reserved-identifier");
    expect(codeOf(() => checkIdentifier("tl"))).toBe("reserved-identifier");
    expect(codeOf(() => checkIdentifier("range"))).toBe("reserved-identifier");
    expect(codeOf(() => checkIdentifier("__import__"))).toBe("reserved-identifier");
    expect(checkIdentifier("a_ptr")).toBe("a_ptr");
  });
});

describe("literals", () => {
  it("refuses non-finite and unsafe numbers", () => {
    for (const v of [Number.NaN, Infinity, -Infinity, 2 ** 53, "1" as unknown as number, null as unknown as number]) {
      expect(codeOf(() => pyLiteral(v))).toBe("bad-literal");
    }
    expect(pyLiteral(true)).toBe("True");
    expect(pyLiteral(-0)).toBe("0");
  });

  it("Python reads every literal and string back to the same value", () => {
    const nums = fc.sample(
      fc.oneof(
        fc.integer({ min: -(2 ** 40), max: 2 ** 40 }),
        fc.double({ noNaN: true, noDefaultInfinity: true }).filter((n) => !Number.isInteger(n) || Number.isSafeInteger(n)),
      ),
      { numRuns: 150, seed: 7 },
    );
    const strs = fc.sample(fc.string({ unit: "binary", maxLength: 24 }), { numRuns: 150, seed: 11 });
    const src = [
      `nums = [${nums.map((n) => pyLiteral(n)).join(", ")}]`,
      `strs = [${strs.map(pyString).join(", ")}]`,
      "import json, struct",
      "print(json.dumps({'nums': [struct.pack('<d', float(n)).hex() for n in nums], 'strs': strs}))",
    ].join("\n");
    const back = JSON.parse(runPython("import sys; exec(sys.stdin.read())", src)) as { nums: string[]; strs: string[] };
    const hex = (n: number) => Buffer.from(new Float64Array([n === 0 ? 0 : n]).buffer).toString("hex");
    expect(back.nums).toEqual(nums.map(hex));
    expect(back.strs).toEqual(strs);
  });

  it("string literals are one line and cannot be closed early", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 40 }), (s) => {
        const lit = pyString(s);
        expect(lit).not.toMatch(/[\r\n\u2028\u2029]/);
        // Every quote inside is escaped: removing escape pairs leaves only the two delimiters.
        expect(lit.slice(1, -1).replace(/\\./g, "")).not.toContain('"');
      }),
      { numRuns: 200 },
    );
  });

  it("sanitised text holds no newline, quote or backslash", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 40 }), (s) => {
        expect(sanitizeText(s)).toMatch(/^[\x20-\x7e]*$/);
        expect(sanitizeText(s)).not.toMatch(/["\\]/);
      }),
      { numRuns: 200 },
    );
  });
});

describe("PythonWriter", () => {
  it("writes blocks, comments and docstrings that Python parses", () => {
    const w = new PythonWriter();
    w.comment('evil """ text\nimport os');
    w.block("def f(x)", (b) => {
      b.docstring('doc with """ and \\ inside', "second line\r\n");
      b.block("if x > 0", (i) => i.line("return x"));
      b.line("return 0");
    });
    w.block("def g()", () => {});
    const text = w.toString();
    expect(text).toMatchInlineSnapshot(`
      "# evil ''' text import os
      def f(x):
          """doc with ''' and ' inside
          second line
          """
          if x > 0:
              return x
          return 0
      def g():
          pass
      "
    `);
    const out = runPython("import sys; ns = {}; exec(sys.stdin.read(), ns); print(ns['f'](3), ns['f'](-1), ns['g']())", text);
    expect(out.trim()).toBe("3 0 None");
  });

  it("refuses newlines in a line, colons in headers and unbalanced indentation", () => {
    expect(codeOf(() => new PythonWriter().line("a = 1\nimport os"))).toBe("bad-text");
    expect(codeOf(() => new PythonWriter().block("if x:", () => {}))).toBe("bad-text");
    expect(codeOf(() => new PythonWriter().dedent())).toBe("unbalanced-indent");
    expect(codeOf(() => new PythonWriter().indent().toString())).toBe("unbalanced-indent");
  });
});
