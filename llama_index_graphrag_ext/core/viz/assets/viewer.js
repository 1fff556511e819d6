/* The graph viewer's script, inlined into every exported page (core/viz/viewer.py).
   Vanilla JS, no dependencies, nothing loaded: pan (drag), zoom (wheel), tooltips,
   neighbour highlighting on click, legend toggles. It reads only data-* attributes
   and writes text with textContent, never innerHTML, so graph text cannot inject
   markup. */
(function () {
  "use strict";
  var svg = document.getElementById("gx-svg");
  var vp = document.getElementById("gx-viewport");
  var labelLayer = document.getElementById("gx-labels");
  var tip = document.getElementById("gx-tip");
  var info = document.getElementById("gx-info");
  var list = function (sel) { return Array.prototype.slice.call(svg.querySelectorAll(sel)); };
  var nodes = list(".gx-node"), edges = list(".gx-edge"), labels = list(".gx-label");
  var adj = nodes.map(function () { return []; });
  var inc = nodes.map(function () { return []; });
  var labelOf = {};
  labels.forEach(function (t) { labelOf[t.dataset.i] = t; });
  edges.forEach(function (e, i) {
    var u = +e.dataset.u, v = +e.dataset.v;
    adj[u].push(v); adj[v].push(u); inc[u].push(i); inc[v].push(i);
  });
  var view = { x: 0, y: 0, k: 1 }, focused = -1, drag = null;
  var hidden = { node: {}, edge: {} };

  function apply() {
    vp.setAttribute("transform", "translate(" + view.x + " " + view.y + ") scale(" + view.k + ")");
    var s = 1 / Math.sqrt(view.k);
    nodes.forEach(function (n) { n.setAttribute("r", (+n.dataset.r * s).toFixed(2)); });
    labelLayer.setAttribute("font-size", (11 / view.k).toFixed(3));
  }
  function toSvg(evt) {
    var pt = svg.createSVGPoint();
    pt.x = evt.clientX; pt.y = evt.clientY;
    return pt.matrixTransform(svg.getScreenCTM().inverse());
  }
  function describe(n) {
    var d = n.dataset;
    return [d.id, "kind: " + d.kind + "   neighbours shown: " + adj[+d.i].length, d.label];
  }
  function setLines(el, lines) {
    el.textContent = "";
    lines.forEach(function (line, i) {
      if (!line) { return; }
      var part = document.createElement(i === 0 ? "b" : "div");
      part.textContent = line;
      el.appendChild(part);
    });
  }
  function clearFocus() {
    focused = -1;
    svg.classList.remove("gx-focus");
    list(".gx-hl").forEach(function (el) { el.classList.remove("gx-hl"); });
    list(".gx-sel").forEach(function (el) { el.classList.remove("gx-sel"); });
    info.textContent = "Click a node to highlight its neighbours.";
  }
  function focus(i) {
    clearFocus();
    focused = i;
    svg.classList.add("gx-focus");
    nodes[i].classList.add("gx-hl", "gx-sel");
    [i].concat(adj[i]).forEach(function (j) {
      nodes[j].classList.add("gx-hl");
      if (labelOf[j]) { labelOf[j].classList.add("gx-hl"); }
    });
    inc[i].forEach(function (e) { edges[e].classList.add("gx-hl"); });
    setLines(info, describe(nodes[i]));
  }
  function refreshHidden() {
    nodes.forEach(function (n) { n.style.display = hidden.node[n.dataset.k] ? "none" : ""; });
    labels.forEach(function (t) { t.style.display = nodes[+t.dataset.i].style.display; });
    edges.forEach(function (e) {
      var off = hidden.edge[e.dataset.k] || nodes[+e.dataset.u].style.display === "none" ||
        nodes[+e.dataset.v].style.display === "none";
      e.style.display = off ? "none" : "";
    });
  }

  svg.addEventListener("wheel", function (evt) {
    evt.preventDefault();
    var p = toSvg(evt);
    var k = Math.min(50, Math.max(0.1, view.k * Math.exp(-evt.deltaY * 0.0015)));
    var f = k / view.k;
    view.x = p.x - (p.x - view.x) * f;
    view.y = p.y - (p.y - view.y) * f;
    view.k = k;
    apply();
  }, { passive: false });
  svg.addEventListener("pointerdown", function (evt) {
    if (evt.button !== 0) { return; }
    var p = toSvg(evt);
    drag = { x: p.x, y: p.y, vx: view.x, vy: view.y, cx: evt.clientX, cy: evt.clientY,
             moved: false, target: evt.target };
    svg.setPointerCapture(evt.pointerId);
  });
  svg.addEventListener("pointermove", function (evt) {
    if (drag) {
      if (Math.abs(evt.clientX - drag.cx) + Math.abs(evt.clientY - drag.cy) > 4) {
        drag.moved = true;
        svg.classList.add("gx-dragging");
        tip.hidden = true;
      }
      if (drag.moved) {
        var p = toSvg(evt);
        view.x = drag.vx + p.x - drag.x;
        view.y = drag.vy + p.y - drag.y;
        apply();
      }
      return;
    }
    if (evt.target.classList && evt.target.classList.contains("gx-node")) {
      setLines(tip, describe(evt.target));
      tip.hidden = false;
      var x = evt.clientX + 14, y = evt.clientY + 14;
      var w = tip.offsetWidth, h = tip.offsetHeight;
      if (x + w > window.innerWidth) { x = Math.max(0, evt.clientX - w - 14); }
      if (y + h > window.innerHeight) { y = Math.max(0, evt.clientY - h - 14); }
      tip.style.left = x + "px";
      tip.style.top = y + "px";
    } else {
      tip.hidden = true;
    }
  });
  svg.addEventListener("pointerup", function () {
    if (!drag) { return; }
    var d = drag;
    drag = null;
    svg.classList.remove("gx-dragging");
    if (d.moved) { return; }
    var t = d.target;
    if (t.classList && t.classList.contains("gx-node")) {
      var i = +t.dataset.i;
      if (i === focused) { clearFocus(); } else { focus(i); }
    } else {
      clearFocus();
    }
  });
  svg.addEventListener("pointerleave", function () { tip.hidden = true; });
  document.addEventListener("keydown", function (evt) { if (evt.key === "Escape") { clearFocus(); } });
  document.getElementById("gx-reset").addEventListener("click", function () {
    view = { x: 0, y: 0, k: 1 };
    apply();
    clearFocus();
  });
  Array.prototype.slice.call(document.querySelectorAll(".gx-legend li")).forEach(function (li) {
    li.addEventListener("click", function () {
      var group = hidden[li.dataset.group];
      group[li.dataset.k] = !group[li.dataset.k];
      li.classList.toggle("gx-off", group[li.dataset.k]);
      refreshHidden();
    });
  });
  apply();
  clearFocus();
})();
