// The course site's script: on the search page (SEARCH_INDEX from search-index.js) the
// sections that hold every word of ?q=, with the words marked in their excerpts; on any
// page opened with ?q=, the words marked in the page and the first mark shown.
"use strict";
const query = new URLSearchParams(location.search).get("q") || "";
const words = query.toLowerCase().split(/\s+/).filter(w => w);
const pattern = words.length && new RegExp(
  words.map(w => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|"), "gi");

function marked(text) {
  // a fragment of ``text`` with each word of the query in <mark>
  const fragment = document.createDocumentFragment();
  let at = 0;
  for (const m of text.matchAll(pattern)) {
    fragment.append(text.slice(at, m.index));
    const mark = document.createElement("mark");
    mark.textContent = m[0];
    fragment.append(mark);
    at = m.index + m[0].length;
  }
  fragment.append(text.slice(at));
  return fragment;
}

function showResults(list, summary) {
  const hits = SEARCH_INDEX.map(entry => {
    const text = entry.text.toLowerCase(), heading = entry.heading.toLowerCase();
    let score = 0;
    for (const w of words) {
      if (!text.includes(w) && !heading.includes(w)) return null;
      score += text.split(w).length - 1 + 5 * (heading.split(w).length - 1);
    }
    return {entry, score};
  }).filter(h => h && words.length).sort((a, b) => b.score - a.score);
  summary.textContent = words.length
    ? `${hits.length} sections match “${query}”.` : "Type words to look for in the box above.";
  for (const {entry} of hits.slice(0, 50)) {
    const item = document.createElement("li"), link = document.createElement("a");
    const [page, id] = entry.href.split("#");
    link.href = `${page}?q=${encodeURIComponent(query)}#${id}`;
    link.append(marked(entry.heading));
    const where = document.createElement("div");
    where.className = "where";
    where.textContent = entry.page;
    const text = entry.text, found = text.toLowerCase().indexOf(words[0]);
    let start = Math.max(0, found - 80);
    if (start) start = text.indexOf(" ", start) + 1;  // from a word's start
    let end = Math.min(text.length, start + 240);
    if (end < text.length) end = Math.max(text.lastIndexOf(" ", end), found + words[0].length);
    const excerpt = document.createElement("p");
    excerpt.append((start ? "… " : ""), marked(text.slice(start, end)),
                   (end < text.length ? " …" : ""));
    item.append(link, where, excerpt);
    list.append(item);
  }
}

function markPage(root) {
  // every match in the text of ``root``, outside scripts, styles and formulas
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
    acceptNode: node => node.parentElement.closest("script, style, math, mark, .site-bar")
      ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT});
  const nodes = [];
  while (walker.nextNode()) {
    pattern.lastIndex = 0;
    if (pattern.test(walker.currentNode.data)) nodes.push(walker.currentNode);
  }
  for (const node of nodes) node.replaceWith(marked(node.data));
}

document.querySelectorAll(".site-search input[name=q]").forEach(box => { box.value = query; });
const results = document.getElementById("results");
if (results && typeof SEARCH_INDEX !== "undefined") {
  showResults(results, document.getElementById("summary"));
} else if (pattern) {
  markPage(document.querySelector(".site-main"));
  const target = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
  const first = [...document.querySelectorAll(".site-main mark")].find(m => !target ||
    target.compareDocumentPosition(m) & Node.DOCUMENT_POSITION_FOLLOWING);
  (first || target)?.scrollIntoView({block: "center"});
}
