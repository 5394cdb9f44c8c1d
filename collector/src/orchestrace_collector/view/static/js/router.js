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

// Replace the URL's state without a new history entry (the replay's step, the episodes' filters). A page
// shown from `srcdoc` (a notebook) has no URL of its own to change: its state then lives in memory only.
let inMemory = null;

export function setParams(parts, params) {
  const href = routeHref(parts, params);
  try {
    history.replaceState(null, "", href);
  } catch {
    inMemory = href;
  }
}

const frameOnly = location.protocol === "about:";

export function currentHash(fallback) {
  return (frameOnly ? inMemory : location.hash) || fallback || "";
}

export function navigate(href) {
  if (!frameOnly) {
    location.hash = href;
    return;
  }
  inMemory = href;
  window.dispatchEvent(new HashChangeEvent("hashchange"));
}

// In a `srcdoc` frame a link to `#/...` would leave the page: follow it in memory instead.
if (frameOnly) {
  document.addEventListener("click", (event) => {
    const link = event.target.closest && event.target.closest('a[href^="#"]');
    if (!link) return;
    event.preventDefault();
    navigate(link.getAttribute("href"));
  });
}
