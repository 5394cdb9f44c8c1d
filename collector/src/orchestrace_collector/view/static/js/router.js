// Pages live in the URL's fragment (it works from a file too): #/episodes?..., #/episode/<id>/<tab>?...,
// #/compare?a=<id>&b=<id>. A link opens the same page in the same state.

export function parseRoute(hash) {
  const text = (hash || "").replace(/^#\/?/, "");
  const [path, search] = text.split("?", 2);
  const parts = path ? path.split("/").map(decodeURIComponent) : [];
  return { parts, params: new URLSearchParams(search || "") };
}

export function routeHref(parts, params) {
  const path = parts.map(encodeURIComponent).join("/");
  const search = params ? new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== "")).toString() : "";
  return `#/${path}${search ? `?${search}` : ""}`;
}

export function episodeHref(traceId, tab = "timeline", params) {
  return routeHref(["episode", traceId, tab], params);
}

// Replace the URL's state without a new history entry (the replay's step, the episodes' filters).
export function setParams(parts, params) {
  history.replaceState(null, "", routeHref(parts, params));
}
