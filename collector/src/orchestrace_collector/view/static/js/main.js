// Start: route the URL's fragment to a page; any failure becomes a message on the page, never a blank one.

import { errorBox, replaceChildren } from "./dom.js";
import { episodeRow, knownGeneration, loadEpisodes, renderEpisodes } from "./episodes_page.js";
import { renderEpisode } from "./episode_page.js";
import { renderCompare } from "./compare_page.js";
import { onNewData, startPolling } from "./live.js";
import { currentHash, parseRoute } from "./router.js";
import { isExport, startRoute } from "./source.js";

const main = document.getElementById("app");
const indicator = document.getElementById("live");
let current = null;
let shownSeq = null;

function fail(title, error) {
  replaceChildren(main, errorBox(title, String((error && error.message) || error)));
  main.dataset.state = "error";
}

async function route() {
  if (current && current.stop) current.stop();
  current = null;
  main.dataset.state = "loading";
  const { parts, params } = parseRoute(currentHash(startRoute));
  try {
    await loadEpisodes();
    if (parts[0] === "episode" && parts[1]) {
      shownSeq = episodeRow(parts[1])?.seq ?? null;
      current = await renderEpisode(main, parts, params);
    } else if (parts[0] === "compare") {
      await renderCompare(main, params);
    } else {
      renderEpisodes(main, params);
    }
    main.dataset.state = "ready";
  } catch (error) {
    fail("This page could not be shown", error);
  }
}

window.addEventListener("error", (event) => fail("Something went wrong in the page", event.error || event.message));
window.addEventListener("unhandledrejection", (event) => fail("Something went wrong in the page", event.reason));
window.addEventListener("hashchange", route);

onNewData(async () => {
  const { parts } = parseRoute(currentHash(startRoute));
  const changed = await loadEpisodes();
  if (!changed) return;
  if (parts[0] === "episode") {
    // Redraw only when this episode got a new revision (a replay keeps its step: it is in the URL).
    const seq = episodeRow(parts[1])?.seq ?? null;
    if (seq !== shownSeq) route();
  } else if (parts[0] !== "compare") {
    route();
  }
});

if (isExport) {
  indicator.textContent = "exported file";
} else {
  startPolling(indicator, knownGeneration);
}
document.title = isExport ? "orchestrace report" : "orchestrace view";
route();
