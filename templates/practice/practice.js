/* The practice page: draw a problem, check the answers, show the worked steps and the progress.
 *
 * Two modes, one script. "server": `qkvquiz practice` answers four small JSON requests on this
 * computer, and every check is the grader's own. "static": the page holds solved variants; an
 * answer is read by parse.js (the grader's grammar) and compared with the stored exact values
 * within the bands the part's tolerance allows (computed by the grader's Tolerance), with the
 * values of each known mistake (diagnosis) and of a later part re-run on an earlier known
 * mistake (carried credit, where the grader gives it). Every sentence is a catalog message
 * marked with _(), shown in the student's language from the form's data-messages.
 */
(function () {
  "use strict";

  var parse = window.qkvquizParse;
  var _ = parse.gettext;
  var root = document.getElementById("practice");
  var mode = root.dataset.mode;
  var picker = document.getElementById("topic");
  var problemBox = document.getElementById("problem");
  var summary = document.getElementById("summary");
  var worked = document.getElementById("worked");
  var workedBody = document.getElementById("worked-body");
  var seedShown = document.getElementById("seed");
  var STORE = "qkvquiz:practice:progress";
  var current = null; // {topic, seed, variant (static)}
  var staticData = null, unpacked = {}, shown = {};
  // --seed: the first problem of each topic is the one it names (a reload draws it again).
  var firstSeed = root.dataset.seed || null, seeded = {};

  // ------------------------------------------------------------- the page's own small helpers

  function say(text, bad) {
    summary.textContent = text;
    summary.classList.toggle("bad", !!bad);
  }

  function post(path, body) {
    return fetch(path, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
      credentials: "omit", cache: "no-store"
    }).then(function (response) {
      return response.json().then(function (doc) {
        if (!response.ok) throw new Error(doc && doc.error ? doc.error : String(response.status));
        return doc;
      });
    });
  }

  function fieldsets() {
    return Array.prototype.slice.call(problemBox.querySelectorAll("fieldset.part"));
  }

  function boxesOf(fieldset) {
    return Array.prototype.slice.call(fieldset.querySelectorAll("input.entry"));
  }

  function shapeOf(fieldset) {
    var s = fieldset.dataset.shape;
    return s ? s.split(",").map(Number) : [];
  }

  /** The answers as the grader reads them: a text per box (null when empty), nested by shape. */
  function collect() {
    var answers = {};
    fieldsets().forEach(function (fieldset) {
      var shape = shapeOf(fieldset), boxes = boxesOf(fieldset);
      var value = function (input) { var t = parse.strip(input.value); return t ? t : null; };
      if (shape.length === 0) { answers[fieldset.dataset.part] = value(boxes[0]); return; }
      var build = function (level, offset) {
        var out = [], stride = 1, k;
        for (k = level + 1; k < shape.length; k++) stride *= shape[k];
        for (k = 0; k < shape[level]; k++) {
          out.push(level === shape.length - 1 ? value(boxes[offset + k]) : build(level + 1, offset + k * stride));
        }
        return out;
      };
      answers[fieldset.dataset.part] = build(0, 0);
    });
    return answers;
  }

  // ------------------------------------------------------------- showing a problem and verdicts

  function clearMarks() {
    fieldsets().forEach(function (fieldset) {
      boxesOf(fieldset).forEach(function (input) { input.classList.remove("right", "wrong", "bad"); });
      var status = fieldset.querySelector(".part-status");
      status.textContent = "";
      status.className = "part-status";
      Array.prototype.slice.call(fieldset.querySelectorAll(".diagnosis, .carry-note")).forEach(function (n) { n.remove(); });
    });
  }

  function showProblem(topic, seed, html) {
    current = { topic: topic, seed: seed };
    problemBox.innerHTML = html; // the problem as qkvquiz rendered it (escaped text, our own markup)
    seedShown.textContent = seed;
    worked.hidden = true;
    workedBody.innerHTML = "";
    say("", false);
    boxesOf(problemBox).forEach(function (input, k, all) {
      input.addEventListener("input", function () { input.classList.remove("right", "wrong", "bad"); });
      input.addEventListener("keydown", function (event) {
        if (event.key === "Enter") {
          event.preventDefault();
          var next = all[k + (event.shiftKey ? -1 : 1)];
          if (next) next.focus(); else document.getElementById("check").focus();
        }
      });
    });
  }

  var VERDICTS = {
    correct: function () { return _("Right."); },
    carried: function () { return _("Right for your own earlier answer: carried credit."); },
    partial: function () { return _("Not right yet."); },
    wrong: function () { return _("Not right yet."); },
    format: function () { return _("Could not be read."); },
    missing: function () { return _("Not answered."); }
  };

  /** A clause as a sentence: its first letter capitalised, its full stop (the language's). The
   * grader's clauses ("no answer given", "no credit is carried forward: …") read as sentences. */
  function sentence(text) {
    text = String(text || "").trim();
    if (!text) return "";
    text = text.charAt(0).toUpperCase() + text.slice(1);
    return /[.\u3002!?\uff01\uff1f]$/.test(text) ? text : _("%(sentence)s.", { sentence: text });
  }

  function note(fieldset, cls, text) {
    var p = document.createElement("p");
    p.className = cls;
    p.textContent = text;
    fieldset.appendChild(p);
  }

  /** Mark each part as the check found it: {part, verdict, entry_ok, message, diagnosis, carry}. */
  function showVerdicts(parts) {
    clearMarks();
    var right = 0;
    parts.forEach(function (r) {
      var fieldset = problemBox.querySelector('fieldset.part[data-part="' + CSS.escape(r.part) + '"]');
      if (!fieldset) return;
      var boxes = boxesOf(fieldset);
      if (r.entry_ok && r.verdict !== "correct" && r.verdict !== "carried") {
        boxes.forEach(function (input, k) {
          if (!input.disabled && input.value.trim()) input.classList.add(r.entry_ok[k] ? "right" : "wrong");
        });
      } else if (r.verdict === "correct" || r.verdict === "carried") {
        boxes.forEach(function (input) { if (!input.disabled) input.classList.add("right"); });
      } else if (r.verdict === "format") {
        boxes.forEach(function (input) { if (input.value.trim()) input.classList.add("bad"); });
      }
      if (r.verdict === "correct") right++;
      var status = fieldset.querySelector(".part-status");
      // The verdict in bold, then the grader's sentence (a language without spaces between them uses none).
      var verdict = document.createElement("strong");
      verdict.textContent = VERDICTS[r.verdict] ? VERDICTS[r.verdict]() : r.verdict;
      status.textContent = "";
      status.appendChild(verdict);
      // Nothing more to say where every box is empty: the verdict says it.
      var blank = r.verdict === "missing" && r.message === _("no answer given (every box is empty)");
      if (r.message && r.verdict !== "carried" && !blank) {
        var joined = _("%(sentence)s %(next)s", { sentence: "\u0000", next: sentence(r.message) });
        status.appendChild(document.createTextNode(joined.slice(joined.indexOf("\u0000") + 1)));
      }
      status.className = "part-status " + (r.verdict === "correct" ? "right" : r.verdict === "carried" ? "carried" : "wrong");
      status.dataset.verdict = r.verdict;
      (r.diagnosis || []).forEach(function (text) {
        note(fieldset, "diagnosis", _("Likely mistake: %(sentence)s", { sentence: text })); // a family's own sentence
      });
      // The property every right answer has and this one lacks: the line that teaches most.
      (r.invariants || []).forEach(function (text) {
        note(fieldset, "diagnosis invariant", _("Check that fails: %(sentence)s Your answer does not have this property.",
                                      { sentence: text }));
      });
      if (r.carry) note(fieldset, "carry-note", sentence(r.carry));
    });
    say(_("Parts right: %(right)s of %(total)s.", { right: right, total: parts.length }), right < parts.length);
  }

  // ------------------------------------------------------------- progress

  function showProgress(rows) {
    var body = document.querySelector("#progress tbody");
    body.textContent = "";
    rows.forEach(function (row) {
      var tr = document.createElement("tr");
      [row.title, String(row.checks), _("%(right)s of %(parts)s", { right: row.right, parts: row.parts })].forEach(function (text) {
        var td = document.createElement("td"); td.textContent = text; tr.appendChild(td);
      });
      var td = document.createElement("td");
      if (row.mistakes.length) {
        var ul = document.createElement("ul");
        row.mistakes.forEach(function (m) {
          var li = document.createElement("li");
          li.textContent = _("%(sentence)s (%(count)s×)", { sentence: m.text, count: m.count });
          ul.appendChild(li);
        });
        td.appendChild(ul);
      } else {
        td.textContent = "—";
      }
      tr.appendChild(td);
      body.appendChild(tr);
    });
  }

  // Static mode keeps the record in this browser's storage (on this computer only).
  function localRecord() {
    try { return JSON.parse(window.localStorage.getItem(STORE) || "{}") || {}; } catch (err) { return {}; }
  }

  function localRows() {
    var record = localRecord();
    return Object.keys(record).sort().map(function (family) {
      var row = record[family];
      var mistakes = Object.keys(row.mistakes || {}).map(function (text) { return { text: text, count: row.mistakes[text] }; });
      mistakes.sort(function (a, b) { return b.count - a.count; });
      return { title: row.title, checks: row.checks, parts: row.parts, right: row.right, mistakes: mistakes };
    });
  }

  function localRecordCheck(topic, parts) {
    var record = localRecord();
    var info = staticData.topics[topic];
    var row = record[info.family] || { checks: 0, parts: 0, right: 0, mistakes: {} };
    row.title = info.title; // as the picker names it
    row.checks++;
    row.parts += parts.length;
    parts.forEach(function (r) {
      if (r.verdict === "correct") row.right++;
      (r.diagnosis || []).forEach(function (text) { row.mistakes[text] = (row.mistakes[text] || 0) + 1; });
    });
    record[info.family] = row;
    try { window.localStorage.setItem(STORE, JSON.stringify(record)); } catch (err) { /* storage off: fine */ }
    showProgress(localRows());
  }

  // ------------------------------------------------------------- static mode: checking in the browser

  function unpack(topic) {
    if (unpacked[topic]) return Promise.resolve(unpacked[topic]);
    var bytes = Uint8Array.from(atob(staticData.topics[topic].variants), function (c) { return c.charCodeAt(0); });
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text().then(function (text) {
      var doc = JSON.parse(text);
      // A picture every variant repeats is stored once: put it back where its mark stands.
      var restore = function (html) {
        return html.replace(/\u0001(\d+)\u0001/g, function (m, n) { return doc.shared[Number(n)]; });
      };
      doc.variants.forEach(function (v) { v.html = restore(v.html); v.worked = restore(v.worked); });
      unpacked[topic] = doc.variants;
      return unpacked[topic];
    });
  }

  function expectedValue(v) {
    if (v === "inf") return Infinity;
    if (v === "-inf") return -Infinity;
    return v; // a number, or null: no value (matches nothing)
  }

  /** Does value g count as the stored target k (values and bands) at entry i? The grader's test. */
  function passes(g, target, i, wide) {
    var x = expectedValue(target.values[i]);
    if (x === null || Number.isNaN(g)) return false;
    if (!isFinite(x)) return g === x;
    return Math.abs(g - x) <= (wide ? target.wide[i] : target.band[i]);
  }

  function allMatch(values, target, asked) {
    for (var i = 0; i < values.length; i++) {
      if (asked && !asked[i]) continue;
      if (!passes(values[i], target, i)) return false;
    }
    return true;
  }

  /** A slip made entry by entry (a masked score written as 0): every entry right or the slip's,
   *  and at least one the slip's (grade.checks.matches_mistake). */
  function someMatch(values, target, data, asked) {
    var any = false;
    for (var i = 0; i < values.length; i++) {
      if (asked && !asked[i]) continue;
      var slip = passes(values[i], target, i), right = passes(values[i], data, i);
      if (!slip && !right) return false;
      if (slip && !right) any = true;
    }
    return any;
  }

  /** The share of the points the entries earn, the grader's one rule (grade.checks.entry_credit):
   *  the entries a mask fixes together carry maskWeight of the part (all of it when nothing else
   *  is asked), earned when all are right; the other asked entries share the rest alike. */
  function entryCredit(ok, fixed, asked, maskWeight) {
    var free = 0, earned = 0, masked = 0, maskedRight = true;
    for (var i = 0; i < ok.length; i++) {
      if (asked && !asked[i]) continue;
      if (fixed && fixed[i]) { masked++; if (!ok[i]) maskedRight = false; continue; }
      free++;
      if (ok[i]) earned++;
    }
    if (!masked) return free ? earned / free : 1;
    var block = free ? maskWeight : 1;
    return (maskedRight ? block : 0) + (free ? (1 - block) * earned / free : 0);
  }

  /** Read one part's boxes: {state: "missing"|"format"|"ok", values, message}. */
  function readPart(fieldset, data) {
    var boxes = boxesOf(fieldset);
    var texts = boxes.map(function (b) { return b.disabled ? "" : parse.strip(b.value); });
    if (texts.every(function (t) { return !t; })) return { state: "missing" };
    if (data.kind === "shape") {
      try { return { state: "ok", values: parse.parseShape(texts[0], data.values.length) }; }
      catch (err) { return { state: "format", message: err.message }; }
    }
    var values = [], unread = [], readable = 0, first = "";
    for (var k = 0; k < boxes.length; k++) {
      if (!texts[k]) { values.push(NaN); continue; } // an empty box is a wrong entry, as the grader reads it
      try { values.push(parse.parseEntry(texts[k])); readable++; }
      catch (err) {
        // As the grader reads it: an unreadable box is a wrong entry, named, while another box can be read.
        var where = boxes[k].dataset.where;
        values.push(NaN);
        first = first || (where ? _("%(where)s: %(error)s", { where: where, error: err.message }) : err.message);
        unread.push(where ? _("%(where)s: %(error)s; it counts as a wrong entry", { where: where, error: err.message }) : err.message);
      }
    }
    if (unread.length && !readable) return { state: "format", message: first };
    return { state: "ok", values: values, unread: unread };
  }

  /** The properties every right value of the part has that ``values`` lacks (the grader's
   * invariants, as the page's data states them): their sentences. An answer with an empty or
   * unreadable box is not judged (the box, not the method, broke them), as the grader does. */
  function broken(values, data) {
    if (values.some(function (v) { return Number.isNaN(v); })) return [];
    var width = data.shape.length ? data.shape[data.shape.length - 1] : 1;
    return (data.invariants || []).filter(function (inv) {
      if (inv.kind === "rows_sum") {
        for (var r = 0; r * width < values.length; r++) {
          if (inv.rows && !inv.rows[r]) continue;
          var sum = 0, slack = 0;
          for (var c = 0; c < width; c++) { sum += values[r * width + c]; slack += data.band[r * width + c]; }
          if (!(Math.abs(sum - inv.target) <= slack)) return true;
        }
        return false;
      }
      if (inv.kind === "zero") {
        return values.some(function (v, i) { return inv.where[i] && !(Math.abs(v) <= data.band[i]); });
      }
      return false;
    }).map(function (inv) { return inv.text; });
  }

  /** One variant's parts checked as the grader checks them, from the stored values. */
  function checkVariant(variant, readings) {
    var results = {};
    variant.order.forEach(function (id) {
      var data = variant.parts[id], reading = readings[id];
      var r = { part: id, verdict: "", entry_ok: null, message: "", diagnosis: [], invariants: [], carry: "" };
      results[id] = r;
      if (reading.state === "missing") { r.verdict = "missing"; r.message = _("no answer given (every box is empty)"); return; }
      if (reading.state === "format") { r.verdict = "format"; r.message = reading.message; return; }
      var asked = data.asked, values = reading.values, ok = [], right = 0, count = 0;
      // Within what rounding the unasked steps explains too (data.wide), unless a known mistake
      // explains the answer: that keeps the plain tolerance, as in the grader.
      var wide = !!data.wide && !data.mistakes.some(function (m) { return allMatch(values, m, asked); });
      for (var i = 0; i < values.length; i++) {
        var good = (asked && !asked[i]) || passes(values[i], data, i, wide);
        ok.push(good);
        if (!asked || asked[i]) { count++; if (good) right++; }
      }
      r.entry_ok = ok;
      r.right = right; r.count = count;
      if (right === count) { r.verdict = "correct"; r.share = 1; return; }
      data.mistakes.forEach(function (m) {
        if (m.entrywise ? someMatch(values, m, data, asked) : allMatch(values, m, asked)) r.diagnosis.push(m.text);
      });
      var share = variant.per_entry ? entryCredit(ok, data.fixed, asked, variant.mask_weight) : 0;
      r.share = share;
      var carried = data.carried.some(function (c) {
        var earlier = readings[c.input];
        return earlier.state === "ok" && allMatch(earlier.values, variant.parts[c.input].mistakes[c.mistake], variant.parts[c.input].asked) &&
          allMatch(values, c, asked);
      });
      if (carried && variant.carried_forward > share) {
        r.verdict = "carried";
        r.share = variant.carried_forward;
        r.message = _("Right method: this follows correctly from your own earlier answers.");
        return;
      }
      r.verdict = share > 0 ? "partial" : "wrong";
      r.invariants = broken(values, data);
      // The grader's own words: its count (from the page's data, in the grader's plural), its notes.
      r.message = data.counts.replace("%(correct)s", String(right));
      var masked = (data.fixed || []).filter(function (f, i) { return f && (!asked || asked[i]); }).length;
      var notes = (reading.unread || []).slice();
      if (variant.per_entry && masked > 0 && masked < count) {
        notes.unshift(_("the %(masked)s masked entries together carry %(percent)s%% of the part",
          { masked: masked, percent: String(Math.round(1000 * variant.mask_weight) / 10) }));
      }
      notes.forEach(function (text) { r.message = _("%(message)s; %(note)s", { message: r.message, note: text }); });
    });
    return variant.order.map(function (id) { return results[id]; });
  }

  function checkHere() {
    var variant = current.variant;
    var readings = {};
    fieldsets().forEach(function (fieldset) {
      readings[fieldset.dataset.part] = readPart(fieldset, variant.parts[fieldset.dataset.part]);
    });
    return checkVariant(variant, readings);
  }

  function staticProblem(topic, avoid) {
    return unpack(topic).then(function (variants) {
      // A variant not shown yet in this visit, in turn; the seed of the page's own order.
      var seen = shown[topic] || (shown[topic] = []);
      var last = seen.length ? seen[seen.length - 1] : -1, index = -1;
      for (var k = 0; k < variants.length; k++) {
        var candidate = (last + 1 + k) % variants.length;
        if (seen.indexOf(candidate) < 0 && variants[candidate].seed !== avoid) { index = candidate; break; }
      }
      if (index < 0) { seen.length = 0; index = (last + 1) % variants.length; } // every one shown: round again
      seen.push(index);
      var variant = variants[index];
      showProblem(topic, variant.seed, variant.html);
      current.variant = variant;
    });
  }

  // ------------------------------------------------------------- the buttons

  function newProblem(avoid) {
    var topic = picker.value;
    if (mode === "static") return staticProblem(topic, avoid).catch(function (err) { say(String(err.message || err), true); });
    var body = { topic: topic };
    if (firstSeed && !seeded[topic]) { body.seed = firstSeed; seeded[topic] = true; }
    return post("/api/problem", body).then(function (doc) { showProblem(doc.topic, doc.seed, doc.html); })
      .catch(function (err) { say(_("The practice server did not answer: %(error)s", { error: err.message }), true); });
  }

  function checkAnswers() {
    if (!current) return;
    if (mode === "static") {
      var parts = checkHere();
      showVerdicts(parts);
      localRecordCheck(current.topic, parts);
      return;
    }
    post("/api/check", { topic: current.topic, seed: current.seed, answers: collect() })
      .then(function (doc) { showVerdicts(doc.parts); showProgress(doc.progress); })
      .catch(function (err) { say(_("The practice server did not answer: %(error)s", { error: err.message }), true); });
  }

  function showWorked() {
    if (!current) return;
    var reveal = function (html) {
      workedBody.innerHTML = html; // the key's own rendering of this variant
      worked.hidden = false;
      worked.scrollIntoView({ block: "start" });
    };
    if (mode === "static") { reveal(current.variant.worked); return; }
    post("/api/worked", { topic: current.topic, seed: current.seed }).then(function (doc) { reveal(doc.html); })
      .catch(function (err) { say(_("The practice server did not answer: %(error)s", { error: err.message }), true); });
  }

  document.getElementById("new-problem").addEventListener("click", function () { newProblem(current && current.seed); });
  document.getElementById("another").addEventListener("click", function () { newProblem(current && current.seed); });
  picker.addEventListener("change", function () { newProblem(null); });
  document.getElementById("check").addEventListener("click", checkAnswers);
  document.getElementById("show-worked").addEventListener("click", showWorked);
  document.getElementById("answers").addEventListener("submit", function (event) { event.preventDefault(); });

  var ready;
  if (mode === "static") {
    staticData = JSON.parse(document.getElementById("practice-data").textContent);
    showProgress(localRows());
    ready = newProblem(null);
  } else {
    post("/api/progress", {}).then(function (doc) { showProgress(doc.progress); }).catch(function () {});
    ready = newProblem(null);
  }

  window.qkvquizPractice = {
    collect: collect, ready: ready, current: function () { return current; },
    checkVariant: checkVariant, readPart: readPart, unpack: unpack,
    newProblem: newProblem, checkAnswers: checkAnswers
  };
})();
