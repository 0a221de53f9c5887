/* Cairn default theme script. Vanilla JS, no dependencies, no network access except
   the site's own search index. Every feature checks for its elements and does nothing
   when they are absent.

   Hooks for other scripts (the executor) on window.Cairn:
     Cairn.ready                 true once the page is set up (also the "cairn:ready" event on document)
     Cairn.values({secrets})     current parameter values by name; secret ones only with {secrets: true}
     Cairn.setParam(name, v)     set a parameter as if the reader typed it
     Cairn.onParams = fn(values) called after every parameter change
     Cairn.enableRun(fn)         make Run buttons live; fn({id, hash, target, element, result, command, values()})
                                 runs after the confirmation that data-confirm asks for
     Cairn.commandText(id)       the displayed (substituted) text of block id
     Cairn.lastCopied            the text of the last copy
     Cairn.setCaptures(map)      captured values (from the executor) for copied commands
     Cairn.fillCommand(id)       a block's paste command (runbook/paste, from #cairn-copy) with values filled in
     Cairn.evalCondition(cond, values), Cairn.progress(), Cairn.search(q), Cairn.copy(text), Cairn.setTheme(t)
   The executor's base URL, when a local executor serves the page, is <html data-executor>. */
(function () {
  "use strict";

  var doc = document;
  var html = doc.documentElement;
  var Cairn = (window.Cairn = window.Cairn || {});
  var ROOT = html.getAttribute("data-root") || "./";
  var IS_FILE = location.protocol === "file:";

  // ---------- small helpers ----------
  function $(sel, ctx) { return (ctx || doc).querySelector(sel); }
  function $$(sel, ctx) { return Array.prototype.slice.call((ctx || doc).querySelectorAll(sel)); }
  function on(el, ev, fn, opt) { if (el) el.addEventListener(ev, fn, opt); }
  function el(tag, cls, text) {
    var e = doc.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }
  function readJSON(id) {
    var node = doc.getElementById(id);
    if (!node) return null;
    try {
      var v = JSON.parse(node.textContent || "null");
      // Tolerate a JSON document emitted as a JSON string.
      if (typeof v === "string") v = JSON.parse(v);
      return v;
    } catch (e) { return null; }
  }
  var store = {
    get: function (k) {
      try { var v = localStorage.getItem(k); return v == null ? null : JSON.parse(v); } catch (e) { return null; }
    },
    set: function (k, v) { try { localStorage.setItem(k, JSON.stringify(v)); } catch (e) { /* private mode, quota */ } },
    del: function (k) { try { localStorage.removeItem(k); } catch (e) {} }
  };

  var T = readJSON("cairn-i18n") || {};
  function t(key, fallback) { return T[key] || fallback || key; }
  var DATA = readJSON("cairn-data") || {};
  var articleEl = $(".runbook");
  var SLUG = DATA.slug || (articleEl && articleEl.getAttribute("data-slug")) || html.getAttribute("data-slug") || "";

  Cairn.version = 1;
  Cairn.data = DATA;
  Cairn.strings = T;
  Cairn.lastCopied = null;

  // Pretty URLs (slug/) do not open index.html from file://: add it there.
  function pageURL(slug, hash) {
    return ROOT + slug + "/" + (IS_FILE ? "index.html" : "") + (hash ? "#" + hash : "");
  }

  var live;
  function announce(msg) {
    if (!live) {
      live = el("div", "visually-hidden");
      live.setAttribute("aria-live", "polite");
      live.setAttribute("role", "status");
      doc.body.appendChild(live);
    }
    live.textContent = "";
    setTimeout(function () { live.textContent = msg; }, 30);
  }

  function isEditable(node) {
    if (!node || node === doc.body) return false;
    var tag = node.tagName;
    if (tag === "INPUT") return !/^(checkbox|radio|button|submit|reset|range|color|file)$/.test(node.type);
    return tag === "TEXTAREA" || tag === "SELECT" || node.isContentEditable;
  }

  // ---------- file:// links ----------
  function fixFileLinks() {
    if (!IS_FILE) return;
    $$("a[href]").forEach(function (a) {
      var h = a.getAttribute("href");
      if (/^[a-z][a-z0-9+.-]*:|^#|^\//i.test(h)) return;
      var m = /^([^?#]*)([?#].*)?$/.exec(h);
      if (m && (m[1] === "" || /\/$/.test(m[1]) || m[1] === "." || m[1] === "..")) {
        var path = m[1] === "" ? "./" : m[1].replace(/^(\.\.?)$/, "$1/");
        a.setAttribute("href", path + "index.html" + (m[2] || ""));
      }
    });
  }

  // ---------- theme ----------
  function initTheme() {
    var btn = $(".theme-toggle");
    function current() { return html.getAttribute("data-theme") === "dark" ? "dark" : "light"; }
    function apply(theme, save) {
      html.setAttribute("data-theme", theme);
      if (btn) btn.setAttribute("aria-pressed", theme === "dark" ? "true" : "false");
      if (save) { try { localStorage.setItem("cairn:theme", theme); } catch (e) {} }
    }
    apply(current(), false);
    on(btn, "click", function () { apply(current() === "dark" ? "light" : "dark", true); });
    if (window.matchMedia) {
      var mq = matchMedia("(prefers-color-scheme: dark)");
      var follow = function (e) {
        var saved = null;
        try { saved = localStorage.getItem("cairn:theme"); } catch (err) {}
        if (saved !== "light" && saved !== "dark") apply(e.matches ? "dark" : "light", false);
      };
      if (mq.addEventListener) mq.addEventListener("change", follow);
    }
    Cairn.setTheme = function (theme) { apply(theme === "dark" ? "dark" : "light", true); };
  }

  // ---------- compact navigation ----------
  // Large sites list only the current runbook in each page; the others come
  // from nav.js, which calls this when it loads (it may load before or after
  // this script runs).
  Cairn.fillNav = function () {
    var list = $("#sidebar ul.nav-runbooks[data-compact]");
    if (!list || list.getAttribute("data-filled") || !Array.isArray(window.CAIRN_NAV)) return;
    list.setAttribute("data-filled", "true");
    var current = $(".nav-runbook.current", list), all = $(".nav-all", list);
    var frag = doc.createDocumentFragment();
    window.CAIRN_NAV.forEach(function (r) {
      if (current && r.slug === current.getAttribute("data-slug")) {
        list.insertBefore(frag, current);
        frag = doc.createDocumentFragment();
        return;
      }
      var li = el("li", "nav-runbook");
      li.setAttribute("data-slug", r.slug);
      var a = el("a", null, r.title);
      a.href = ROOT + r.slug + "/" + (IS_FILE ? "index.html" : "");
      li.appendChild(a);
      frag.appendChild(li);
    });
    list.insertBefore(frag, all);
    if (all) all.remove();
  };

  // ---------- sidebar (phone menu) ----------
  function initSidebar() {
    var btn = $(".menu-toggle"), side = $("#sidebar"), backdrop = $(".sidebar-backdrop");
    if (!btn || !side) return;
    function set(open) {
      doc.body.classList.toggle("sidebar-open", open);
      btn.setAttribute("aria-expanded", open ? "true" : "false");
      if (backdrop) backdrop.hidden = !open;
      if (open) {
        var cur = $("a[aria-current]", side) || $("a", side);
        if (cur) cur.focus();
      }
    }
    on(btn, "click", function () { set(!doc.body.classList.contains("sidebar-open")); });
    on(backdrop, "click", function () { set(false); });
    on(side, "click", function (e) { if (e.target.closest("a")) set(false); });
    on(doc, "keydown", function (e) {
      if (e.key === "Escape" && doc.body.classList.contains("sidebar-open")) { set(false); btn.focus(); }
    });
    Cairn.fillNav();
    // Scroll the current runbook into view in a long sidebar: in the first
    // frame, since reading a position now would lay out the whole page
    // before DOMContentLoaded.
    var cur = $(".nav-runbook.current", side);
    if (cur) requestAnimationFrame(function () {
      if (cur.offsetTop > side.clientHeight - 80) side.scrollTop = cur.offsetTop - 40;
    });
  }

  // ---------- conditions ----------
  // The tree from docs/theme.md: {"var":X} {"str":s} {"op":"!","x":…} {"op":"&&"|"||"|"=="|"!=","l":…,"r":…}.
  // Unknown shapes evaluate to true, so a renderer change never hides content.
  function condValue(n, v) {
    if (n && typeof n === "object") {
      if ("var" in n) return v[n["var"]] == null ? "" : String(v[n["var"]]);
      if ("str" in n) return String(n.str);
    }
    return condEval(n, v) ? "true" : "false";
  }
  function condEval(n, v) {
    if (!n || typeof n !== "object") return true;
    if ("var" in n) return v[n["var"]] === "true";
    if ("str" in n) return n.str !== "";
    switch (n.op) {
      case "!": return !condEval(n.x, v);
      case "&&": return condEval(n.l, v) && condEval(n.r, v);
      case "||": return condEval(n.l, v) || condEval(n.r, v);
      case "==": return condValue(n.l, v) === condValue(n.r, v);
      case "!=": return condValue(n.l, v) !== condValue(n.r, v);
    }
    return true;
  }
  Cairn.evalCondition = function (cond, values) {
    if (typeof cond === "string") { try { cond = JSON.parse(cond); } catch (e) { return true; } }
    return condEval(cond, values || Cairn.values());
  };

  // ---------- parameters ----------
  var params = []; // {name, type, secret, required, re, control, wrap, error, touched}
  var byName = {};
  var form = $("form.params");
  var PARAM_KEY = "cairn:" + SLUG + ":params";

  function re2ToJS(src) {
    // RE2 and JS agree on the common subset; translate the few RE2-only forms.
    var flags = "u";
    var m = /^\(\?([imsU]+)\)/.exec(src);
    if (m) {
      src = src.slice(m[0].length);
      if (m[1].indexOf("i") >= 0) flags += "i";
      if (m[1].indexOf("s") >= 0) flags += "s";
      if (m[1].indexOf("m") >= 0) flags += "m";
    }
    src = src.replace(/\(\?P</g, "(?<").replace(/\\A/g, "^").replace(/\\z/g, "$");
    try { return new RegExp(src, flags); } catch (e) {
      try { return new RegExp(src, flags.replace("u", "")); } catch (e2) { return null; }
    }
  }

  var HOST = /^(?:[^\s@:/]+@)?(?:\[[0-9A-Fa-f:.]+\](?::[1-9]\d{0,4})?|[0-9A-Fa-f]*:[0-9A-Fa-f:.]+|[A-Za-z0-9_](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?(?::[1-9]\d{0,4})?)$/;
  var CIDR4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/;
  var CIDR6 = /^[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*\/(\d{1,3})$/;
  var DURATION = /^(?:0|[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+)$/;
  function splitHosts(v) { return v.split(/[\s,]+/).filter(Boolean); }
  function typeOK(type, v, p) {
    switch (type) {
      case "int": return /^[+-]?\d+$/.test(v);
      case "bool": return v === "true" || v === "false";
      case "enum": return $$("option", p.control).some(function (o) { return o.value === v && v !== ""; });
      case "host": return HOST.test(v);
      case "hosts": var hs = splitHosts(v); return hs.length > 0 && hs.every(function (h) { return HOST.test(h); });
      case "cidr":
        var m4 = CIDR4.exec(v);
        if (m4) return +m4[1] < 256 && +m4[2] < 256 && +m4[3] < 256 && +m4[4] < 256 && +m4[5] <= 32;
        var m6 = CIDR6.exec(v);
        return !!m6 && +m6[1] <= 128;
      case "duration": return DURATION.test(v);
    }
    return true;
  }
  function validate(p) {
    var v = readControl(p);
    if (v === "") return p.required ? { msg: t("required", "Required") } : null;
    // Say what is wanted in words, with an example (the default) where
    // there is one; the raw pattern only as the last detail.
    var eg = p.example && p.example !== v ? " " + t("for_example", "e.g.") + " " + p.example : "";
    if (!typeOK(p.type, v, p)) return { msg: t("invalid_" + p.type, t("invalid", "Invalid value")) + eg };
    if (p.re) {
      var parts = p.type === "hosts" ? splitHosts(v) : [v];
      for (var i = 0; i < parts.length; i++) {
        p.re.lastIndex = 0;
        if (!p.re.test(parts[i])) return { msg: t("invalid_pattern", "Not in the expected form") + eg + " —", hint: p.pattern };
      }
    }
    return null;
  }
  function showValidity(p, force) {
    var err = validate(p);
    p.valid = !err;
    if (!p.error) return;
    if (err && (p.touched || force)) {
      p.control.setAttribute("aria-invalid", "true");
      p.error.textContent = "";
      p.error.appendChild(doc.createTextNode(err.msg));
      if (err.hint) {
        p.error.appendChild(doc.createTextNode(" "));
        p.error.appendChild(el("code", null, err.hint));
      }
      p.error.hidden = false;
    } else {
      p.control.removeAttribute("aria-invalid");
      p.error.hidden = true;
      p.error.textContent = "";
    }
  }
  function readControl(p) {
    var c = p.control;
    if (c.type === "checkbox") return c.checked ? "true" : "false";
    return c.value.trim();
  }
  function writeControl(p, v) {
    var c = p.control;
    if (c.type === "checkbox") c.checked = v === true || v === "true";
    else if (c.tagName === "SELECT") {
      if ($$("option", c).some(function (o) { return o.value === v; })) c.value = v;
    } else c.value = v == null ? "" : v;
  }

  // All current values by name; secret values only when asked (for the executor).
  Cairn.values = function (opts) {
    var out = {};
    params.forEach(function (p) {
      if (p.secret && !(opts && opts.secrets)) return;
      out[p.name] = readControl(p);
    });
    return out;
  };
  Cairn.params = function () { return Cairn.values(); };
  Cairn.setParam = function (name, value) {
    var p = byName[name];
    if (!p) return false;
    writeControl(p, value);
    p.touched = true;
    update(name);
    saveParams();
    return true;
  };

  function saveParams() {
    if (!SLUG) return;
    var v = {};
    params.forEach(function (p) { if (!p.secret) v[p.name] = readControl(p); });
    store.set(PARAM_KEY, v);
  }

  function initParams() {
    if (!form) return;
    $$(".param", form).forEach(function (wrap) {
      var c = $("input[name], select[name]", wrap);
      if (!c) return;
      var secret = c.getAttribute("data-secret") === "true" || c.type === "password" || wrap.classList.contains("param-secret");
      var pattern = c.getAttribute("data-pattern") || c.getAttribute("pattern") || "";
      if (c.hasAttribute("pattern")) { c.setAttribute("data-pattern", pattern); c.removeAttribute("pattern"); }
      var p = {
        name: c.name, type: c.getAttribute("data-type") || (c.tagName === "SELECT" ? "enum" : c.type === "checkbox" ? "bool" : "string"),
        secret: secret, required: c.required || c.getAttribute("aria-required") === "true",
        pattern: pattern, re: pattern ? re2ToJS(pattern) : null,
        control: c, wrap: wrap, error: $(".param-error", wrap), touched: false, valid: true,
        example: c.getAttribute("data-default") || c.defaultValue || ""
      };
      if (secret) { c.value = ""; c.setAttribute("autocomplete", "new-password"); }
      params.push(p);
      byName[p.name] = p;
    });
    // Restore stored non-secret values over the defaults.
    var saved = store.get(PARAM_KEY);
    if (saved && typeof saved === "object") {
      params.forEach(function (p) {
        if (!p.secret && Object.prototype.hasOwnProperty.call(saved, p.name)) writeControl(p, String(saved[p.name]));
      });
    }
    on(form, "input", onEdit);
    on(form, "change", onEdit);
    on(form, "focusout", function (e) {
      var p = e.target && byName[e.target.name];
      if (p) { p.touched = true; showValidity(p); }
    });
    on(form, "submit", function (e) { e.preventDefault(); params.forEach(function (p) { showValidity(p, true); }); });
    on($(".params-reset", form), "click", function () {
      params.forEach(function (p) {
        var d = p.control.getAttribute("data-default");
        if (p.control.type === "checkbox") p.control.checked = d === "true";
        else if (p.control.tagName === "SELECT") writeControl(p, d || (p.control.options[0] && p.control.options[0].value) || "");
        else p.control.value = p.secret ? "" : (d || "");
        p.touched = false;
      });
      store.del(PARAM_KEY);
      update();
    });
    params.forEach(function (p) { showValidity(p); });
  }

  function onEdit(e) {
    var p = e.target && byName[e.target.name];
    if (!p) return;
    if (e.type === "change") p.touched = true;
    showValidity(p);
    update(p.name);
    saveParams();
  }

  // ---------- substitution, conditions, tabs: everything that follows the values ----------
  var prmSpans = [];
  function substitute(changed) {
    var vals = Cairn.values();
    prmSpans.forEach(function (s) {
      var name = s.getAttribute("data-p");
      var p = byName[name];
      var orig = s.getAttribute("data-orig");
      // An invalid value is not put into commands: the reference stays.
      var v = p && !p.secret && p.valid !== false ? vals[name] : null;
      if (p && p.secret) s.classList.add("prm-secret");
      if (v != null && v !== "") {
        if (!s.classList.contains("prm-set") || s.textContent !== v) {
          s.textContent = v;
          if (changed === name) { s.classList.remove("prm-flash"); void s.offsetWidth; s.classList.add("prm-flash"); }
        }
        s.classList.add("prm-set");
      } else if (s.classList.contains("prm-set") || s.textContent !== orig) {
        // Put back the original markup (the highlighter's token spans).
        s.innerHTML = s._orig != null ? s._orig : "";
        if (s.textContent !== orig) s.textContent = orig;
        s.classList.remove("prm-set");
      }
    });
  }

  var condEls = [];
  function applyConditions() {
    var vals = Cairn.values({ secrets: true });
    condEls.forEach(function (c) {
      var ok = condEval(c.cond, vals);
      c.el.classList.toggle("is-na", !ok);
      if (c.badge) c.badge.hidden = ok;
      if (ok) c.el.removeAttribute("data-na"); else c.el.setAttribute("data-na", "true");
      var id = c.el.getAttribute("data-step");
      if (id && c.el.classList.contains("step")) {
        $$('li[data-step="' + cssEsc(id) + '"]').forEach(function (li) { li.classList.toggle("na", !ok); });
      }
    });
  }
  function cssEsc(s) { return window.CSS && CSS.escape ? CSS.escape(s) : String(s).replace(/["\\]/g, "\\$&"); }

  // Plain-text bodies (manual steps) may come without reference spans: wrap
  // $NAME and ${NAME} of declared parameters and captures there.
  function wrapPlainRefs() {
    var known = {};
    params.forEach(function (p) { known[p.name] = true; });
    var blocks = DATA.blocks || {};
    Object.keys(blocks).forEach(function (id) { (blocks[id].captures || []).forEach(function (c) { known[c] = true; }); });
    if (!Object.keys(known).length) return;
    var re = /\$(?:\{([A-Z][A-Z0-9_]*)\}|([A-Z][A-Z0-9_]*))/g;
    $$(".cb > pre > code").forEach(function (code) {
      if ($(".prm", code)) return;
      if (code.className && !/\blanguage-(text|plain|plaintext|txt|none)\b/.test(code.className)) return;
      var walker = doc.createTreeWalker(code, NodeFilter.SHOW_TEXT), nodes = [], n;
      while ((n = walker.nextNode())) nodes.push(n);
      nodes.forEach(function (node) {
        var text = node.nodeValue, last = 0, m, frag = null;
        re.lastIndex = 0;
        while ((m = re.exec(text))) {
          var name = m[1] || m[2];
          if (!known[name]) continue;
          frag = frag || doc.createDocumentFragment();
          if (m.index > last) frag.appendChild(doc.createTextNode(text.slice(last, m.index)));
          var span = el("span", "prm", m[0]);
          span.setAttribute("data-p", name);
          frag.appendChild(span);
          last = m.index + m[0].length;
        }
        if (!frag) return;
        if (last < text.length) frag.appendChild(doc.createTextNode(text.slice(last)));
        node.parentNode.replaceChild(frag, node);
      });
    });
  }

  function initSubstitution() {
    wrapPlainRefs();
    prmSpans = $$("span.prm[data-p]");
    prmSpans.forEach(function (s) {
      if (!s.hasAttribute("data-orig")) s.setAttribute("data-orig", s.textContent);
      s._orig = s.innerHTML;
      s.title = s.getAttribute("data-orig");
    });
    $$("[data-when]").forEach(function (node) {
      var cond;
      try { cond = JSON.parse(node.getAttribute("data-when")); } catch (e) { return; }
      if (!cond) return;
      // The badge opens the collapsed step or block (a reader may still
      // want to read what the other choice would do).
      var badge = el("button", "na-badge", t("not_applicable", "Not applicable"));
      badge.type = "button";
      badge.setAttribute("aria-expanded", "false");
      badge.addEventListener("click", function () {
        var open = node.classList.toggle("na-open");
        badge.setAttribute("aria-expanded", String(open));
        if (Cairn.scrollables) Cairn.scrollables();
      });
      badge.hidden = true;
      var host = node.classList.contains("step") ? $(".step-title", node) : $(".cb-head", node);
      if (host) {
        var before = null;
        Array.prototype.some.call(host.children, function (c) {
          if (c.classList.contains("cb-actions") || c.classList.contains("cb-copy") || c.classList.contains("step-done")) { before = c; return true; }
          return false;
        });
        host.insertBefore(badge, before);
      } else badge = null;
      condEls.push({ el: node, cond: cond, badge: badge });
    });
  }

  function update(changed) {
    substitute(changed);
    applyConditions();
    syncTabsFromParams();
    applyRelevance();
    updateProgress();
    markInvalidRuns();
    if (Cairn.scrollables) Cairn.scrollables();
    if (typeof Cairn.onParams === "function") {
      try { Cairn.onParams(Cairn.values()); } catch (e) { console.error(e); }
    }
  }

  // applyRelevance hides the form's parameters that the current choice does
  // not use (every place that refers to them is in a step, block or tab that
  // does not apply), behind one line that can show them again.
  var naNote = null;
  function applyRelevance() {
    var form = $("form.params");
    if (!form) return;
    var hidden = 0;
    $$(".param[data-name]", form).forEach(function (row) {
      var name = row.getAttribute("data-name");
      var refs = $$('span.prm[data-p="' + cssEsc(name) + '"]').filter(function (s) { return !s.closest("form"); });
      var na = refs.length > 0 && refs.every(function (s) { return !!s.closest(".is-na, [hidden]"); });
      row.classList.toggle("param-na", na);
      if (na) hidden++;
    });
    if (!naNote) {
      naNote = el("p", "params-na");
      var text = el("span", "params-na-text");
      var btn = el("button", "btn btn-ghost btn-small params-na-toggle", t("show", "Show"));
      btn.type = "button";
      btn.setAttribute("aria-expanded", "false");
      btn.addEventListener("click", function () {
        var open = form.classList.toggle("show-na");
        btn.setAttribute("aria-expanded", String(open));
        btn.textContent = open ? t("hide", "Hide") : t("show", "Show");
      });
      naNote.appendChild(text);
      naNote.appendChild(doc.createTextNode(" "));
      naNote.appendChild(btn);
      ($(".params-grid", form) || form).after(naNote);
    }
    naNote.hidden = hidden === 0;
    $(".params-na-text", naNote).textContent = t("na_hidden", "%d parameters not used by the current choice are hidden").replace("%d", hidden);
  }

  // ---------- tabs ----------
  var tabSets = [];
  function initTabs() {
    $$(".tabs").forEach(function (box, n) {
      var list = $(".tab-list", box);
      if (!list) return;
      var tabs = $$('[role="tab"], .tab', list).filter(function (b, i, a) { return a.indexOf(b) === i; });
      var panels = Array.prototype.filter.call(box.children, function (c) { return c.classList.contains("tab-panel"); });
      if (!tabs.length) return;
      list.setAttribute("role", "tablist");
      var set = { box: box, tabs: tabs, panels: panels, param: box.getAttribute("data-param") || "" };
      tabs.forEach(function (tab, i) {
        tab.setAttribute("role", "tab");
        if (!tab.id) tab.id = "cairn-tab-" + n + "-" + i;
        var panel = panelFor(set, tab, i);
        if (panel) {
          if (!panel.id) panel.id = "cairn-panel-" + n + "-" + i;
          tab.setAttribute("aria-controls", panel.id);
          panel.setAttribute("role", "tabpanel");
          panel.setAttribute("aria-labelledby", tab.id);
          panel.setAttribute("data-label", tab.textContent.trim());
        }
        on(tab, "click", function () { selectTab(set, tab, true); });
      });
      on(list, "keydown", function (e) {
        var i = tabs.indexOf(doc.activeElement);
        if (i < 0) return;
        var j = -1;
        if (e.key === "ArrowRight" || e.key === "ArrowDown") j = (i + 1) % tabs.length;
        else if (e.key === "ArrowLeft" || e.key === "ArrowUp") j = (i - 1 + tabs.length) % tabs.length;
        else if (e.key === "Home") j = 0;
        else if (e.key === "End") j = tabs.length - 1;
        if (j < 0) return;
        e.preventDefault();
        tabs[j].focus();
        selectTab(set, tabs[j], true);
      });
      if (set.param) {
        var p = byName[set.param];
        list.setAttribute("data-param-label", "$" + set.param);
        if (p) box.setAttribute("data-bound", "true");
      }
      var selected = tabs.filter(function (b) { return b.getAttribute("aria-selected") === "true"; })[0] || tabs[0];
      selectTab(set, selected, false);
      tabSets.push(set);
    });
  }
  function panelFor(set, tab, i) {
    var id = tab.getAttribute("aria-controls");
    var p = id && doc.getElementById(id);
    if (p) return p;
    var v = tab.getAttribute("data-value");
    if (v != null) {
      p = set.panels.filter(function (x) { return x.getAttribute("data-value") === v; })[0];
      if (p) return p;
    }
    return set.panels[i] || null;
  }
  function selectTab(set, tab, byUser) {
    set.tabs.forEach(function (b, i) {
      var sel = b === tab;
      b.setAttribute("aria-selected", sel ? "true" : "false");
      b.tabIndex = sel ? 0 : -1;
      var panel = panelFor(set, b, i);
      if (panel) panel.hidden = !sel;
    });
    if (Cairn.scrollables) Cairn.scrollables(); // the panel shown may scroll
    if (byUser && set.param && byName[set.param]) {
      var v = tab.getAttribute("data-value");
      if (v != null && Cairn.values({ secrets: true })[set.param] !== v) Cairn.setParam(set.param, v);
    }
  }
  function syncTabsFromParams() {
    if (!tabSets.length) return;
    var vals = Cairn.values();
    tabSets.forEach(function (set) {
      if (!set.param || !(set.param in vals)) return;
      var v = vals[set.param];
      var tab = set.tabs.filter(function (b) { return b.getAttribute("data-value") === v; })[0];
      if (tab && tab.getAttribute("aria-selected") !== "true") selectTab(set, tab, false);
    });
  }

  // ---------- steps and progress ----------
  var DONE_KEY = "cairn:" + SLUG + ":done";
  var stepBoxes = [];
  function doneSet() {
    var v = store.get(DONE_KEY);
    return Array.isArray(v) ? v : [];
  }
  function initSteps() {
    stepBoxes = $$("input.step-done[data-step]");
    if (!stepBoxes.length) return;
    loadDone();
    on(doc, "change", function (e) {
      var box = e.target;
      if (!box.classList || !box.classList.contains("step-done")) return;
      var ids = stepBoxes.filter(function (b) { return b.checked; }).map(function (b) { return b.getAttribute("data-step"); });
      store.set(DONE_KEY, ids);
      markDone();
      updateProgress();
    });
    $$(".progress-reset").forEach(function (btn) {
      on(btn, "click", function () {
        if (!window.confirm(t("reset_confirm", "Reset progress?"))) return;
        store.del(DONE_KEY);
        stepBoxes.forEach(function (b) { b.checked = false; });
        markDone();
        updateProgress();
        announce(t("progress", "Progress") + " " + progressText());
      });
    });
    on(window, "storage", function (e) { if (e.key === DONE_KEY) { loadDone(); updateProgress(); } });
  }
  function loadDone() {
    var done = doneSet();
    stepBoxes.forEach(function (b) { b.checked = done.indexOf(b.getAttribute("data-step")) >= 0; });
    markDone();
  }
  function markDone() {
    stepBoxes.forEach(function (b) {
      var id = b.getAttribute("data-step");
      var sec = b.closest(".step");
      if (sec) sec.classList.toggle("is-done", b.checked);
      $$('li[data-step="' + cssEsc(id) + '"]').forEach(function (li) { li.classList.toggle("done", b.checked); });
    });
  }
  function counts() {
    var total = 0, done = 0;
    stepBoxes.forEach(function (b) {
      var sec = b.closest(".step");
      if (sec && sec.classList.contains("is-na")) return;
      total++;
      if (b.checked) done++;
    });
    return { total: total, done: done };
  }
  function progressText() { var c = counts(); return c.done + "/" + c.total; }
  function updateProgress() {
    var bars = $$("[data-progress]");
    if (!bars.length || !stepBoxes.length) return;
    var c = counts();
    var pct = c.total ? Math.round((c.done / c.total) * 100) : 0;
    bars.forEach(function (bar) {
      var count = $("[data-progress-count]", bar);
      if (count) count.textContent = c.done + "/" + c.total;
      var track = $('[role="progressbar"]', bar);
      if (track) {
        track.setAttribute("aria-valuemax", String(c.total));
        track.setAttribute("aria-valuenow", String(c.done));
        track.setAttribute("aria-valuetext", c.done + "/" + c.total);
      }
      var fill = $(".progress-fill", bar);
      if (fill) fill.style.width = pct + "%";
      bar.classList.toggle("complete", c.total > 0 && c.done === c.total);
    });
  }
  Cairn.progress = counts;

  // ---------- copy ----------
  function commandText(block) {
    var pre = $(".lntable td:last-child pre", block);
    if (!pre) {
      pre = $$("pre", block).filter(function (p) { return !p.closest(".cb-result, .cb-recorded, details"); })[0];
    }
    if (!pre) return "";
    var code = $("code", pre) || pre;
    var clone = code.cloneNode(true);
    $$(".ln, .lnt", clone).forEach(function (n) { n.remove(); });
    return clone.textContent.replace(/\n+$/, "");
  }
  Cairn.commandText = function (id) {
    var b = doc.querySelector('.cb[data-block="' + cssEsc(id) + '"]') || doc.getElementById("block-" + id);
    return b ? commandText(b) : "";
  };
  function fallbackCopy(text) {
    var ta = el("textarea");
    ta.value = text;
    ta.setAttribute("readonly", "");
    ta.style.position = "fixed";
    ta.style.top = "-1000px";
    ta.style.opacity = "0";
    doc.body.appendChild(ta);
    var active = doc.activeElement;
    ta.select();
    var ok = false;
    try { ok = doc.execCommand("copy"); } catch (e) { ok = false; }
    ta.remove();
    if (active && active.focus) active.focus();
    return ok;
  }
  function copyText(text) {
    Cairn.lastCopied = text;
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text).then(function () { return true; }, function () { return fallbackCopy(text); });
    }
    return Promise.resolve(fallbackCopy(text));
  }
  Cairn.copy = copyText;
  function initCopy() {
    on(doc, "click", function (e) {
      var btn = e.target.closest && e.target.closest(".cb-copy");
      if (!btn) return;
      var block = btn.closest(".cb");
      if (!block) return;
      var tmpl = copyTemplate(block);
      var text = tmpl ? fillTemplate(tmpl, copyValues()) : commandText(block);
      copyText(text).then(function (ok) {
        feedback(btn, ok !== false);
      });
    });
  }
  // fillCommand fills a block's paste template (data-copy, built by the
  // runbook/paste package) with the form's values and the captured ones, by
  // the rules of paste.Template.Fill: a value is one single-quoted shell word
  // ($'...' when it holds a newline), hosts are ssh destinations, a kube
  // body's values are JSON-escaped in their strings; a value not known yet
  // (or secret) is named with where it comes from, never left as a bare $VAR.
  function shq(v) {
    if (!/[\x00-\x1f\x7f]/.test(v)) return "'" + v.replace(/'/g, "'\\''") + "'";
    var o = "$'";
    for (var i = 0; i < v.length; i++) {
      var ch = v[i], c = v.charCodeAt(i);
      if (ch === "\\") o += "\\\\";
      else if (ch === "'") o += "\\'";
      else if (ch === "\n") o += "\\n";
      else if (ch === "\t") o += "\\t";
      else if (c < 32 || c === 127) o += "\\x" + (c < 16 ? "0" : "") + c.toString(16);
      else o += ch;
    }
    return o + "'";
  }
  function shWord(v) { return /^[A-Za-z0-9@%+=:,.\/_-]+$/.test(v) ? v : "'" + v.replace(/'/g, "'\\''") + "'"; }
  function jsonEsc(v) {
    var o = "";
    for (var i = 0; i < v.length; i++) {
      var ch = v[i], c = v.charCodeAt(i);
      if (ch === "\\") o += "\\\\";
      else if (ch === '"') o += '\\"';
      else if (c < 32) o += "\\u00" + (c < 16 ? "0" : "") + c.toString(16);
      else o += ch;
    }
    return o;
  }
  function dqEsc(s) { return s.replace(/[\\"$`]/g, function (c) { return "\\" + c; }); }
  function destination(h) {
    var m = /^(.+@)?\[([^\]]+)\]:([0-9]+)$/.exec(h);
    if (m) return "ssh://" + (m[1] || "") + "[" + m[2] + "]:" + m[3];
    m = /^(.+@)?([^:\[\]@]+):([0-9]+)$/.exec(h);
    if (m) return "ssh://" + (m[1] || "") + m[2] + ":" + m[3];
    return h;
  }
  var CAPS = {}, HELD = {};
  // Cairn.setCaptures(map): values earlier blocks captured (secret ones come
  // masked and are left out); copied commands use them. HELD: every name
  // the executor holds a value for, secret ones too.
  Cairn.setCaptures = function (m) {
    Object.keys(m || {}).forEach(function (k) { HELD[k] = true; if (m[k] !== "••••") CAPS[k] = m[k]; });
  };
  // capturedFrom lists, for the values from earlier blocks a block reads,
  // where each comes from: "$JOIN_TOKEN ← init-stacked, refresh-token
  // (secret: shown masked)", so that a confirmation names them.
  function capturedFrom(id) {
    var blocks = DATA.blocks || {}, me = blocks[id];
    if (!me) return [];
    var params = {};
    (DATA.params || []).forEach(function (p) { params[p.name] = true; });
    return (me.refs || []).filter(function (r) { return !params[r]; }).map(function (name) {
      var by = Object.keys(blocks).filter(function (b) { return (blocks[b].captures || []).indexOf(name) >= 0; });
      var line = "$" + name + " ← " + by.join(", ");
      if (!HELD[name]) line += " " + t("capture_missing", "(not captured yet: run one of them first)");
      else if (!(name in CAPS)) line += " " + t("capture_secret", "(secret: masked here, the executor has it)");
      return line;
    });
  }
  function fillTemplate(tmpl, vals) {
    var out = "", vars = tmpl.n || {};
    function unknown(name) {
      var info = vars[name] || { from: name };
      if (info.secret) return name + " is secret (" + info.from + ") and not copied: set it in this shell first (read -rs " + name + ")";
      if (info.from.indexOf("parameter ") === 0) return name + " has no value: give it in the parameters and copy again, or set it in this shell";
      return name + " is not known yet: it is " + info.from + "; run that first, or set " + name + " in this shell";
    }
    var segs = tmpl.s || [];
    for (var i = 0; i < segs.length; i++) {
      var s = segs[i];
      if (!s.v) { out += s.t || ""; continue; }
      var info = vars[s.v] || {}, has = Object.prototype.hasOwnProperty.call(vals, s.v) && vals[s.v] != null && !info.secret;
      var v = has ? String(vals[s.v]) : "";
      if (s.k === "sh") {
        out += has ? shq(v) : '"${' + s.v + ":?" + dqEsc(unknown(s.v)) + '}"';
      } else if (s.k === "hosts") {
        var hs = v.split(/[ ,\t\n]+/).filter(Boolean);
        out += has && hs.length ? hs.map(function (h) { return shWord(destination(h)); }).join(" ") : "${" + s.v + ":?" + dqEsc(unknown(s.v)) + "}";
      } else {
        if (!has) {
          return "# Not copied: this block's manifest needs " + unknown(s.v).replace(/\n/g, " ") +
            ".\n# A manifest takes its values when it is copied: run that block first (or fill in the value), then copy again.\n";
        }
        if (s.k === "jp" && /^(true|false|-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?)$/.test(v)) out += v;
        else if (s.k === "jp") out += '"' + jsonEsc(v) + '"';
        else out += jsonEsc(v);
      }
    }
    return out;
  }
  Cairn.fillTemplate = fillTemplate;
  // copyTemplate is a block's paste template, from the page's one JSON of
  // them (#cairn-copy; blocks that have one carry data-copy).
  var COPIES = null;
  function copyTemplate(block) {
    if (!block.hasAttribute("data-copy")) return null;
    if (!COPIES) {
      var s = doc.getElementById("cairn-copy");
      try { COPIES = s ? JSON.parse(s.textContent) : {}; } catch (e) { COPIES = {}; }
    }
    return COPIES[block.getAttribute("data-block")] || null;
  }
  function copyValues() { return Object.assign({}, CAPS, Cairn.values()); }
  // fillCommand(id): block id's command as Copy gives it now.
  function fillCommand(id) {
    var b = doc.querySelector('.cb[data-block="' + cssEsc(id) + '"]');
    var t = b && copyTemplate(b);
    return t ? fillTemplate(t, copyValues()) : "";
  }
  Cairn.fillCommand = fillCommand;
  function feedback(btn, ok) {
    if (!btn._label) btn._label = btn.innerHTML;
    clearTimeout(btn._timer);
    var msg = ok ? t("copied", "Copied") : t("copy", "Copy") + " ✗";
    btn.textContent = msg;
    btn.classList.toggle("copied", ok);
    announce(msg);
    btn._timer = setTimeout(function () {
      btn.innerHTML = btn._label;
      btn.classList.remove("copied");
    }, 1600);
  }

  // ---------- run (wired by the executor later) ----------
  function initRun() {
    $$(".cb-run").forEach(function (btn) {
      if (btn.disabled) {
        // Keep it focusable so keyboard users can read why it is inert.
        btn.disabled = false;
        btn.setAttribute("aria-disabled", "true");
        if (!btn.title) btn.title = t("run_disabled", "");
        btn.setAttribute("data-tip", btn.title);
      }
    });
    on(doc, "click", function (e) {
      var btn = e.target.closest && e.target.closest(".cb-run");
      if (!btn) return;
      var block = btn.closest(".cb");
      if (btn.getAttribute("aria-disabled") === "true" || typeof Cairn.onRun !== "function") {
        e.preventDefault();
        btn.classList.add("show-tip");
        clearTimeout(btn._tip);
        btn._tip = setTimeout(function () { btn.classList.remove("show-tip"); }, 3500);
        return;
      }
      var c = block && block.getAttribute("data-confirm");
      if (c && c !== "false") {
        var msg = c === "true" ? t("confirm_needed", "Confirm to run") : c;
        confirmRun(block, msg).then(function (yes) { if (yes) go(); });
        return;
      }
      go();
      function go() {
      try {
        Cairn.onRun({
          id: block.getAttribute("data-block"),
          hash: block.getAttribute("data-hash"),
          target: block.getAttribute("data-target"),
          element: block,
          result: $(".cb-result", block),
          command: commandText(block),
          values: function () { return Cairn.values({ secrets: true }); }
        });
      } catch (err) { console.error(err); }
      }
    });
  }

  // Cairn.ask shows a modal question: a title, body nodes, Cancel (the
  // default, and Esc) and a yes button labelled yes (off when yesOff). It
  // resolves with true for yes, false otherwise. cls names the dialog.
  Cairn.ask = function (o) {
    return new Promise(function (resolve) {
      var dlg = el("dialog", "confirm-run" + (o.cls ? " " + o.cls : ""));
      var h = el("h2", null, o.title);
      h.id = "confirm-title-" + Date.now();
      dlg.setAttribute("aria-labelledby", h.id);
      dlg.appendChild(h);
      (o.body || []).forEach(function (n) { dlg.appendChild(n); });
      var row = el("div", "confirm-actions");
      var no = el("button", "confirm-no", t("cancel", "Cancel"));
      var yes = el("button", "confirm-yes", o.yes || t("confirm_run", "Run it"));
      no.type = yes.type = "button";
      yes.disabled = !!o.yesOff;
      row.appendChild(no);
      row.appendChild(yes);
      dlg.appendChild(row);
      doc.body.appendChild(dlg);
      var answered = false;
      function answer(v) {
        if (answered) return;
        answered = true;
        if (dlg.open) dlg.close();
        dlg.remove();
        resolve(v);
      }
      no.addEventListener("click", function () { answer(false); });
      yes.addEventListener("click", function () { answer(true); });
      dlg.addEventListener("close", function () { answer(false); }); // Esc
      if (dlg.showModal) dlg.showModal(); else dlg.setAttribute("open", "");
      no.focus(); // the safe answer is the default one
    });
  };

  // confirmRun asks before a block that changes its target runs, and says
  // what will happen: the command as it will run (form values filled in)
  // and what it runs against (cluster and namespace, or hosts and sudo).
  function confirmRun(block, msg) {
    // A pod or node block names the pods or nodes it would run on now (the
    // executor lists them; at most 5 s, else the dialog goes without).
    var tg = block.getAttribute("data-target");
    if ((tg === "pod" || tg === "node") && typeof Cairn.targetsFor === "function") {
      var late = new Promise(function (done) { setTimeout(function () { done(null); }, 5000); });
      return Promise.race([Cairn.targetsFor(block).catch(function () { return null; }), late]).then(function (line) {
        return askRun(block, msg, line);
      });
    }
    return askRun(block, msg, null);
  }
  function askRun(block, msg, targets) {
    var body = [];
    var where = typeof Cairn.whereFor === "function" ? Cairn.whereFor(block) : [];
    if (where.length) {
      var dl = el("dl", "confirm-where");
      where.forEach(function (kv) { dl.appendChild(el("dt", null, kv[0])); dl.appendChild(el("dd", null, kv[1])); });
      body.push(dl);
    }
    if (targets) body.push(targets);
    var tmpl = copyTemplate(block);
    var pre = el("pre", "confirm-command");
    pre.appendChild(el("code", null, tmpl ? fillTemplate(tmpl, copyValues()) : commandText(block)));
    body.push(el("p", "confirm-label", t("confirm_command", "Command")), pre);
    var caps = capturedFrom(block.getAttribute("data-block"));
    if (caps.length) {
      var ul = el("ul", "confirm-captures");
      caps.forEach(function (c) { ul.appendChild(el("li", null, c)); });
      body.push(el("p", "confirm-label", t("confirm_captures", "Values from earlier blocks")), ul);
    }
    return Cairn.ask({ title: msg, body: body });
  }

  // A Run button is off when the executor is (runOff says why, null when
  // it runs blocks) or when a value the block reads is invalid (the reason
  // names the fields); it stays focusable and says why.
  var runOff = null;
  function applyRun(btn) {
    var bad = btn.getAttribute("data-invalid");
    var why = runOff || (bad ? t("run_invalid", "Fix these values first: ") + bad.split(" ").join(", ") : null);
    if (why) {
      btn.setAttribute("aria-disabled", "true");
      btn.title = why;
      btn.setAttribute("data-tip", why);
    } else {
      btn.disabled = false;
      btn.removeAttribute("aria-disabled");
      btn.removeAttribute("data-tip");
      btn.classList.remove("show-tip");
      btn.title = t("run", "Run");
    }
  }
  // markInvalidRuns: the blocks that read a parameter whose value is
  // invalid now.
  function markInvalidRuns() {
    var blocks = DATA.blocks || {};
    $$(".cb[data-block] .cb-run").forEach(function (btn) {
      var b = blocks[btn.closest(".cb").getAttribute("data-block")] || {};
      var bad = (b.refs || []).filter(function (r) { return byName[r] && validate(byName[r]) !== null; });
      var was = btn.getAttribute("data-invalid") || "";
      if (bad.join(" ") === was) return;
      if (bad.length) btn.setAttribute("data-invalid", bad.join(" ")); else btn.removeAttribute("data-invalid");
      if (Cairn.onRun) applyRun(btn); // without the executor Run is off anyway, and says so
    });
  }
  // Cairn.disableRun(why): the executor went away; Run says why until it is back.
  Cairn.disableRun = function (why) {
    runOff = why;
    $$(".cb-run").forEach(applyRun);
  };
  // Cairn.fillText(s): s with the form's values (unquoted) for display.
  Cairn.fillText = function (s) {
    var vals = Object.assign({}, CAPS, Cairn.values());
    return String(s).replace(/\$\{([A-Z][A-Z0-9_]*)\}|\$([A-Z][A-Z0-9_]*)/g, function (m, a, b) {
      var name = a || b, v = vals[name];
      return v == null || v === "" || (byName[name] && byName[name].secret) ? m : String(v);
    });
  };
  // Cairn.enableRun(fn): the executor calls this once it can run blocks.
  Cairn.enableRun = function (fn) {
    if (typeof fn === "function") Cairn.onRun = fn;
    runOff = null;
    $$(".cb-run").forEach(applyRun);
  };

  // ---------- long lines: wrap or scroll, the reader's choice (kept) ----------
  function initWrap() {
    if (store.get("cairn:wrap") === true) html.classList.add("code-wrap");
    $$(".cb > pre").forEach(function (pre) {
      var cb = pre.parentNode, head = $(".cb-head", cb);
      if (!head || $(".cb-wrap", head)) return;
      var btn = el("button", "cb-wrap", "↵");
      btn.type = "button";
      btn.title = t("wrap_toggle", "Wrap long lines");
      btn.setAttribute("aria-label", btn.title);
      btn.setAttribute("aria-pressed", String(html.classList.contains("code-wrap")));
      var actions = $(".cb-actions", head);
      if (actions) actions.insertBefore(btn, actions.firstChild); else head.appendChild(btn);
    });
    on(doc, "click", function (e) {
      var btn = e.target.closest && e.target.closest(".cb-wrap");
      if (!btn) return;
      var onNow = html.classList.toggle("code-wrap");
      store.set("cairn:wrap", onNow);
      $$(".cb-wrap").forEach(function (b) { b.setAttribute("aria-pressed", String(onNow)); });
      Cairn.scrollables();
    });
    Cairn.scrollables();
    var tid = null;
    window.addEventListener("resize", function () { clearTimeout(tid); tid = setTimeout(Cairn.scrollables, 150); });
  }
  // Cairn.scrollables(): code and output that scroll sideways can be
  // reached and scrolled with the keyboard (a tab stop of their own, WCAG
  // 2.1.1); the others stay out of the tab order. Called again when wrap
  // changes, the window resizes or an output arrives. Measuring lays the
  // page out, so the calls of one task make one measurement, in the next
  // frame (set-up calls it once per tab set and again in update).
  var scrollablesDue = false;
  Cairn.scrollables = function () {
    if (scrollablesDue) return;
    scrollablesDue = true;
    requestAnimationFrame(function () { scrollablesDue = false; measureScrollables(); });
  };
  function measureScrollables() {
    $$(".cb pre, pre.output").forEach(function (pre) {
      if (pre.scrollWidth > pre.clientWidth + 1 || pre.scrollHeight > pre.clientHeight + 1) {
        if (!pre.hasAttribute("tabindex")) {
          pre.setAttribute("tabindex", "0");
          pre.setAttribute("data-scrolls", "");
        }
      } else if (pre.hasAttribute("data-scrolls")) {
        pre.removeAttribute("tabindex");
        pre.removeAttribute("data-scrolls");
      }
    });
  }

  // ---------- index: filter by tag (?tag=…, from a tag chip) ----------
  function initTagFilter() {
    var cards = $$(".cards > .card");
    if (!cards.length) return;
    var tag = new URLSearchParams(location.search).get("tag");
    if (!tag) return;
    var shown = 0;
    cards.forEach(function (c) {
      var has = $$(".chip", c).some(function (ch) { return ch.textContent.trim() === tag; });
      c.hidden = !has;
      if (has) shown++;
    });
    var bar = el("p", "tag-filter");
    bar.appendChild(doc.createTextNode(t("tag_filter", "Runbooks tagged:") + " "));
    bar.appendChild(el("span", "chip chip-active", tag));
    bar.appendChild(doc.createTextNode(" (" + shown + ") "));
    var all = el("a", "tag-filter-clear", t("show_all", "Show all"));
    all.href = location.pathname;
    bar.appendChild(all);
    var list = $(".cards");
    list.parentNode.insertBefore(bar, list);
  }

  // ---------- small enhancements ----------
  function initDecor() {
    ["local", "ssh", "kube", "pod", "node", "manual"].forEach(function (k) {
      $$(".badge-" + k).forEach(function (b) { if (!b.title && T["target_" + k]) b.title = T["target_" + k]; });
    });
    // Native kube actions without a body render an empty <pre>.
    $$(".cb > pre").forEach(function (p) { if (!p.textContent.trim()) p.classList.add("pre-empty"); });
    $$("ul.cb-expect").forEach(function (u) { if (!u.hasAttribute("data-label")) u.setAttribute("data-label", t("expectations", "Expectations")); });
    $$("ul.cb-capture").forEach(function (u) { if (!u.hasAttribute("data-label")) u.setAttribute("data-label", t("captures", "Captures")); });
    var ko = (html.getAttribute("lang") || "").indexOf("ko") === 0;
    $$(".meta-duration").forEach(function (d) {
      var s = d.textContent.trim();
      if (!/^(\d+h)?(\d+m)?(\d+(\.\d+)?s)?$/.test(s) || !s) return;
      s = s.replace(/(\d)([hm])(?=\d)/g, "$1$2 ").replace(/ 0s$/, "").replace(/ 0m$/, "");
      if (ko) s = s.replace(/h/g, "시간").replace(/m/g, "분").replace(/s/g, "초");
      d.textContent = s;
    });
    on(window, "beforeprint", function () {
      $$("details").forEach(function (d) { if (!d.open) { d.open = true; d.setAttribute("data-print-opened", ""); } });
    });
    on(window, "afterprint", function () {
      $$("details[data-print-opened]").forEach(function (d) { d.open = false; d.removeAttribute("data-print-opened"); });
    });
    $$("[data-focus-search]").forEach(function (b) {
      on(b, "click", function () { var i = $("#search-input"); if (i) i.focus(); });
    });
    // Index page: show stored progress on each card.
    $$(".card[data-slug]").forEach(function (card) {
      var n = store.get("cairn:" + card.getAttribute("data-slug") + ":done");
      var total = +card.getAttribute("data-steps") || 0;
      var out = $("[data-card-progress]", card);
      if (out && Array.isArray(n) && n.length) {
        out.textContent = "✓ " + Math.min(n.length, total || n.length) + "/" + total;
        out.hidden = false;
      }
    });
  }

  // ---------- scroll spy ----------
  function initSpy() {
    var steps = $$("section.step[id]");
    if (!steps.length) return;
    var items = $$(".toc-list li[data-step], .nav-steps li[data-step]");
    if (!items.length) return;
    var ticking = false, current = null;
    function spy() {
      ticking = false;
      var line = 120, cur = steps[0].id;
      for (var i = 0; i < steps.length; i++) {
        if (steps[i].getBoundingClientRect().top - line <= 0) cur = steps[i].id; else break;
      }
      if (cur === current) return;
      current = cur;
      items.forEach(function (li) {
        var a = li.getAttribute("data-step") === cur;
        li.classList.toggle("active", a);
        var link = $("a", li);
        if (link) { if (a) link.setAttribute("aria-current", "step"); else link.removeAttribute("aria-current"); }
      });
    }
    on(window, "scroll", function () { if (!ticking) { ticking = true; requestAnimationFrame(spy); } }, { passive: true });
    ticking = true;
    requestAnimationFrame(spy); // not now: reading positions lays the page out
  }

  // ---------- search ----------
  function norm(s) { return String(s == null ? "" : s).normalize("NFC").replace(/\s+/g, " ").trim(); }
  function initSearch() {
    var input = $("#search-input"), box = $("#search-results");
    if (!input || !box) return;
    var index = null, loading = null, active = -1, items = [];

    function loadScript(src) {
      return new Promise(function (resolve, reject) {
        var s = doc.createElement("script");
        s.src = src;
        s.onload = function () { resolve(window.CAIRN_SEARCH); };
        s.onerror = function () { reject(new Error("search.js")); };
        doc.head.appendChild(s);
      });
    }
    function load() {
      if (index) return Promise.resolve(index);
      if (loading) return loading;
      var first;
      if (window.CAIRN_SEARCH) first = Promise.resolve(window.CAIRN_SEARCH);
      else if (IS_FILE || !window.fetch) first = Promise.reject(new Error("file"));
      else first = fetch(ROOT + "search.json").then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); });
      loading = first
        .catch(function () { return loadScript(ROOT + "search.js"); })
        .then(prepare, function () { return prepare([]); });
      return loading;
    }
    function prepare(data) {
      var list = Array.isArray(data) ? data : (data && (data.entries || data.items)) || [];
      index = list.map(function (e) {
        var title = norm(e.title), heading = norm(e.heading), text = norm(e.text);
        return {
          e: e, title: title, heading: heading, text: text,
          lt: title.toLowerCase(), lh: heading.toLowerCase(), lx: text.toLowerCase()
        };
      });
      return index;
    }
    function find(q) {
      var terms = q.toLowerCase().split(" ").filter(Boolean);
      var phrase = terms.join(" ");
      var hits = [];
      index.forEach(function (it, order) {
        var score = 0;
        for (var i = 0; i < terms.length; i++) {
          var s = terms[i], sc = 0;
          if (it.lt.indexOf(s) >= 0) sc += 8;
          if (it.lh.indexOf(s) >= 0) sc += 5;
          if (it.lx.indexOf(s) >= 0) sc += 1;
          if (!sc) return;
          score += sc;
        }
        if (terms.length > 1 && (it.lh.indexOf(phrase) >= 0 || it.lx.indexOf(phrase) >= 0)) score += 3;
        if (!it.e.step) score += 0.5;
        hits.push({ it: it, score: score, order: order });
      });
      hits.sort(function (a, b) { return b.score - a.score || a.order - b.order; });
      return { hits: hits.slice(0, 30), terms: terms };
    }
    function highlight(parent, text, terms) {
      var low = text.toLowerCase();
      if (low.length !== text.length) { text = low; }
      var ranges = [];
      terms.forEach(function (term) {
        var from = 0, i;
        while (term && (i = low.indexOf(term, from)) >= 0) { ranges.push([i, i + term.length]); from = i + term.length; }
      });
      ranges.sort(function (a, b) { return a[0] - b[0]; });
      var pos = 0;
      ranges.forEach(function (r) {
        if (r[0] < pos) { if (r[1] > pos) r[0] = pos; else return; }
        if (r[0] > pos) parent.appendChild(doc.createTextNode(text.slice(pos, r[0])));
        parent.appendChild(el("mark", null, text.slice(r[0], r[1])));
        pos = r[1];
      });
      if (pos < text.length) parent.appendChild(doc.createTextNode(text.slice(pos)));
    }
    function snippet(it, terms) {
      var text = it.text;
      if (!text) return "";
      var at = -1;
      for (var i = 0; i < terms.length && at < 0; i++) at = it.lx.indexOf(terms[i]);
      if (at < 0) return text.length > 140 ? text.slice(0, 140) + "…" : text;
      var start = Math.max(0, at - 40), end = Math.min(text.length, at + 100);
      return (start > 0 ? "…" : "") + text.slice(start, end) + (end < text.length ? "…" : "");
    }
    function render(q) {
      var r = find(q);
      box.textContent = "";
      items = [];
      active = -1;
      input.removeAttribute("aria-activedescendant");
      if (!r.hits.length) {
        var p = el("p", "sr-empty", t("no_results", "No results"));
        p.setAttribute("role", "presentation");
        box.appendChild(p);
      }
      r.hits.forEach(function (h, n) {
        var e = h.it.e;
        var a = el("a", "sr-item");
        a.id = "sr-" + n;
        a.setAttribute("role", "option");
        a.setAttribute("aria-selected", "false");
        a.tabIndex = -1;
        a.href = pageURL(e.slug, e.step || "");
        if (e.lang) a.setAttribute("lang", e.lang);
        var title = el("span", "sr-title");
        highlight(title, h.it.title, r.terms);
        a.appendChild(title);
        if (h.it.heading && h.it.heading !== h.it.title) {
          var where = el("span", "sr-where");
          highlight(where, h.it.heading, r.terms);
          a.appendChild(where);
        }
        var sn = snippet(h.it, r.terms);
        if (sn) {
          var s = el("span", "sr-snippet");
          highlight(s, sn, r.terms);
          a.appendChild(s);
        }
        a.addEventListener("mousemove", function () { if (active !== n) setActive(n, false); });
        a.addEventListener("click", function () { close(); });
        box.appendChild(a);
        items.push(a);
      });
      open();
    }
    function setActive(n, scroll) {
      if (active >= 0 && items[active]) items[active].setAttribute("aria-selected", "false");
      active = n;
      if (n >= 0 && items[n]) {
        items[n].setAttribute("aria-selected", "true");
        input.setAttribute("aria-activedescendant", items[n].id);
        if (scroll) items[n].scrollIntoView({ block: "nearest" });
      } else input.removeAttribute("aria-activedescendant");
    }
    function open() { box.hidden = false; input.setAttribute("aria-expanded", "true"); }
    function close() {
      box.hidden = true;
      input.setAttribute("aria-expanded", "false");
      input.removeAttribute("aria-activedescendant");
    }
    var seq = 0;
    function run() {
      var q = norm(input.value);
      var my = ++seq;
      if (!q) { close(); box.textContent = ""; return; }
      load().then(function () { if (my === seq) render(q); });
    }
    on(input, "input", run);
    on(input, "focus", function () { load(); if (norm(input.value) && box.childNodes.length) open(); });
    on(input, "keydown", function (e) {
      if (e.key === "ArrowDown" || e.key === "ArrowUp") {
        if (box.hidden) { if (norm(input.value)) run(); return; }
        e.preventDefault();
        if (!items.length) return;
        var n = e.key === "ArrowDown" ? (active + 1) % items.length : (active <= 0 ? items.length - 1 : active - 1);
        setActive(n, true);
      } else if (e.key === "Enter") {
        var target = items[active >= 0 ? active : 0];
        if (target && !box.hidden) { e.preventDefault(); close(); location.href = target.href; }
      } else if (e.key === "Escape") {
        e.preventDefault();
        if (!box.hidden) close(); else { input.value = ""; input.blur(); }
      }
    });
    on(doc, "keydown", function (e) {
      if (e.defaultPrevented || e.altKey || e.metaKey && e.key !== "k" || e.ctrlKey && e.key !== "k") return;
      var k = e.key === "/" && !e.ctrlKey && !e.metaKey;
      var ck = (e.ctrlKey || e.metaKey) && e.key === "k";
      if ((k && !isEditable(e.target)) || ck) {
        e.preventDefault();
        input.focus();
        input.select();
      }
    });
    on(doc, "click", function (e) {
      if (!box.hidden && !e.target.closest(".search")) close();
    });
    Cairn.search = function (q) { input.value = q; run(); return load(); };
  }

  // ---------- keyboard: a skip link to the steps; j and k move between blocks ----------
  function initKeys() {
    var first = $("section.step[id]");
    var skip = $(".skip-link");
    if (first && skip) {
      var a = el("a", "skip-link", t("skip_to_steps", "Skip to the first step"));
      a.href = "#" + first.id;
      skip.parentNode.insertBefore(a, skip.nextSibling);
    }
    // j: the next block, k: the previous (its Run button, else the block
    // itself), outside text fields; the blocks the current choice does not
    // apply to are passed over.
    on(doc, "keydown", function (e) {
      if (e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey || (e.key !== "j" && e.key !== "k") || isEditable(e.target)) return;
      var blocks = $$(".cb[data-block]").filter(function (b) { return b.offsetParent !== null && !b.closest(".is-na:not(.na-open)"); });
      if (!blocks.length) return;
      var cur = doc.activeElement && doc.activeElement.closest ? doc.activeElement.closest(".cb[data-block]") : null;
      var i = blocks.indexOf(cur);
      if (i < 0) {
        // From the reading position: the first block below the top.
        i = blocks.findIndex(function (b) { return b.getBoundingClientRect().top > 60; });
        i = e.key === "j" ? (i < 0 ? blocks.length - 1 : i) : Math.max((i < 0 ? blocks.length : i) - 1, 0);
      } else {
        i = e.key === "j" ? Math.min(i + 1, blocks.length - 1) : Math.max(i - 1, 0);
      }
      var b = blocks[i], target = $(".cb-run", b);
      if (!target) {
        if (!b.hasAttribute("tabindex")) b.setAttribute("tabindex", "-1");
        target = b;
      }
      e.preventDefault();
      target.focus({ preventScroll: true });
      b.scrollIntoView({ block: "center", behavior: "smooth" });
    });
  }

  // ---------- start ----------
  function start() {
    [fixFileLinks, initTheme, initSidebar, initParams, initSubstitution, initTabs, initSteps, initCopy, initRun,
      initDecor, initWrap, initTagFilter, initSearch, initSpy, initKeys].forEach(function (f) {
      try { f(); } catch (e) { console.error("cairn: " + (f.name || "init") + ": ", e); }
    });
    try { update(); } catch (e) { console.error("cairn: update: ", e); }
    // Restored state (ticked steps, values) appears without animating in.
    requestAnimationFrame(function () { requestAnimationFrame(function () { html.classList.remove("cairn-init"); }); });
    Cairn.ready = true;
    try { doc.dispatchEvent(new CustomEvent("cairn:ready", { detail: Cairn })); } catch (e) {}
    initExecutor();
  }

  // ---------- the executor client, when it can be used ----------
  // executor.js (50 KB) is not part of a reading visitor's first load. It
  // loads at once when this tab can run blocks: it is paired (or the
  // address carries a pairing), or cairn serve serves it on loopback; on a
  // published site, when a Run button is pointed at or focused (its tip
  // says how to start an executor), or when a pairing URL is pasted.
  var execLoad = null;
  function loadExecutor() {
    if (execLoad) return;
    var me = $('script[src$="cairn.js"]');
    var s = el("script");
    s.src = (me ? me.src.replace(/cairn\.js(\?.*)?$/, "") : ROOT + "assets/") + "executor.js";
    execLoad = s;
    doc.head.appendChild(s);
  }
  Cairn.loadExecutor = loadExecutor;
  // Cairn.servedHere(): a local executor (cairn serve) serves this page;
  // executor.js asks too.
  Cairn.servedHere = function () {
    return location.protocol === "http:" && /^(127\.|localhost$|\[::1\]$)/.test(location.hostname);
  };
  function initExecutor() {
    var paired = false;
    try { paired = !!sessionStorage.getItem("cairn:executor"); } catch (e) {}
    if (paired || Cairn.servedHere() || html.getAttribute("data-executor") || location.hash.indexOf("cairn-token=") >= 0) {
      loadExecutor();
      return;
    }
    function near(e) { if (e.target.closest && e.target.closest(".cb-run, .step-run")) loadExecutor(); }
    on(doc, "pointerover", near, { passive: true });
    on(doc, "focusin", near);
    on(window, "hashchange", function () { if (location.hash.indexOf("cairn-token=") >= 0) loadExecutor(); });
  }
  if (doc.readyState === "loading") doc.addEventListener("DOMContentLoaded", start);
  else start();
})();
