// Colours (Okabe-Ito, distinct under the common colour blindnesses) and shapes: every kind of mark differs
// by shape as well as by colour, so no reader depends on colour alone.

export const KIND = {
  turn: { colour: "#0072B2", label: "model call" },
  tool: { colour: "#E69F00", label: "tool call" },
  message: { colour: "#CC79A7", label: "message" },
  aggregate: { colour: "#009E73", label: "aggregate" },
  decision: { colour: "#D55E00", label: "decision" },
  human: { colour: "#56B4E9", label: "human intervention" },
  safety: { colour: "#000000", label: "safety event" },
};

// The five orchestration sub-decisions (O1 to O5) and any other decision label.
export const DECISION = {
  spawn: { code: "O1", shape: "triangle" },
  delegate: { code: "O2", shape: "diamond" },
  communicate: { code: "O3", shape: "star" },
  aggregate: { code: "O4", shape: "triangleDown" },
  stop: { code: "O5", shape: "square" },
  other: { code: "", shape: "cross" },
};

export const ARROW = {
  spawn: { colour: "#000000", dash: "", label: "spawn" },
  delegate: { colour: "#0072B2", dash: "6 3", label: "delegate" },
  handoff: { colour: "#0072B2", dash: "2 2", label: "handoff (delegate without return)" },
  message: { colour: "#CC79A7", dash: "1 3", label: "message" },
  return: { colour: "#777777", dash: "", label: "return" },
  aggregate: { colour: "#009E73", dash: "8 2 2 2", label: "aggregate input" },
};

// An SVG path for a shape centred on (x, y) with radius r.
export function shapePath(shape, x, y, r) {
  switch (shape) {
    case "triangle":
      return `M${x},${y - r}L${x + r},${y + r * 0.8}L${x - r},${y + r * 0.8}Z`;
    case "triangleDown":
      return `M${x},${y + r}L${x + r},${y - r * 0.8}L${x - r},${y - r * 0.8}Z`;
    case "diamond":
      return `M${x},${y - r}L${x + r},${y}L${x},${y + r}L${x - r},${y}Z`;
    case "square":
      return `M${x - r * 0.8},${y - r * 0.8}h${r * 1.6}v${r * 1.6}h${-r * 1.6}Z`;
    case "circle":
      return `M${x - r},${y}a${r},${r} 0 1,0 ${2 * r},0a${r},${r} 0 1,0 ${-2 * r},0`;
    case "hexagon": {
      const points = [0, 1, 2, 3, 4, 5].map((i) => {
        const a = (Math.PI / 3) * i;
        return `${x + r * Math.cos(a)},${y + r * Math.sin(a)}`;
      });
      return `M${points.join("L")}Z`;
    }
    case "star": {
      const points = [];
      for (let i = 0; i < 10; i++) {
        const a = -Math.PI / 2 + (Math.PI / 5) * i;
        const radius = i % 2 ? r * 0.45 : r;
        points.push(`${x + radius * Math.cos(a)},${y + radius * Math.sin(a)}`);
      }
      return `M${points.join("L")}Z`;
    }
    default: // cross
      return `M${x - r},${y - r}L${x + r},${y + r}M${x + r},${y - r}L${x - r},${y + r}`;
  }
}

// Credited reward on a diverging blue (more) / orange (less) scale, grey at zero.
export function creditColour(value, scale) {
  if (!value || !scale) return "#d9d9d9";
  const strength = Math.min(1, Math.abs(value) / scale);
  const [from, to] = value > 0 ? [[222, 235, 247], [8, 81, 156]] : [[253, 208, 162], [166, 54, 3]];
  const channel = (i) => Math.round(from[i] + (to[i] - from[i]) * (0.25 + 0.75 * strength));
  return `rgb(${channel(0)},${channel(1)},${channel(2)})`;
}

export function creditSign(value) {
  return value > 0 ? "positive" : value < 0 ? "negative" : "zero";
}
