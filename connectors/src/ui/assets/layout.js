// Layered layout of a service graph (Sugiyama-style, small graphs): each node's layer is its
// longest path from a source, nodes within a layer are ordered by the mean position of their
// predecessors (two sweeps), and positions are laid left to right. Pure: ids and edges in,
// coordinates out.
"use strict";

function weirLayout(ids, edges, box) {
  const preds = new Map(ids.map((id) => [id, []]));
  const succs = new Map(ids.map((id) => [id, []]));
  for (const e of edges) {
    if (preds.has(e.to) && succs.has(e.from)) {
      preds.get(e.to).push(e.from);
      succs.get(e.from).push(e.to);
    }
  }
  // Longest path from a source, by Kahn's order (a cycle, which plans never have, is cut).
  const layer = new Map();
  const indegree = new Map(ids.map((id) => [id, preds.get(id).length]));
  const queue = ids.filter((id) => indegree.get(id) === 0);
  queue.forEach((id) => layer.set(id, 0));
  for (let i = 0; i < queue.length; i++) {
    const id = queue[i];
    for (const s of succs.get(id)) {
      layer.set(s, Math.max(layer.get(s) || 0, layer.get(id) + 1));
      indegree.set(s, indegree.get(s) - 1);
      if (indegree.get(s) === 0) queue.push(s);
    }
  }
  ids.forEach((id) => { if (!layer.has(id)) layer.set(id, 0); });
  const layers = [];
  for (const id of ids) {
    const l = layer.get(id);
    (layers[l] = layers[l] || []).push(id);
  }
  const order = new Map();
  const index = () => layers.forEach((ls) => ls.forEach((id, i) => order.set(id, i)));
  index();
  for (let sweep = 0; sweep < 2; sweep++) {
    for (let l = 1; l < layers.length; l++) {
      const mean = (id) => {
        const ps = preds.get(id);
        return ps.length ? ps.reduce((a, p) => a + order.get(p), 0) / ps.length : order.get(id);
      };
      layers[l].sort((a, b) => mean(a) - mean(b));
      index();
    }
  }
  const gapX = box.gapX, gapY = box.gapY;
  const tallest = Math.max(1, ...layers.map((ls) => ls.length));
  const height = tallest * box.h + (tallest - 1) * gapY + 2 * box.pad;
  const pos = {};
  layers.forEach((ls, l) => {
    const span = ls.length * box.h + (ls.length - 1) * gapY;
    const top = (height - span) / 2;
    ls.forEach((id, i) => {
      pos[id] = { x: box.pad + l * (box.w + gapX), y: top + i * (box.h + gapY) };
    });
  });
  const width = 2 * box.pad + layers.length * box.w + Math.max(0, layers.length - 1) * gapX;
  return { pos, width, height };
}
