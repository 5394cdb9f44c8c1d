// Numbers as the pages show them.

export function num(value, digits = 3) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  if (Number.isInteger(value)) return String(value);
  return String(Number(value.toPrecision(digits)));
}

export function seconds(value) {
  if (value === null || value === undefined) return "–";
  if (value < 1) return `${num(value * 1000)} ms`;
  return `${num(value)} s`;
}

export function count(value) {
  return value === null || value === undefined ? "–" : Math.round(value).toLocaleString("en");
}

export function tokensOf(turn) {
  return (turn.input_tokens || 0) + (turn.output_tokens || 0);
}
