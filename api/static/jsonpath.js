// Singular JSONPath, as the Gatekeeper reads it (pipeline/rules/jsonpath.py): `$`, then `.name`,
// `[index]` or `['name']` segments, each naming exactly one value.

const NAME = /^[A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff-]*/;
const INDEX = /^-?[0-9]+/;
const ESCAPES = { b: "\b", f: "\f", n: "\n", r: "\r", t: "\t", "/": "/", "\\": "\\",
  "'": "'", '"': '"' };

export function parsePath(path) {
  if (typeof path !== "string" || !path.startsWith("$")) throw new Error("path must start with $");
  const segments = [];
  let rest = path.slice(1);
  while ((rest = rest.trimStart())) {
    if (rest.startsWith(".")) {
      const name = NAME.exec(rest.slice(1));
      if (!name) throw new Error(`bad name in ${path}`);
      segments.push(name[0]);
      rest = rest.slice(1 + name[0].length);
    } else if (rest.startsWith("[")) {
      let inner = rest.slice(1).trimStart();
      let segment;
      if (inner[0] === "'" || inner[0] === '"') [segment, inner] = quoted(inner);
      else {
        const index = INDEX.exec(inner);
        if (!index) throw new Error(`bad selector in ${path}`);
        segment = Number(index[0]);
        inner = inner.slice(index[0].length);
      }
      inner = inner.trimStart();
      if (!inner.startsWith("]")) throw new Error(`missing ] in ${path}`);
      segments.push(segment);
      rest = inner.slice(1);
    } else {
      throw new Error(`unexpected ${rest[0]} in ${path}`);
    }
  }
  return segments;
}

function quoted(text) {
  const quote = text[0];
  let out = "";
  for (let i = 1; i < text.length; i += 1) {
    const char = text[i];
    if (char === quote) return [out, text.slice(i + 1)];
    if (char !== "\\") {
      out += char;
      continue;
    }
    const next = text[(i += 1)];
    if (next === "u") {
      out += String.fromCharCode(parseInt(text.slice(i + 1, i + 5), 16));
      i += 4;
    } else if (next in ESCAPES) {
      out += ESCAPES[next];
    } else {
      throw new Error(`bad escape \\${next}`);
    }
  }
  throw new Error("unterminated name");
}

// {found, value} of `path` inside `document`.
export function resolvePath(document, path) {
  let value = document;
  for (const segment of parsePath(path)) {
    if (typeof segment === "number") {
      if (!Array.isArray(value)) return { found: false };
      const at = segment < 0 ? value.length + segment : segment;
      if (at < 0 || at >= value.length) return { found: false };
      value = value[at];
    } else {
      if (value === null || typeof value !== "object" || Array.isArray(value)
          || !Object.hasOwn(value, segment)) return { found: false };
      value = value[segment];
    }
  }
  return { found: true, value };
}
