/* Cairn executor client: pairs the page with a local executor (cairn serve or
   cairn daemon), runs blocks through its API (docs/executor-api.md), streams
   their output into the page and shows each block's verified result.

   Pairing: the executor prints a URL whose fragment holds the token
   (#cairn-token=… and, for a daemon, #cairn-executor=http://127.0.0.1:7788).
   The fragment never reaches a server; the token is kept in sessionStorage
   and removed from the address bar. Without a token nothing here runs. */
(function () {
  "use strict";

  var doc = document;
  var html = doc.documentElement;
  var KEY = "cairn:executor";
  var slug = html.getAttribute("data-slug") || "";

  function T(key, fallback) {
    var s = (window.Cairn && window.Cairn.strings) || {};
    return s[key] || fallback;
  }
  function $(sel, ctx) { return (ctx || doc).querySelector(sel); }
  function $$(sel, ctx) { return Array.prototype.slice.call((ctx || doc).querySelectorAll(sel)); }
  function el(tag, cls, text) {
    var e = doc.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }

  // ---------- pairing ----------
  function readPairing() {
    var h = location.hash.replace(/^#/, "");
    if (h.indexOf("cairn-token=") < 0) return;
    var p = {};
    h.split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i > 0) p[decodeURIComponent(kv.slice(0, i))] = decodeURIComponent(kv.slice(i + 1));
    });
    if (!/^[0-9a-f]{16,128}$/.test(p["cairn-token"] || "")) return;
    var url = p["cairn-executor"] || "";
    if (url && !/^http:\/\/(127\.\d+\.\d+\.\d+|localhost|\[::1\])(:\d+)?$/.test(url)) return; // loopback only
    try { sessionStorage.setItem(KEY, JSON.stringify({ url: url, token: p["cairn-token"] })); } catch (e) {}
    history.replaceState(null, "", location.pathname + location.search);
  }
  function pairing() {
    try { return JSON.parse(sessionStorage.getItem(KEY) || "null"); } catch (e) { return null; }
  }

  var conf = null;
  function api(path, opts) {
    opts = opts || {};
    var headers = { Authorization: "Bearer " + conf.token };
    if (opts.body) headers["Content-Type"] = "application/json";
    return fetch(conf.url + "/api" + path, { method: opts.method || "GET", headers: headers, body: opts.body, cache: "no-store" });
  }
  function json(resp) {
    return resp.text().then(function (t) {
      var v = null;
      try { v = JSON.parse(t); } catch (e) { v = { error: t }; }
      if (!resp.ok) { var err = new Error((v && v.error) || resp.statusText); err.code = v && v.code; err.missing = v && v.missing; throw err; }
      return v;
    });
  }

  // ---------- status pill ----------
  function pill(state, text) {
    var p = $("#cairn-exec-status");
    if (!p) {
      p = el("div", "exec-status");
      p.id = "cairn-exec-status";
      p.setAttribute("role", "status");
      (doc.querySelector(".runbook-head") || doc.querySelector("main") || doc.body).prepend(p);
    }
    p.className = "exec-status exec-" + state;
    p.textContent = text;
  }

  // ---------- results ----------
  function provenance(rec) {
    var parts = [];
    if (rec.start) parts.push(new Date(rec.start).toLocaleString(html.lang || undefined));
    var hosts = (rec.hosts || []).map(function (h) { return h.host; }).filter(Boolean);
    if (rec.target === "kube" && rec.where) parts.push(rec.where.replace(/ \(.*$/, ""));
    else if (hosts.length) parts.push(hosts.join(" "));
    else if (!rec.site) parts.push(T("where_local", "local")); // a site run's machine is in its "by"
    // A cancelled run has no exit status of its own (the process was killed).
    if (rec.hosts && rec.hosts.length === 1 && rec.status !== "cancelled") parts.push("exit " + rec.hosts[0].exit);
    if (rec.duration != null) parts.push(rec.duration.toFixed(1) + "s");
    if (rec.by) parts.push(T("term_by", "by ") + rec.by);
    return parts;
  }

  // siteProvenance: a run an exported script made (at an air-gapped site)
  // and `cairn journal import` brought back: who ran it and whether its
  // signature checked, with the run, script and bundle in the tooltip.
  function siteProvenance(site) {
    var box = el("span", "prov-site");
    box.appendChild(el("span", "site-run", T("site_run", "run at the site (exported script)")));
    if (site.by) { box.appendChild(doc.createTextNode(" ")); box.appendChild(el("span", "site-by", T("site_by", "by ") + site.by)); }
    box.appendChild(doc.createTextNode(" "));
    var sig = site.signature || "none";
    var s = el("span", "site-sig site-sig-" + sig,
      sig === "checked" ? T("sig_checked", "signature checked: ") + (site.signer || "") :
      sig === "unchecked" ? T("sig_unchecked", "signed, not checked") : T("sig_none", "unsigned"));
    box.appendChild(s);
    var tip = ["run " + (site.run || "?"), "script sha256 " + (site.script || "?")];
    if (site.bundle) tip.push("bundle MANIFEST sha256 " + site.bundle);
    if (site.file) tip.push("imported from " + site.file + (site.imported ? " at " + site.imported : ""));
    box.title = tip.join("\n");
    return box;
  }

  // reasonText puts the executor's failure reasons (English, as the journal
  // and the CLI keep them) into the page's language. Forms it does not know
  // stay as they are.
  var REASONS = {
    ko: [
      [/^nothing ran$/, "아무것도 실행되지 않았어요"],
      [/^expected exit status (-?\d+), got (-?\d+)$/, "종료 코드가 $1이어야 하는데 $2였어요"],
      [/^output does not contain (.*)$/, "출력에 $1이(가) 없어요"],
      [/^output contains (.*)$/, "출력에 $1이(가) 있으면 안 되는데 있어요"],
      [/^output does not match (.*)$/, "출력이 $1과(와) 맞지 않아요"],
      [/^output is not similar to the expected output \(line (\d+) of it\): (.*)$/, "출력이 예상 출력과 달라요(예상 출력 $1번째 줄): $2"],
      [/^expected (\d+) objects, found (\d+)$/, "객체가 $1개여야 하는데 $2개예요"],
      [/^not retried: (.*)$/, "재시도하지 않음(고쳐지지 않는 오류): $1"],
      [/^not journaled: (.*)$/, "실행 기록에 남기지 못했어요: $1"],
      [/^timed out after (.*)$/, "$1 안에 끝나지 않았어요"],
      [/^cancelled$/, "취소했어요"],
      [/^(.*)connection refused(.*)$/, "$1연결이 거부됐어요$2"],
      [/^capture (\S+): (.*)$/, "캡처 $1: $2"],
      [/^invalid parameter: block "([^"]+)" needs \$(\w+) \(captured by block "([^"]+)"\)(?:, .*)?: run that block first$/, "블록 $1에는 $$$2 값이 필요해요. 이 값을 캡처하는 블록 $3을(를) 먼저 실행하세요"]
    ]
  };
  function reasonText(r) {
    var table = REASONS[html.lang];
    if (!table) return r;
    // "cp0: ..." names the host; the rest is translated.
    var m = /^([A-Za-z0-9_.-]+(?:@[A-Za-z0-9_.-]+)?(?::\d+)?): (.*)$/.exec(r);
    var host = "", rest = r;
    if (m && !/^(output|expected|not|capture|nothing|timed)$/.test(m[1])) { host = m[1] + ": "; rest = m[2]; }
    for (var i = 0; i < table.length; i++) {
      if (table[i][0].test(rest)) return host + rest.replace(table[i][0], table[i][1]);
    }
    return r;
  }

  function resultBox(block) {
    var box = $(".cb-result", block);
    if (!box) { box = el("div", "cb-result"); block.appendChild(box); }
    box.hidden = false;
    return box;
  }

  function showRecord(block, rec) {
    var box = resultBox(block);
    box.innerHTML = "";
    box.className = "cb-result cb-result-" + rec.status;
    box.setAttribute("data-status", rec.status);
    var head = el("div", "cb-result-head");
    head.appendChild(el("span", "status status-" + rec.status, T("status_" + rec.status, rec.status)));
    provenance(rec).forEach(function (p) { head.appendChild(doc.createTextNode(" ")); head.appendChild(el("span", "prov", p)); });
    if (rec.site) { head.appendChild(doc.createTextNode(" ")); head.appendChild(siteProvenance(rec.site)); }
    box.appendChild(head);
    if (rec.reasons && rec.reasons.length) {
      var ul = el("ul", "cb-reasons");
      rec.reasons.forEach(function (r) {
        var li = el("li", null, reasonText(r));
        if (li.textContent !== r) li.title = r; // the executor's own words, for searching and reports
        ul.appendChild(li);
      });
      box.appendChild(ul);
    }
    if (rec.write_back && rec.write_back !== "written") {
      // Verified, but the Markdown could not be updated: say so, never hide it.
      box.appendChild(el("p", "cb-writeback-failed", T("writeback_failed", "Not written back to the Markdown: ") + rec.write_back));
    }
    if (rec.session && rec.session.hosts) {
      // Where the shell session is now: what its next block starts from.
      Object.keys(rec.session.hosts).sort().forEach(function (h) {
        var st = rec.session.hosts[h], p = el("p", "cb-session");
        p.appendChild(el("span", "cb-session-name", T("session", "session ") + rec.session.name + (h ? " @ " + h : "")));
        p.appendChild(el("code", "cb-session-dir", st.dir));
        Object.keys(st.vars || {}).sort().forEach(function (k) { p.appendChild(el("code", "cb-session-var", k + "=" + st.vars[k])); });
        box.appendChild(p);
      });
    }
    var pre = el("pre", "output");
    var code = el("code");
    // A terminal's transcript is what a terminal drew: its escape codes
    // and carriage returns are left out here.
    var out = rec.target === "terminal" ? plainTranscript(rec.output || "") : rec.output || "";
    var muted = writeOutput(code, out, block.getAttribute("data-block"));
    pre.appendChild(code);
    box.appendChild(pre);
    if (muted) box.appendChild(el("p", "cb-muted-note", T("muted_note", "%d muted lines are known and harmless: ").replace("%d", muted) + muteOf(block.getAttribute("data-block")).why));
    var good = rec.status === "verified" || rec.status === "by-hand";
    block.classList.toggle("cb-verified", good);
    block.classList.toggle("cb-failed", !good && rec.status !== "terminal");
    if (window.Cairn && window.Cairn.scrollables) window.Cairn.scrollables();
  }

  function plainTranscript(s) {
    return s.replace(/\x1b\[[0-9;?]*[ -\/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>]/g, "")
      .replace(/\r+\n/g, "\n").replace(/[^\n]*\r(?!\n)/g, "");
  }

  // muteOf is a block's mute= patterns as RegExps (one line each) and
  // mute.why. A pattern JavaScript cannot read mutes nothing.
  var mutes = {};
  function muteOf(id) {
    if (mutes[id]) return mutes[id];
    var b = ((window.Cairn && window.Cairn.data) || {}).blocks || {};
    var m = { res: [], why: (b[id] && b[id].mute_why) || "" };
    ((b[id] && b[id].mute) || []).forEach(function (src) {
      var flags = "";
      var f = /^\(\?([a-z]+)\)/.exec(src);
      if (f) { flags = f[1].replace(/[ms]/g, ""); src = src.slice(f[0].length); }
      try { m.res.push(new RegExp(src, flags)); } catch (e) { /* RE2 only */ }
    });
    mutes[id] = m;
    return m;
  }
  // writeOutput puts out into code, the lines the block's mute= patterns
  // match muted with why; it returns how many it muted.
  function writeOutput(code, out, id) {
    var m = muteOf(id);
    if (!m.res.length) { code.textContent = out; return 0; }
    var n = 0;
    out.split(/(?<=\n)/).forEach(function (line) {
      var bare = line.replace(/\n$/, "");
      if (bare && m.res.some(function (re) { return re.test(bare); })) {
        var s = el("span", "out-muted", line);
        s.title = T("muted", "known and harmless: ") + m.why;
        code.appendChild(s);
        n++;
      } else {
        code.appendChild(doc.createTextNode(line));
      }
    });
    return n;
  }

  function loadResults(again) {
    return api("/runbooks/" + encodeURIComponent(slug) + "/results").then(json).then(function (r) {
      if (window.Cairn && window.Cairn.setCaptures) window.Cairn.setCaptures(r.captures);
      if (!again) reattach(r.live);
      Object.keys(r.results || {}).forEach(function (id) {
        var block = doc.getElementById("block-" + id);
        if (block && !block.classList.contains("cb-running")) showRecord(block, r.results[id]);
      });
      // A run that did not verify and came after the last verified one is
      // what the reader last saw: show it after a reload too.
      Object.keys(r.last || {}).forEach(function (id) {
        var rec = r.last[id], block = doc.getElementById("block-" + id);
        if (!block || block.classList.contains("cb-running") || rec.status === "verified") return;
        var ok = (r.results || {})[id];
        if (!ok || Date.parse(rec.start) > Date.parse(ok.start)) showRecord(block, rec);
      });
    });
  }

  // sandboxFill offers, in the parameters form, the values the running
  // sandbox knows (its load balancer, its nodes' image archives, ...): one
  // click fills them in as if typed. Gone when the sandbox is.
  var sandboxValues = null;
  function sandboxFill(vals) {
    sandboxValues = vals && Object.keys(vals).length ? vals : null;
    var form = $("form.params"), btn = form && $(".params-sandbox", form);
    if (!form || !window.Cairn || !window.Cairn.setParam) return;
    if (!sandboxValues) { if (btn) btn.hidden = true; return; }
    if (!btn) {
      btn = el("button", "btn btn-small params-sandbox");
      btn.type = "button";
      var head = $(".params-head", form), reset = head && $(".params-reset", head);
      if (head) head.insertBefore(btn, reset); else form.insertBefore(btn, form.firstChild);
      btn.addEventListener("click", function () {
        Object.keys(sandboxValues || {}).forEach(function (k) { window.Cairn.setParam(k, sandboxValues[k]); });
        sandboxState();
      });
      form.addEventListener("input", sandboxState);
      form.addEventListener("change", sandboxState);
      if (reset) reset.addEventListener("click", function () { setTimeout(sandboxState, 0); });
    }
    btn.hidden = false;
    btn.title = T("params_sandbox_title", "What the running sandbox knows:") + "\n" +
      Object.keys(sandboxValues).sort().map(function (k) { return k + "=" + sandboxValues[k]; }).join("\n");
    sandboxState();
  }
  // sandboxState shows whether the form holds the sandbox's values.
  function sandboxState() {
    var btn = $("form.params .params-sandbox");
    if (!btn || !sandboxValues) return;
    var cur = window.Cairn.values(), names = Object.keys(sandboxValues);
    var inUse = names.every(function (k) { return String(cur[k]) === sandboxValues[k]; });
    btn.disabled = inUse;
    btn.classList.toggle("is-done", inUse);
    btn.textContent = inUse ? T("params_sandbox_done", "Sandbox values in use") : T("params_sandbox", "Fill in from the sandbox") + " (" + names.length + ")";
  }

  var kubeWhere = null;
  function loadTarget() {
    return api("/runbooks/" + encodeURIComponent(slug) + "/target").then(json).then(function (t) {
      kubeWhere = t;
      sandboxFill(t.sandbox_values);
      $$('.cb-exec[data-target="kube"] .cb-head, .cb-exec[data-target="pod"] .cb-head, .cb-exec[data-target="node"] .cb-head').forEach(function (head) {
        var old = $(".cb-where", head);
        if (old) old.remove();
        if (!t.kube && !t.kube_error) return;
        // The executor's reason is English: inline on an English page, in
        // the title on others, where the page says it in its own words.
        var off = t.kube_error && !english ? T("kube_off", "kube blocks are off") : t.kube_error;
        var w = el("span", "cb-where" + (t.kube_error ? " cb-where-error" : ""), t.kube_error ? off : "→ " + t.kube.replace(/ \(.*$/, ""));
        w.title = t.kube_error || t.kube;
        head.insertBefore(w, $(".cb-actions", head));
      });
    });
  }

  // ---------- running ----------
  function run(req) {
    var block = req.element;
    if (req.target === "manual") {
      var step = block.closest(".step");
      var box = step && $(".step-done", step);
      if (box && !box.checked) box.click();
      return;
    }
    var params = {};
    var vals = req.values();
    Object.keys(vals).forEach(function (k) {
      var v = vals[k];
      if (v === true || v === false) v = String(v);
      if (v != null && v !== "") params[k] = String(v);
    });
    var ui = runningUI(block);
    api("/runs", { method: "POST", body: JSON.stringify({ runbook: slug, block: req.id, hash: req.hash, params: params, confirm: !!block.getAttribute("data-confirm") }) })
      .then(json)
      .then(function (started) { return follow(started.id, block, ui); })
      .catch(function (err) { ui.error(err); });
  }

  // runningUI turns the block's result box into a live one: status, Cancel,
  // streamed output.
  function runningUI(block) {
    var box = resultBox(block);
    box.innerHTML = "";
    box.className = "cb-result cb-result-running";
    box.setAttribute("data-status", "running");
    var head = el("div", "cb-result-head");
    var status = el("span", "status status-running", T("status_running", "running"));
    head.appendChild(status);
    var cancel = el("button", "cb-cancel", T("cancel", "Cancel"));
    cancel.type = "button";
    head.appendChild(cancel);
    box.appendChild(head);
    var pre = el("pre", "output live");
    var code = el("code");
    pre.appendChild(code);
    box.appendChild(pre);
    block.classList.add("cb-running");
    block.classList.remove("cb-verified", "cb-failed");
    var btn = $(".cb-run", block);
    if (btn) btn.disabled = true;
    function finish() {
      block.classList.remove("cb-running");
      if (btn) btn.disabled = false;
    }
    return {
      box: box, code: code, cancel: cancel, finish: finish,
      error: function (err) {
        finish();
        status.className = "status status-error";
        status.textContent = T("status_error", "error");
        cancel.remove();
        var msg = reasonText(err.message || String(err));
        if (err.code === "hash_mismatch") msg += " — " + T("reload_page", "reload the page");
        box.setAttribute("data-status", "error");
        box.appendChild(el("p", "cb-error", msg));
      }
    };
  }

  // follow streams run id into ui until it ends, then shows its record. The
  // run goes on in the executor whatever happens to the connection, so a
  // stream that breaks (a network error, or an end without the record) is
  // opened again, a few times, and replays the output; an answer of the
  // executor (an unknown run, too many streams) is shown as it is.
  var followTries = 5;
  function follow(id, block, ui) {
    ui.cancel.onclick = function () { api("/runs/" + id + "/cancel", { method: "POST" }); };
    ui.box.setAttribute("data-run", id); // the executor has the run: a reload finds it
    var tries = 0;
    function attempt() {
      return stream(id, ui.code, block).then(function (rec) {
        if (!rec) {
          var e = new Error(T("stream_lost", "the connection to the executor ended before the run did"));
          e.broken = true;
          throw e;
        }
        return rec;
      }).catch(function (err) {
        if (err.code || (!err.broken && !(err instanceof TypeError)) || ++tries >= followTries) throw err;
        ui.box.setAttribute("data-reconnects", String(tries));
        return new Promise(function (done) { setTimeout(done, 250 * tries); }).then(function () {
          ui.code.textContent = ""; // the stream replays the output
          return attempt();
        });
      });
    }
    return attempt().then(function (rec) {
      ui.finish();
      showRecord(block, rec);
      if (window.Cairn && window.Cairn.setCaptures) window.Cairn.setCaptures(rec.captures);
      if (rec.status === "verified") autoTick(block);
    }).catch(function (err) { ui.error(err); });
  }

  // reattach follows runs of this page that were going when it (re)loaded.
  function reattach(live) {
    (live || []).forEach(function (r) {
      var block = doc.getElementById("block-" + r.block);
      if (!block || block.classList.contains("cb-running")) return;
      follow(r.id, block, runningUI(block));
    });
  }

  // autoTick ticks the block's step once every executable block of it that
  // applies has verified (as Killercoda advances on a passed check); the
  // reader can still untick it.
  function autoTick(block) {
    var step = block.closest(".step");
    var box = step && $(".step-done", step);
    if (!box || box.checked) return;
    var all = $$(".cb[data-target]", step).filter(function (b) {
      return b.getAttribute("data-target") !== "manual" && !b.closest("[hidden], .is-na");
    });
    if (all.every(function (b) { return b.classList.contains("cb-verified"); })) box.click();
  }

  // events reads a response's Server-Sent Events, calling handle(name,
  // data parsed as JSON) for each until it returns true or the stream ends.
  function events(resp, handle) {
    var reader = resp.body.getReader(), dec = new TextDecoder(), buf = "";
    function pump() {
      return reader.read().then(function (r) {
        if (r.done) return;
        buf += dec.decode(r.value, { stream: true });
        var i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          var chunk = buf.slice(0, i), name = "message", data = [];
          buf = buf.slice(i + 2);
          chunk.split("\n").forEach(function (line) {
            if (line.indexOf("event: ") === 0) name = line.slice(7);
            else if (line.indexOf("data: ") === 0) data.push(line.slice(6));
          });
          if (!data.length) continue;
          var d;
          try { d = JSON.parse(data.join("\n")); } catch (e) { continue; }
          if (handle(name, d)) { reader.cancel().catch(function () {}); return; }
        }
        return pump();
      });
    }
    return pump();
  }

  // stream reads the run's Server-Sent Events with fetch (EventSource cannot
  // send the Authorization header) and resolves with the final record.
  function stream(id, code, block) {
    return api("/runs/" + id + "/events").then(function (resp) {
      if (!resp.ok) return json(resp);
      var lastHost = null;
      var multi = /^(ssh|pod|node)$/.test(block.getAttribute("data-target"));
      var result = null;
      function handle(name, d) {
        if (name === "output") {
          if (multi && d.host !== lastHost) {
            code.appendChild(el("span", "host-sep", "── " + d.host + " ──\n"));
            lastHost = d.host;
          }
          code.appendChild(doc.createTextNode(d.data));
          var pre = code.parentNode;
          if (pre.scrollHeight - pre.scrollTop - pre.clientHeight < 80) pre.scrollTop = pre.scrollHeight;
        } else if (name === "skipped") {
          code.appendChild(el("span", "retry", "… " + d.bytes + " bytes not shown live (the page fell behind); the full result follows\n"));
        } else if (name === "progress" && d.Kind === "retry") {
          // In the page's words when the parts came (the executor's in the title).
          var line = d.Attempt ? T("retry_line", "attempt %d of %d failed: %s; retrying in %s").replace("%d", d.Attempt).replace("%d", d.Attempts)
            .replace("%s", (d.Reasons || []).map(reasonText).join("; ")).replace("%s", d.Wait) : d.Message;
          var rs = el("span", "retry", "… " + line + "\n");
          rs.title = d.Message;
          code.appendChild(rs);
        } else if (name === "done") {
          result = d;
        }
      }
      return events(resp, function (name, d) { handle(name, d); return !!result; }).then(function () { return result; });
    });
  }

  // ---------- plans: run a step, run from here ----------
  // Each step gets "Run this step" and "Run from here". One confirmation
  // lists every block the plan goes through as the executor would take it
  // (POST /api/plans/preview: where each runs, which ask first, which are
  // manual, which are skipped and why); the reader confirms once, ticks the
  // manual steps already done, and the plan runs (POST /api/plans), each
  // block streaming into its own result box. It stops at the first failure
  // and at a manual step not done, which the bar names with a button that
  // goes on from there once it is done.
  var planBar = null, planBusy = false;
  function planParams() {
    var params = {};
    var vals = window.Cairn.values({ secrets: true });
    Object.keys(vals).forEach(function (k) {
      var v = vals[k];
      if (v === true || v === false) v = String(v);
      if (v != null && v !== "") params[k] = String(v);
    });
    return params;
  }
  function planHashes() {
    var h = {};
    $$(".cb[data-block][data-hash]").forEach(function (b) { h[b.getAttribute("data-block")] = b.getAttribute("data-hash"); });
    return h;
  }
  function initPlans() {
    $$("section.step[data-step]").forEach(function (step) {
      var title = $(".step-title", step);
      if (!title || $(".step-run", title)) return;
      if (!$(".cb[data-block][data-target]", step)) return;
      var id = step.getAttribute("data-step");
      var box = el("span", "step-run");
      [["step", T("run_step", "Run this step")], ["from", T("run_from_here", "Run from here")]].forEach(function (kv) {
        var b = el("button", "step-run-" + kv[0], kv[1]);
        b.type = "button";
        b.setAttribute("data-plan", kv[0]);
        b.addEventListener("click", function (e) {
          e.preventDefault();
          e.stopPropagation();
          var sel = {};
          sel[kv[0]] = id;
          planPreview(sel, kv[0] === "step" ? T("plan_title_step", "Run this step?") : T("plan_title_from", "Run from this step to the end?"));
        });
        box.appendChild(b);
      });
      var anchor = $("a.anchor", title);
      title.insertBefore(box, anchor);
    });
    setPlanButtons();
  }
  function setPlanButtons() {
    $$(".step-run button").forEach(function (b) { b.disabled = planBusy || !up; });
  }
  function planBody(sel, extra) {
    var body = { runbook: slug, hashes: planHashes(), params: planParams() };
    Object.keys(sel).forEach(function (k) { body[k] = sel[k]; });
    Object.keys(extra || {}).forEach(function (k) { body[k] = extra[k]; });
    return body;
  }
  function planPreview(sel, title) {
    if (planBusy) return;
    api("/plans/preview", { method: "POST", body: JSON.stringify(planBody(sel)) }).then(json).then(function (p) {
      return planConfirm(title, p.blocks || []).then(function (answer) {
        if (answer) planStart(sel, answer);
      });
    }).catch(function (err) {
      if (err.code === "missing_capture" && err.missing) return planMissing(err);
      planMessage("error", reasonText(err.message || String(err)));
    });
  }
  // planMissing says, in the page's words, that the plan would reach a
  // block reading a value nothing before it captures (a secret one is
  // never kept between runs), and offers to start at the first step that
  // captures it.
  function planMissing(err) {
    var m = err.missing;
    var title = function (id) {
      var sec = doc.getElementById(id);
      var t = sec && $(".step-text", sec);
      return t ? t.textContent.trim() : id;
    };
    var msg = T("plan_missing", "block %s needs $%s, which no block before it in this run captures").replace("%s", m.block).replace("%s", m.name);
    if (m.secret) msg += T("plan_missing_secret", " (a secret value: not kept between runs)");
    var steps = (m.steps || []).map(function (st) {
      return "'" + title(st.step) + "'" + (st.when ? " (" + T("plan_missing_when", "with ") + st.when + ")" : "");
    });
    if (steps.length) msg += ". " + T("plan_missing_start", "Start at: ") + steps.join(", ");
    var go = null, first = (m.steps || [])[0];
    if (first) {
      go = el("button", "plan-again", T("plan_start_at", "Run from '%s'").replace("%s", title(first.step)));
      go.type = "button";
      go.addEventListener("click", function () { planPreview({ from: first.step }, T("plan_title_from", "Run from this step to the end?")); });
    }
    planMessage("error", msg, go);
    if (planBar) planBar.title = err.message;
  }
  // targetsLine says which pods or nodes a pod or node block of a preview
  // runs on now (at most 20 named), or that they are known only once it
  // runs (the executor's reason in the title).
  function targetsLine(b) {
    if (b.target !== "pod" && b.target !== "node") return null;
    var label = b.target === "pod" ? T("where_pods", "pods") : T("where_nodes", "nodes");
    if (b.targets_error || !b.targets) {
      var u = el("div", "plan-targets plan-targets-unknown", label + ": " + T("targets_later", "listed when it runs"));
      u.title = b.targets_error || "";
      return u;
    }
    var more = b.targets.length > 20 ? " " + T("and_more", "and %d more").replace("%d", b.targets.length - 20) : "";
    return el("div", "plan-targets", label + " (" + b.targets.length + "): " + b.targets.slice(0, 20).join(", ") + more);
  }
  // targetsFor asks the executor which pods or nodes one block would run
  // on now (a preview of the block alone); a block's confirmation shows it.
  function targetsFor(block) {
    var id = block.getAttribute("data-block");
    return api("/plans/preview", { method: "POST", body: JSON.stringify(planBody({ block: id })) }).then(json).then(function (p) {
      var b = (p.blocks || [])[0];
      return b ? targetsLine(b) : null;
    });
  }
  if (window.Cairn) window.Cairn.targetsFor = targetsFor;
  else doc.addEventListener("cairn:ready", function () { window.Cairn.targetsFor = targetsFor; }, { once: true });

  // planConfirm shows the plan and resolves with the answers ({confirm,
  // done}) or null.
  function planConfirm(title, blocks) {
    var runs = blocks.filter(function (b) { return !b.skip; }).length;
    var sum = el("p", "plan-sum", T("plan_sum", "%d of %d blocks run; each stops the plan if it fails.").replace("%d", runs).replace("%d", blocks.length));
    var ol = el("ol", "plan-list");
    var confirm = [], manual = [];
    blocks.forEach(function (b) {
      var li = el("li", "plan-item plan-" + (b.skip || "run"));
      li.setAttribute("data-block", b.block);
      var blockEl = doc.getElementById("block-" + b.block);
      var name = blockEl && $(".cb-title", blockEl) ? $(".cb-title", blockEl).textContent.trim() : "";
      var head = el("div", "plan-head");
      head.appendChild(el("code", "plan-id", b.block));
      if (name && name !== b.block) head.appendChild(el("span", "plan-name", name));
      li.appendChild(head);
      if (b.skip === "condition") {
        li.appendChild(el("div", "plan-why", b.when ? T("plan_cond_false", "skipped, false with the chosen values: ") + b.when : T("plan_skipped", "skipped: ") + b.why));
      } else if (b.skip === "manual") {
        var lab = el("label", "plan-done");
        var cb = el("input");
        cb.type = "checkbox";
        cb.value = b.block;
        manual.push(cb);
        lab.appendChild(cb);
        lab.appendChild(doc.createTextNode(" " + T("plan_manual_done", "a step done by hand; tick it if it is done already (else the plan stops there)")));
        li.appendChild(lab);
      } else {
        // Where it runs in the page's words (whereFor), else the executor's.
        var where = blockEl ? whereFor(blockEl).map(function (kv) { return kv[0] + ": " + kv[1]; }).join(", ") : "";
        li.appendChild(el("div", "plan-where", where || b.where || ""));
        var tl = targetsLine(b);
        if (tl) li.appendChild(tl);
        if (b.confirm) {
          confirm.push(b.block);
          li.appendChild(el("div", "plan-confirm", T("plan_asks", "changes its target: ") + b.confirm));
        }
      }
      ol.appendChild(li);
    });
    return window.Cairn.ask({ cls: "confirm-plan", title: title, body: [sum, ol], yes: T("plan_run", "Run %d blocks").replace("%d", runs), yesOff: runs === 0 })
      .then(function (yes) {
        return yes ? { confirm: confirm, done: manual.filter(function (c) { return c.checked; }).map(function (c) { return c.value; }) } : null;
      });
  }
  function planMessage(kind, text, action) {
    if (!planBar) {
      planBar = el("div", "plan-bar");
      planBar.setAttribute("role", "status");
      planBar.setAttribute("aria-live", "polite");
      doc.body.appendChild(planBar);
    }
    planBar.innerHTML = "";
    planBar.className = "plan-bar plan-" + kind;
    planBar.appendChild(el("span", "plan-text", text));
    if (action) planBar.appendChild(action);
    if (kind !== "running") {
      var close = el("button", "plan-close", "×");
      close.type = "button";
      close.setAttribute("aria-label", T("close", "Close"));
      close.addEventListener("click", function () { planBar.remove(); planBar = null; });
      planBar.appendChild(close);
    }
  }
  function planStart(sel, answer) {
    planBusy = true;
    setPlanButtons();
    api("/plans", { method: "POST", body: JSON.stringify(planBody(sel, answer)) }).then(json).then(function (started) {
      return planFollow(started.id, sel, answer);
    }).catch(function (err) {
      planMessage("error", reasonText(err.message || String(err)));
    }).then(function () {
      planBusy = false;
      setPlanButtons();
    });
  }
  // planFollow reads the plan's stream: each block as it comes up (its own
  // run followed into its result box), skips, and the end.
  function planFollow(id, sel, answer) {
    var cancel = el("button", "plan-cancel", T("cancel", "Cancel"));
    cancel.type = "button";
    cancel.addEventListener("click", function () { api("/runs/" + id + "/cancel", { method: "POST" }); });
    planMessage("running", T("plan_starting", "starting…"), cancel);
    var cur = null, failed = null, follows = [];
    return api("/runs/" + id + "/events").then(function (resp) {
      if (!resp.ok) return json(resp);
      var result = null;
      function handle(name, d) {
        if (name === "next") {
          cur = d.block;
          planMessage("running", T("plan_at", "%d/%d: ").replace("%d", d.n).replace("%d", d.total) + d.block, cancel);
        } else if (name === "block") {
          var b = doc.getElementById("block-" + d.block);
          if (b) follows.push(follow(d.run, b, runningUI(b)));
        } else if (name === "outcome" && d.status && d.status !== "verified" && !failed) {
          failed = d.block;
        } else if (name === "outcome" && d.skip && d.skip !== "condition") {
          var sb = doc.getElementById("block-" + d.block);
          if (sb) {
            var box = resultBox(sb);
            box.innerHTML = "";
            box.className = "cb-result";
            box.setAttribute("data-status", d.skip === "manual" ? "manual" : "skipped");
            var why = { manual: T("plan_manual_ok", "done by hand"), "after-failure": T("plan_after_failure", "not run: an earlier block failed"),
              unconfirmed: T("plan_unconfirmed", "not run: not confirmed") }[d.skip] || T("plan_skipped", "skipped: ") + d.why;
            box.appendChild(el("p", "cb-skip", why));
            box.title = d.why || "";
          }
        } else if (name === "done") {
          result = d;
        }
      }
      return events(resp, function (name, d) { handle(name, d); return !!result; }).then(function () { return result; });
    }).then(function (rec) {
      return Promise.all(follows).then(function () { return rec; });
    }).then(function (rec) {
      if (!rec) throw new Error(T("stream_lost", "the connection to the executor ended before the run did"));
      var sum = (rec.output || "").trim();
      var cb = cur && doc.getElementById("block-" + cur);
      if (rec.status === "verified") {
        planMessage("verified", T("plan_done", "done: ") + sum);
      } else if (rec.status === "error" && cb && cb.getAttribute("data-target") === "manual") {
        // Stopped at a manual step: once it is done, go on from there.
        var go = el("button", "plan-continue", T("plan_continue", "Done — continue"));
        go.type = "button";
        var manualID = cur;
        cb.classList.add("cb-waiting");
        go.addEventListener("click", function () {
          cb.classList.remove("cb-waiting");
          var next = { from_block: manualID };
          if (sel.step) next.step = sel.step;
          planStart(next, { confirm: answer.confirm, done: (answer.done || []).concat([manualID]) });
        });
        planMessage("manual", T("plan_stopped_manual", "stopped at a step done by hand: ") + manualID, go);
        cb.scrollIntoView({ block: "center" });
      } else if (rec.status === "cancelled") {
        planMessage("cancelled", T("plan_cancelled", "stopped: cancelled"));
      } else if (rec.status === "failed" && failed) {
        var fb = doc.getElementById("block-" + failed);
        var st = fb && fb.closest("section.step");
        var stTitle = st && $(".step-text", st) ? $(".step-text", st).textContent.trim() : "";
        // Once it is fixed, the plan goes on from that step: one button.
        var again = null;
        if (st && st.getAttribute("data-step")) {
          again = el("button", "plan-again", T("plan_again", "Run again from this step"));
          again.type = "button";
          again.addEventListener("click", function () {
            planPreview({ from: st.getAttribute("data-step") }, T("plan_title_from", "Run from this step to the end?"));
          });
        }
        planMessage("failed", T("plan_failed", "stopped at a failure: ") + failed +
          (stTitle ? " — " + T("plan_resume", "fix it, then run again from step '%s'").replace("%s", stTitle) : ""), again);
        if (fb) fb.scrollIntoView({ block: "center" });
      } else {
        planMessage("failed", T("plan_error", "stopped: ") + (rec.reasons || []).map(reasonText).join("; "));
      }
    });
  }

  // ---------- start ----------
  // Every page (index, runbooks, 404) takes the token from the fragment and
  // keeps it for the tab (sessionStorage survives navigation), so the URL
  // the executor printed pairs wherever it lands; a fragment pasted into an
  // open tab pairs too (hashchange).
  function runTips(text) {
    $$(".cb-run[aria-disabled=true]").forEach(function (btn) {
      btn.title = text;
      btn.setAttribute("data-tip", text);
    });
  }
  var started = false;
  function start() {
    if (started) return;
    started = true;
    window.addEventListener("hashchange", function () {
      if (location.hash.indexOf("cairn-token=") >= 0) connect();
    });
    connect();
  }
  function connect() {
    readPairing();
    conf = pairing();
    var own = window.Cairn.servedHere(); // cairn.js loads this file
    if (!conf) {
      if (own) {
        pill("off", T("exec_not_paired", "Not paired with the executor"));
        runTips(T("run_not_paired", "This tab is not paired yet: open the pairing URL that cairn serve printed."));
      } else {
        runTips(T("run_static", "To run steps, start cairn daemon and open the pairing URL it prints."));
      }
      return;
    }
    if (!conf.url) {
      if (!own) { // a served-elsewhere page needs #cairn-executor
        runTips(T("run_static", "To run steps, start cairn daemon and open the pairing URL it prints."));
        return;
      }
      conf.url = "";
    }
    health(true);
  }

  // ---------- terminals ----------
  // With cairn serve --terminal, each manual step gets a Terminal button.
  // The terminal itself (terminal.js and xterm.js) loads on the first
  // click, or at once when this tab had terminals open before a reload.
  var termsOn = false, termLoad = null;
  function termScript() {
    if (!termLoad) {
      termLoad = new Promise(function (done, fail) {
        var s = doc.createElement("script");
        s.src = assetsBase() + "terminal.js";
        s.onload = done;
        s.onerror = function () { fail(new Error("terminal.js did not load")); };
        doc.head.appendChild(s);
      });
    }
    return termLoad;
  }
  function assetsBase() {
    var me = $('script[src$="executor.js"]');
    return me ? me.src.replace(/executor\.js(\?.*)?$/, "") : "/assets/";
  }
  function terminals(on) {
    if (on === termsOn || !slug) return;
    termsOn = on;
    $$('.cb-exec[data-target="manual"] .cb-actions').forEach(function (actions) {
      var b = $(".cb-term", actions);
      if (!on) { if (b) b.remove(); return; }
      if (b) return;
      b = el("button", "cb-term", T("term_open", "Terminal"));
      b.type = "button";
      b.title = T("term_open_title", "Open a terminal here and do it by hand");
      b.addEventListener("click", function () {
        var block = b.closest(".cb");
        termScript().then(function () { window.CairnTerminal.open(block); }).catch(function (e) { alert(e.message); });
      });
      actions.insertBefore(b, $(".cb-run", actions));
    });
    // One more beside the executor's status, for a shell that belongs to
    // no step.
    var pillBtn = $("#cairn-term-open");
    if (!on) { if (pillBtn) pillBtn.remove(); }
    else if (!pillBtn && $("#cairn-exec-status")) {
      pillBtn = el("button", "cb-term exec-term", T("term_open", "Terminal"));
      pillBtn.id = "cairn-term-open";
      pillBtn.type = "button";
      pillBtn.title = T("term_open_any", "Open a terminal here or on a host of this runbook");
      pillBtn.addEventListener("click", function () {
        termScript().then(function () { window.CairnTerminal.open(null); }).catch(function (e) { alert(e.message); });
      });
      $("#cairn-exec-status").after(pillBtn);
    }
    if (on && window.CairnTerminal === undefined) {
      try {
        if (JSON.parse(sessionStorage.getItem("cairn:terms:" + slug) || "[]").length) termScript().then(function () { window.CairnTerminal.reattach(); });
      } catch (e) {}
    }
  }
  // What terminal.js uses of this file.
  window.Cairn = window.Cairn || {};
  window.Cairn.exec = {
    api: function (p, o) { return api(p, o); }, json: json, slug: slug,
    base: function () { return conf.url; },
    assets: assetsBase,
    reload: function () { return loadResults(true); }
  };

  // health asks the executor how it is and what blocks would run against
  // (cluster, SSH hosts, the sandbox coming up or going away), and keeps
  // asking while the tab is open: the pill and the block headers follow.
  var timer = null, up = false, targetsKey = null, current = null;
  function health(first) {
    clearTimeout(timer);
    return api("/health").then(json).then(function (h) {
      var was = up;
      up = true;
      current = h.targets || null;
      showTargets(current);
      terminals(!!h.terminals);
      if (slug && (!was || first)) {
        if (window.Cairn && window.Cairn.enableRun) window.Cairn.enableRun(run);
        initPlans();
        loadResults(!first).catch(function () {});
      }
      var key = JSON.stringify(current);
      if (slug && key !== targetsKey) {
        targetsKey = key;
        loadTarget().catch(function () {});
      }
    }).catch(function (err) {
      up = false;
      setPlanButtons();
      var why = err.message || String(err);
      pill("off", T("exec_offline", "Executor not reachable") + ": " + why);
      if (window.Cairn && window.Cairn.disableRun) {
        window.Cairn.disableRun(T("run_unreachable", "The executor is not reachable") + " (" + (conf.url || location.host) + "): " + why);
      } else {
        runTips(T("run_unreachable", "The executor is not reachable") + " (" + (conf.url || location.host) + "): " + why);
      }
    }).then(function () {
      // Bounded: one request every few seconds, and none while the tab is hidden.
      var busy = current && current.sandbox && /^(building|starting)$/.test(current.sandbox.state);
      timer = setTimeout(function again() {
        if (doc.hidden) { timer = setTimeout(again, 2000); return; }
        health(false);
      }, busy ? 2000 : 5000);
    });
  }

  // shortKube names the context of a target ('context "x" (cluster ...)').
  function shortKube(s) {
    s = String(s || "");
    var m = /^context "([^"]*)"/.exec(s);
    return m ? m[1] : s.replace(/ \(.*$/, "");
  }
  function showTargets(t) {
    var parts = [T("exec_connected", "Executor connected")];
    var state = "on";
    if (t) {
      var sb = t.sandbox || {};
      // The executor's own words (English) go inline on an English page,
      // and into the title on others.
      var say = function (s) { return s && english ? ": " + s : ""; };
      if (sb.state === "building" || sb.state === "starting") {
        state = "busy";
        parts.push(T("sandbox_" + sb.state, sb.state === "building" ? "building the sandbox" : "starting the sandbox") + say(sb.message));
      } else if (sb.state === "unavailable" || sb.state === "unhealthy") {
        state = "warn";
        parts.push(T("sandbox_" + sb.state, "sandbox " + sb.state) + say(sb.message));
      } else if (sb.state === "replaced") {
        state = "warn";
        parts.push(T("sandbox_replaced", "another sandbox took the place of the one in use"));
      }
      // Only the targets this page's blocks use (every one on the index).
      if (uses("kube")) {
        if (t.kube) parts.push(T("where_cluster", "cluster") + " " + shortKube(t.kube));
        else if (state === "on") {
          state = "warn";
          parts.push(T("kube_off", "kube blocks are off") + (sb.state === "absent" ? ": " + T("sandbox_absent", "no cluster and no sandbox (cairn sandbox up)") : ""));
        }
      }
      if (uses("ssh") && t.hosts && t.hosts.length) parts.push("SSH " + t.hosts.join(" "));
    }
    pill(state, parts.join(" · "));
    sandboxOffer(t && t.sandbox);
    var p = $("#cairn-exec-status");
    if (p) p.title = t ? [t.kube || t.kube_error || "", t.ssh || "", (t.sandbox || {}).message || ""].filter(Boolean).join("\n") : "";
  }

  var english = !html.lang || html.lang.indexOf("en") === 0;
  // uses says whether the page has blocks that run against target kind
  // ("kube" counts pod and node blocks too); a page without blocks (the
  // index) uses every target.
  function uses(kind) {
    var blocks = $$(".cb[data-target]");
    if (!slug || !blocks.length) return true;
    var kinds = kind === "kube" ? ["kube", "pod", "node"] : [kind];
    return blocks.some(function (b) { return kinds.indexOf(b.getAttribute("data-target")) >= 0; });
  }

  // sandboxOffer: another sandbox replaced the one this server used. Blocks
  // stay off until the reader says to use it; the server never switches
  // clusters on its own.
  function sandboxOffer(sb) {
    var box = $("#cairn-sandbox-offer");
    if (!sb || sb.state !== "replaced" || !sb.offer) { if (box) box.remove(); return; }
    if (box && box.getAttribute("data-offer") === sb.offer) return;
    if (box) box.remove();
    box = el("div", "sandbox-offer");
    box.id = "cairn-sandbox-offer";
    box.setAttribute("role", "alert");
    box.setAttribute("data-offer", sb.offer);
    var msg = el("p");
    msg.textContent = T("sandbox_offer", "The sandbox this page ran against is gone and another one runs in its folder. Kube and SSH blocks stay off until you choose to use it.");
    msg.title = sb.message || "";
    var shape = el("p", "sandbox-offer-shape");
    shape.textContent = sb.dir + (sb.offer_shape ? " · " + sb.offer_shape : "");
    var btn = el("button", "btn btn-small sandbox-accept");
    btn.type = "button";
    btn.textContent = T("sandbox_accept", "Use the new sandbox");
    btn.addEventListener("click", function () {
      btn.disabled = true;
      api("/sandbox/accept", { method: "POST", body: JSON.stringify({ id: sb.offer }) }).then(json)
        .then(function () { box.remove(); return health(false); })
        .catch(function (err) { btn.disabled = false; msg.textContent = err.message || String(err); });
    });
    box.append(msg, shape, btn);
    var p = $("#cairn-exec-status");
    if (p) p.after(box); else (doc.querySelector("main") || doc.body).prepend(box);
  }

  // whereFor says what a block would run against, for the confirmation.
  function whereFor(block) {
    var target = block.getAttribute("data-target"), lines = [];
    var fanned = target === "pod" || target === "node";
    if (target === "kube" || fanned || block.hasAttribute("data-kube")) {
      var k = (current && current.kube) || (kubeWhere && kubeWhere.kube) || "";
      lines.push([T("where_cluster", "cluster"), k || (current && current.kube_error) || "?"]);
      var ns = block.getAttribute("data-namespace");
      if (ns && window.Cairn && window.Cairn.fillText) lines.push([T("where_namespace", "namespace"), window.Cairn.fillText(ns)]);
    }
    if (fanned) {
      // The pods or nodes as the block chooses them; the run lists each.
      var sel = $(".cb-hosts", block);
      lines.push([target === "pod" ? T("where_pods", "pods") : T("where_nodes", "nodes"), sel ? sel.textContent.replace(/^→\s*/, "") : "?"]);
      if (target === "node") lines.push(["root", T("where_node_pod", "through a privileged pod on each node, deleted afterwards")]);
    } else if (target === "ssh") {
      var h = $(".cb-hosts", block);
      lines.push([T("where_hosts", "hosts"), h ? h.textContent.replace(/^→\s*/, "") : "?"]);
      if ($(".flag-sudo", block)) lines.push(["sudo", T("where_sudo", "as root")]);
    } else if (target !== "kube" && !block.hasAttribute("data-kube")) {
      lines.push([T("where_local", "this machine"), location.hostname]);
    }
    return lines;
  }
  if (window.Cairn) window.Cairn.whereFor = whereFor;
  else doc.addEventListener("cairn:ready", function () { window.Cairn.whereFor = whereFor; }, { once: true });

  if (window.Cairn && window.Cairn.ready) start();
  else doc.addEventListener("cairn:ready", start, { once: true });
  // Fallback when cairn.js is missing or failed to set up.
  window.addEventListener("load", function () { setTimeout(start, 0); }, { once: true });
})();
