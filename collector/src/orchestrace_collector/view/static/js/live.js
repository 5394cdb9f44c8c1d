// Live update: poll the cheap status endpoint; when the directories hold trace lines the page has not
// read yet (its generation is behind), tell the page.

import { fetchStatus, isExport } from "./source.js";

const POLL_MS = 1500;
let listener = null;
let timer = null;

export function onNewData(callback) {
  listener = callback;
}

// `known()`: the generation the page's data was read at.
export function startPolling(indicator, known) {
  if (isExport || timer) return;
  let busy = false;
  timer = setInterval(async () => {
    if (busy) return;
    busy = true;
    try {
      const status = await fetchStatus();
      indicator.textContent = `live: ${status.episodes} episodes`;
      indicator.classList.remove("offline");
      if (status.generation !== known() && listener) await listener(status);
    } catch {
      indicator.textContent = "server not answering";
      indicator.classList.add("offline");
    } finally {
      busy = false;
    }
  }, POLL_MS);
}
