/* Cairn terminals: a shell on this machine or on a host the runbook names,
   in the page (cairn serve --terminal). Loaded by executor.js on the first
   click of a manual step's Terminal button; it loads xterm.js (vendored in
   the theme: no CDN) and talks to the executor's terminal API
   (docs/executor-api.md, "Terminals"): POST /api/terminals opens one and
   returns a ticket, the WebSocket carries what is typed and shown. A
   terminal survives a reload: this tab attaches to it again. */
(function () {
  "use strict";

  var doc = document;
  var C = window.Cairn, X = C.exec, slug = X.slug;
  var KEY = "cairn:terms:" + slug;

  function T(key, fallback) { return (C.strings || {})[key] || fallback; }
  function $(sel, ctx) { return (ctx || doc).querySelector(sel); }
  function el(tag, cls, text) {
    var e = doc.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }

  var base = X.assets();

  // xterm.js and its fit add-on, once.
  var xtermLoad = null;
  function xterm() {
    if (!xtermLoad) {
      xtermLoad = new Promise(function (done, fail) {
        var css = doc.createElement("link");
        css.rel = "stylesheet";
        css.href = base + "vendor/xterm/xterm.css";
        doc.head.appendChild(css);
        var n = 0;
        ["xterm.js", "addon-fit.js"].forEach(function (f) {
          var s = doc.createElement("script");
          s.src = base + "vendor/xterm/" + f;
          s.async = false; // in order: the add-on after xterm
          s.onload = function () { if (++n === 2) done(); };
          s.onerror = function () { fail(new Error(f + " did not load")); };
          doc.head.appendChild(s);
        });
      });
    }
    return xtermLoad;
  }

  // hosts are the hosts the runbook's host parameters name now.
  function hosts() {
    var vals = C.values ? C.values() : {};
    var out = [];
    ((C.data || {}).params || []).forEach(function (p) {
      if (p.type !== "host" && p.type !== "hosts") return;
      String(vals[p.name] || "").split(/[\s,]+/).forEach(function (h) {
        if (h && out.indexOf(h) < 0) out.push(h);
      });
    });
    return out;
  }

  function remember(list) {
    try { sessionStorage.setItem(KEY, JSON.stringify(list)); } catch (e) {}
  }
  function remembered() {
    try { return JSON.parse(sessionStorage.getItem(KEY) || "[]"); } catch (e) { return []; }
  }

  // open asks where, then opens a terminal for block (a manual step).
  function open(block) {
    var list = hosts();
    var sel = el("select", "term-host");
    sel.setAttribute("aria-label", T("term_where", "Where"));
    [""].concat(list).forEach(function (h) {
      var o = el("option", null, h || T("term_local", "this machine"));
      o.value = h;
      sel.appendChild(o);
    });
    var label = el("label", "term-where", T("term_where", "Where") + " ");
    label.appendChild(sel);
    var title = (block && $(".cb-title", block)) ? $(".cb-title", block).textContent : "";
    C.ask({
      title: T("term_ask", "Open a terminal?") + (title ? " — " + title : ""),
      body: [label, el("p", "term-note", T("term_note", "The session is recorded in the journal; secret values are masked in the record."))],
      yes: T("term_yes", "Open"), cls: "term-ask"
    }).then(function (yes) {
      if (!yes) return;
      var size = guessSize();
      var req = { runbook: slug, host: sel.value, params: C.values({ secrets: true }), cols: size.cols, rows: size.rows };
      if (block) { req.block = block.getAttribute("data-block"); req.hash = block.getAttribute("data-hash"); }
      X.api("/terminals", { method: "POST", body: JSON.stringify(req) }).then(X.json).then(function (info) {
        var list = remembered();
        list.push({ id: info.id, block: info.block || "" });
        remember(list);
        show(info, block);
      }).catch(function (err) {
        var p = panelFor(block);
        p.box.appendChild(el("p", "term-error", T("term_failed", "Could not open a terminal: ") + err.message));
      });
    });
  }

  function guessSize() {
    var w = Math.max(320, ((doc.querySelector("main") || doc.body).clientWidth || 800) - 40);
    return { cols: Math.max(40, Math.min(200, Math.floor(w / 8.4))), rows: 20 };
  }

  function wsURL(id, ticket) {
    var b = X.base();
    var origin = b ? b.replace(/^http/, "ws") : (location.protocol === "https:" ? "wss://" : "ws://") + location.host;
    return origin + "/api/terminals/" + encodeURIComponent(id) + "/ws?ticket=" + encodeURIComponent(ticket);
  }

  // panelFor is the terminal panel under block (or at the top of the
  // page for a terminal that belongs to no block).
  function panelFor(block) {
    var box = el("section", "term-panel");
    var head = el("div", "term-head");
    box.appendChild(head);
    if (block) block.parentNode.insertBefore(box, block.nextSibling);
    else (doc.querySelector("main") || doc.body).prepend(box);
    return { box: box, head: head };
  }

  // show attaches a panel to the open terminal info describes.
  function show(info, block) {
    xterm().then(function () {
      var p = panelFor(block);
      p.box.setAttribute("data-terminal", info.id);
      p.head.appendChild(el("span", "term-title", T("term_on", "Terminal: ") + (info.where || info.host || T("term_local", "this machine"))));
      var actions = el("span", "term-actions");
      p.head.appendChild(actions);
      var screen = el("div", "term-screen");
      p.box.appendChild(screen);
      var status = el("p", "term-status");
      status.setAttribute("role", "status");
      p.box.appendChild(status);

      var term = new window.Terminal({ cursorBlink: true, fontSize: 14, scrollback: 5000, allowProposedApi: false,
        fontFamily: 'ui-monospace, "SFMono-Regular", Menlo, Consolas, "D2Coding", "Noto Sans Mono CJK KR", monospace' });
      var fit = new window.FitAddon.FitAddon();
      term.loadAddon(fit);
      term.open(screen);
      try { fit.fit(); } catch (e) {}
      var ws = null, ended = false;
      var enc = new TextEncoder();

      function end(msg) {
        if (ended) return;
        ended = true;
        status.textContent = msg;
        p.box.classList.add("term-ended");
        remember(remembered().filter(function (t) { return t.id !== info.id; }));
        actions.innerHTML = "";
        var gone = el("button", "term-dismiss", T("close", "Close"));
        gone.type = "button";
        gone.addEventListener("click", function () { term.dispose(); p.box.remove(); });
        actions.appendChild(gone);
        X.reload().catch(function () {});
      }
      function post(what) {
        return X.api("/terminals/" + encodeURIComponent(info.id) + "/" + what, { method: "POST" }).then(X.json);
      }
      if (info.block) {
        var done = el("button", "term-done", T("term_done", "I did this step"));
        done.type = "button";
        done.addEventListener("click", function () { post("done").catch(function (e) { status.textContent = e.message; }); });
        actions.appendChild(done);
      }
      var close = el("button", "term-close", T("term_close", "Close the terminal"));
      close.type = "button";
      close.addEventListener("click", function () { post("close").catch(function (e) { status.textContent = e.message; }); });
      actions.appendChild(close);

      function connect(ticket) {
        ws = new WebSocket(wsURL(info.id, ticket));
        ws.binaryType = "arraybuffer";
        ws.onopen = function () { ws.send(JSON.stringify({ resize: [term.cols, term.rows] })); term.focus(); };
        ws.onmessage = function (ev) {
          if (typeof ev.data === "string") {
            try {
              var m = JSON.parse(ev.data);
              if (m.exit != null) end(T("term_ended", "the shell ended") + " (exit " + m.exit + ")");
            } catch (e) {}
            return;
          }
          term.write(new Uint8Array(ev.data));
        };
        ws.onclose = function (ev) {
          if (ev.code === 4000) { end(T("term_elsewhere", "another tab opened this terminal")); return; }
          if (!ended) end(T("term_ended", "the shell ended"));
        };
      }
      term.onData(function (d) { if (ws && ws.readyState === 1) ws.send(enc.encode(d)); });
      term.onResize(function (s) { if (ws && ws.readyState === 1) ws.send(JSON.stringify({ resize: [s.cols, s.rows] })); });
      if (window.ResizeObserver) new ResizeObserver(function () { try { fit.fit(); } catch (e) {} }).observe(screen);
      connect(info.ticket);
      // For tests and the reader's console: the last terminal shown.
      C.terminal = { id: info.id, term: term, box: p.box };
    });
  }

  // reattach shows this tab's terminals again after a reload: each gets a
  // fresh ticket; one that has ended is forgotten.
  function reattach() {
    remembered().forEach(function (t) {
      X.api("/terminals/" + encodeURIComponent(t.id) + "/attach", { method: "POST" }).then(X.json).then(function (info) {
        show(info, info.block ? doc.getElementById("block-" + info.block) : null);
      }).catch(function () {
        remember(remembered().filter(function (x) { return x.id !== t.id; }));
      });
    });
  }

  window.CairnTerminal = { open: open, reattach: reattach };
})();
