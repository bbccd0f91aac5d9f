// "Did you mean" for names typed on the command line: the closest known name by edit
// distance, after folding case and the `_`/`-`/space spellings users mix up.

function fold(s: string): string {
  return s.toLowerCase().replace(/[\s_]+/g, "-");
}

/** Levenshtein distance between two strings. */
export function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row.push(Math.min((prev[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + cost));
    }
    prev = row;
  }
  return prev[b.length] ?? 0;
}

/**
 * The known name closest to `input` (case, `_` and `-` folded), when it is close enough to
 * be a typo: at most a third of its length away. `undefined` otherwise.
 */
export function closest(input: string, known: readonly string[]): string | undefined {
  const f = fold(input);
  let best: string | undefined;
  let bestD = Infinity;
  for (const k of known) {
    const fk = fold(k);
    const d = fk === f ? 0 : fk.replace(/-/g, "") === f.replace(/-/g, "") ? 0.5 : editDistance(f, fk);
    if (d < bestD) {
      bestD = d;
      best = k;
    }
  }
  return best !== undefined && bestD <= Math.max(1, Math.floor(best.length / 3)) ? best : undefined;
}

/** `unknown <what> 'x'; did you mean 'y'?` or, with no close name, the list to pick from. */
export function unknownNameMessage(what: string, input: string, known: readonly string[]): string {
  const near = closest(input, known);
  return near !== undefined
    ? `unknown ${what} '${input}'; did you mean '${near}'?`
    : `unknown ${what} '${input}'; use one of: ${known.join(", ")}`;
}
