// Where the pages' data comes from: the view's JSON API, or the data inlined in an exported file.

const inline = document.getElementById("orchestrace-data");
const embedded = inline ? JSON.parse(inline.textContent) : null;

export const isExport = embedded !== null;
export const startRoute = embedded ? embedded.start || null : null;

export class SourceError extends Error {}

async function getJson(path) {
  let response;
  try {
    response = await fetch(path, { cache: "no-store", credentials: "same-origin" });
  } catch (error) {
    throw new SourceError(`The view's server does not answer (${error.message}). Is orchestrace view still running?`);
  }
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (!response.ok) {
    if (response.status === 404) return null;
    throw new SourceError((body && body.error) || `${path}: HTTP ${response.status}`);
  }
  return body;
}

function query(params) {
  return new URLSearchParams(params).toString();
}

export function fetchStatus() {
  return embedded ? Promise.resolve(embedded.status) : getJson("/api/status");
}

// The episodes' rows that changed after generation `after`, and the directories' status.
export function fetchEpisodes(after = 0) {
  if (embedded) return Promise.resolve({ ...embedded.status, episodes: after ? [] : embedded.episodes });
  return getJson(`/api/episodes?${query({ after })}`);
}

export function fetchTrace(traceId) {
  return embedded ? Promise.resolve(embedded.traces[traceId] || null) : getJson(`/api/trace?${query({ id: traceId })}`);
}

export function fetchProblems(traceId) {
  if (embedded) return Promise.resolve(embedded.traces[traceId] ? { problems: embedded.traces[traceId].problems || [] } : null);
  return getJson(`/api/problems?${query({ id: traceId })}`);
}

export function fetchCredit(traceId) {
  return embedded ? Promise.resolve(embedded.credit[traceId] || null) : getJson(`/api/credit?${query({ id: traceId })}`);
}

export function fetchTurn(traceId, turnId) {
  if (embedded) return Promise.resolve((embedded.turns[traceId] || {})[turnId] || null);
  return getJson(`/api/turn?${query({ trace: traceId, turn: turnId })}`);
}
