// Building elements. Text from a trace (agent names, prompts) only ever becomes text nodes, never markup.

const SVG_NS = "http://www.w3.org/2000/svg";

function fill(element, attrs, children) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      element.addEventListener(name.slice(2), value);
    } else {
      element.setAttribute(name, value === true ? "" : String(value));
    }
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

export function h(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

export function s(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

export function replaceChildren(element, ...children) {
  element.replaceChildren();
  return fill(element, {}, children);
}

export function errorBox(title, detail) {
  return h("div", { class: "error", role: "alert" }, h("strong", {}, title), detail ? h("p", {}, detail) : null);
}
