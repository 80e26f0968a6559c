// The facts page's graph: an entity's neighbourhood drawn as SVG with a radial layout
// (the centre in the middle, each hop on a ring further out, every node placed near the
// nodes of the previous ring it is linked to). Clicking a node, or pressing Enter on it,
// fetches that node's neighbourhood from the page's JSON endpoint and re-centres on it.
// No library: the layout is a few lines, and the page works (as a table) without it.

(function () {
  const SVG_NS = "http://www.w3.org/2000/svg";
  const RING_STEP = 150; // px between rings
  const MIN_GAP = 96; // px of ring circumference each node needs
  const LABEL_CHARS = 26;

  function el(name, attrs = {}, parent = null) {
    const node = document.createElementNS(SVG_NS, name);
    for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
    if (parent) parent.appendChild(node);
    return node;
  }

  function shorten(text) {
    return text.length > LABEL_CHARS ? `${text.slice(0, LABEL_CHARS - 1)}…` : text;
  }

  // Hops from the centre (nodes[0]), following edges either way.
  function hops(graph) {
    const near = new Map(graph.nodes.map((n) => [n.id, []]));
    for (const e of graph.edges) {
      near.get(e.source)?.push(e.target);
      near.get(e.target)?.push(e.source);
    }
    const dist = new Map([[graph.nodes[0].id, 0]]);
    const queue = [graph.nodes[0].id];
    while (queue.length) {
      const id = queue.shift();
      for (const other of near.get(id) || []) {
        if (!dist.has(other)) {
          dist.set(other, dist.get(id) + 1);
          queue.push(other);
        }
      }
    }
    return { near, dist };
  }

  function circularMean(angles) {
    let x = 0;
    let y = 0;
    for (const a of angles) {
      x += Math.cos(a);
      y += Math.sin(a);
    }
    return Math.atan2(y, x);
  }

  // Positions keyed by node id, centred on (0, 0).
  function layout(graph) {
    const { near, dist } = hops(graph);
    const rings = [];
    for (const n of graph.nodes) {
      const ring = dist.has(n.id) ? dist.get(n.id) : Math.max(1, ...dist.values()) + 1;
      (rings[ring] ||= []).push(n);
    }
    const angle = new Map([[graph.nodes[0].id, 0]]);
    const pos = new Map([[graph.nodes[0].id, { x: 0, y: 0, ring: 0 }]]);
    let radius = 0;
    const radii = [];
    for (let r = 1; r < rings.length; r++) {
      const ring = rings[r] || [];
      if (!ring.length) continue;
      // Where each node would like to be: beside its neighbours on the inner ring.
      const wish = new Map();
      for (const n of ring) {
        const inner = (near.get(n.id) || []).filter((id) => angle.has(id) && pos.get(id).ring === r - 1);
        wish.set(n.id, inner.length ? circularMean(inner.map((id) => angle.get(id))) : 0);
      }
      ring.sort((a, b) => wish.get(a.id) - wish.get(b.id) || a.label.localeCompare(b.label));
      radius = Math.max(radius + RING_STEP, (ring.length * MIN_GAP) / (2 * Math.PI));
      radii.push(radius);
      const step = (2 * Math.PI) / ring.length;
      // Turn the ring so that its first node sits as close to where it wants as the spacing allows.
      const offset = r === 1 ? -Math.PI / 2 : wish.get(ring[0].id);
      ring.forEach((n, i) => {
        const a = offset + i * step;
        angle.set(n.id, a);
        pos.set(n.id, { x: radius * Math.cos(a), y: radius * Math.sin(a), ring: r });
      });
    }
    return { pos, radius, radii };
  }

  function draw(svg, graph, onPick) {
    svg.replaceChildren();
    if (!graph.nodes.length || !graph.edges.length) {
      svg.setAttribute("hidden", "");
      return;
    }
    svg.removeAttribute("hidden");
    const { pos, radius, radii } = layout(graph);
    const pad = 110;
    const half = radius + pad;
    svg.setAttribute("viewBox", `${-half} ${-half} ${2 * half} ${2 * half}`);
    svg.style.height = `${Math.min(Math.max(2 * half, 360), 760)}px`;

    const defs = el("defs", {}, svg);
    const marker = el(
      "marker",
      { id: "arrow", viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" },
      defs,
    );
    el("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow-head" }, marker);

    for (const ringRadius of radii) el("circle", { cx: 0, cy: 0, r: ringRadius, class: "ring" }, svg);

    // One line per pair of nodes, its predicates joined: parallel facts would overlap.
    const pairs = new Map();
    for (const e of graph.edges) {
      const key = `${e.source}\u0000${e.target}`;
      if (!pairs.has(key)) pairs.set(key, { source: e.source, target: e.target, predicates: [] });
      const pair = pairs.get(key);
      if (!pair.predicates.includes(e.predicate)) pair.predicates.push(e.predicate);
    }
    const edgeLayer = el("g", { class: "edges" }, svg);
    const lines = [];
    for (const pair of pairs.values()) {
      const a = pos.get(pair.source);
      const b = pos.get(pair.target);
      if (!a || !b || pair.source === pair.target) continue;
      const dx = b.x - a.x;
      const dy = b.y - a.y;
      const length = Math.hypot(dx, dy) || 1;
      const ra = pair.source === graph.nodes[0].id ? 20 : 11;
      const rb = pair.target === graph.nodes[0].id ? 22 : 13;
      const g = el("g", { class: "edge" }, edgeLayer);
      el(
        "line",
        {
          x1: a.x + (dx * ra) / length,
          y1: a.y + (dy * ra) / length,
          x2: b.x - (dx * rb) / length,
          y2: b.y - (dy * rb) / length,
          "marker-end": "url(#arrow)",
        },
        g,
      );
      const label = el("text", { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 - 4, class: "edge-label" }, g);
      label.textContent = shorten(pair.predicates.join(" · "));
      el("title", {}, g).textContent = pair.predicates.join(" · ");
      lines.push({ g, pair });
    }

    const nodeLayer = el("g", { class: "nodes" }, svg);
    for (const n of graph.nodes) {
      const p = pos.get(n.id);
      const centre = n.id === graph.nodes[0].id;
      const kind = centre ? "centre" : p.ring === 1 ? "near" : "far";
      const g = el(
        "g",
        {
          class: `node ${kind}`,
          transform: `translate(${p.x} ${p.y})`,
          tabindex: "0",
          role: "button",
          "data-id": n.id,
          "aria-label": centre ? `${n.label} (centre)` : `Centre on ${n.label}`,
        },
        nodeLayer,
      );
      el("title", {}, g).textContent = n.label;
      el("circle", { r: centre ? 20 : 11 }, g);
      const text = el("text", { y: centre ? 36 : 27, class: "node-label" }, g);
      text.textContent = shorten(n.label);
      const highlight = (on) => {
        for (const { g: line, pair } of lines) {
          line.classList.toggle("lit", on && (pair.source === n.id || pair.target === n.id));
        }
      };
      g.addEventListener("mouseenter", () => highlight(true));
      g.addEventListener("mouseleave", () => highlight(false));
      if (!centre) {
        g.addEventListener("click", () => onPick(n.label));
        g.addEventListener("keydown", (event) => {
          if (event.key === "Enter" || event.key === " ") {
            event.preventDefault();
            onPick(n.label);
          }
        });
      }
    }
  }

  function fillTable(tbody, graph, factUrl) {
    tbody.replaceChildren();
    for (const e of graph.edges) {
      const row = tbody.insertRow();
      for (const text of [e.source_label, e.predicate, e.target_label]) row.insertCell().textContent = text;
      const link = document.createElement("a");
      link.href = factUrl(e.id);
      link.textContent = "Open";
      row.insertCell().appendChild(link);
    }
  }

  function plural(n, one, many) {
    return `${n} ${n === 1 ? one : many}`;
  }

  document.addEventListener("DOMContentLoaded", () => {
    const svg = document.getElementById("fact-graph");
    const source = document.getElementById("graph-data");
    if (!svg || !source) return;
    const form = document.getElementById("graph-form");
    const entityInput = document.getElementById("graph-entity");
    const depthInput = document.getElementById("graph-depth");
    const centreName = document.getElementById("graph-centre");
    const summary = document.getElementById("graph-summary");
    const empty = document.getElementById("graph-empty");
    const tbody = document.getElementById("graph-edge-rows");
    const factUrl = (id) => svg.dataset.factUrl.replace(svg.dataset.factPlaceholder, id);
    let request = 0;

    function show(graph) {
      draw(svg, graph, (label) => load(label, graph.depth, true));
      fillTable(tbody, graph, factUrl);
      centreName.textContent = graph.nodes.length ? graph.nodes[0].label : graph.entity || "…";
      summary.textContent =
        `${plural(graph.nodes.length, "entity", "entities")} · ${plural(graph.edges.length, "fact", "facts")}` +
        (graph.truncated ? ` · cut at the newest ${graph.edges.length}` : "");
      empty.hidden = graph.edges.length > 0;
      if (!graph.edges.length) {
        empty.textContent = graph.entity ? `No live fact mentions “${graph.entity}”.` : "No facts yet: there is nothing to draw.";
      }
      svg.dataset.centre = graph.nodes.length ? graph.nodes[0].label : "";
    }

    async function load(entity, depth, remember) {
      const mine = ++request;
      const params = new URLSearchParams({ entity, depth: String(depth) });
      svg.classList.add("loading");
      try {
        const response = await fetch(`${svg.dataset.url}?${params}`, { credentials: "same-origin", cache: "no-store" });
        if (!response.ok || response.redirected) throw new Error(`status ${response.status}`);
        const graph = await response.json();
        if (mine !== request) return; // a later click won
        entityInput.value = entity;
        depthInput.value = String(depth);
        show(graph);
        if (remember) history.pushState({ entity, depth }, "", `?${params}`);
      } catch {
        summary.textContent = "Could not load the graph (signed out or server down). Reload the page.";
      } finally {
        if (mine === request) svg.classList.remove("loading");
      }
    }

    form.addEventListener("submit", (event) => {
      event.preventDefault();
      load(entityInput.value.trim(), Number(depthInput.value) || 1, true);
    });
    depthInput.addEventListener("change", () => load(entityInput.value.trim(), Number(depthInput.value) || 1, true));
    window.addEventListener("popstate", (event) => {
      const state = event.state || {};
      const params = new URLSearchParams(location.search);
      load(state.entity ?? params.get("entity") ?? "", state.depth ?? (Number(params.get("depth")) || 1), false);
    });

    const initial = JSON.parse(source.textContent);
    history.replaceState({ entity: initial.entity, depth: initial.depth }, "");
    show(initial);
  });
})();
