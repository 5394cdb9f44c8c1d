// Live update: poll the cheap status endpoint; when the directories gained trace lines, tell the page.

import { fetchStatus, isExport } from "./source.js";

const POLL_MS = 1500;
let listener = null;
let generation = null;
let timer = null;

export function onNewData(callback) {
  listener = callback;
}

export function startPolling(indicator) {
  if (isExport || timer) return;
  timer = setInterval(async () => {
    try {
      const status = await fetchStatus();
      indicator.textContent = `live: ${status.episodes} episodes`;
      indicator.classList.remove("offline");
      if (generation !== null && status.generation !== generation && listener) listener(status);
      generation = status.generation;
    } catch {
      indicator.textContent = "server not answering";
      indicator.classList.add("offline");
    }
  }, POLL_MS);
}

export function setGeneration(value) {
  generation = value;
}
