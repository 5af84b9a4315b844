// DOM helpers: every piece of data becomes a text node (never HTML: tool output is
// attacker-controlled text).

export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

export function clear(node) {
  node.replaceChildren();
  return node;
}

// `text` with the first occurrence of `match` in a <mark>.
export function marked(text, match) {
  const at = match ? text.indexOf(match) : -1;
  if (at < 0) return [text];
  return [text.slice(0, at), el("mark", {}, match), text.slice(at + match.length)];
}

export function label(value) {
  return String(value ?? "—").replaceAll("_", " ").toLowerCase();
}

export function when(iso) {
  if (!iso) return "—";
  const moment = new Date(iso);
  return Number.isNaN(moment.getTime()) ? iso : moment.toLocaleString();
}

export function badge(kind, value) {
  const text = value ?? "none";
  return el("span", { class: `badge ${kind}`, dataset: { value: String(text) } }, label(text));
}

export function section(title, ...children) {
  return el("section", {}, el("h2", {}, title), ...children);
}
