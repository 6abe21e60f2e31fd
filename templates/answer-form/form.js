/* The answer form's behaviour: check boxes as they are typed, keep work in local storage,
 * save the submission JSON that `qkvquiz grade` reads, and load a saved one back.
 *
 * The page holds no answer: only part ids, shapes and the student's own typing.
 * Needs parse.js (window.qkvquizParse) loaded first. Every sentence is a catalog message marked
 * with _() (parse.js's gettext, in the student's language); counts are written as numbers beside
 * a colon, so that no message needs a language's plural forms.
 */
(function () {
  "use strict";

  var parse = window.qkvquizParse;
  var _ = parse.gettext;
  var form = document.getElementById("answers");
  var statusLine = document.getElementById("form-status");
  var student = form.dataset.student;
  var variant = form.dataset.variant;
  var setId = form.dataset.set || "";
  var storageKey = form.dataset.storageKey;
  var inputs = Array.prototype.slice.call(form.querySelectorAll("input.entry"));
  var parts = Array.prototype.slice.call(form.querySelectorAll("fieldset.part"));

  function shapeOf(fieldset) {
    var s = fieldset.dataset.shape;
    return s ? s.split(",").map(Number) : [];
  }

  function partInputs(fieldset) {
    return Array.prototype.slice.call(fieldset.querySelectorAll("input.entry"));
  }

  function describe(x) {
    if (x === Infinity) return "\u221e";
    if (x === -Infinity) return "\u2212\u221e";
    var text = String(Number(x.toPrecision(6)));
    return text.charAt(0) === "-" ? "\u2212" + text.slice(1) : text;
  }

  // --------------------------------------------------------------- checking one box

  /** Check one box: returns "empty", "ok" or "bad" and marks the box and its part. */
  function check(input, announce) {
    var text = input.value;
    var fieldset = input.closest("fieldset.part");
    var where = input.dataset.where || "";
    var state, message = "";
    if (!parse.strip(text)) {
      state = "empty";
    } else {
      try {
        if (fieldset && fieldset.dataset.kind === "shape") {
          // A shape is one text, read as the grader reads it: "2×4", "[2, 4]".
          var sizes = parse.parseShape(text, Number(fieldset.dataset.sizes));
          state = "ok";
          message = _("reads as %(value)s", { value: sizes.join(" \u00d7 ") });
        } else {
          var value = parse.parseEntry(text);
          state = "ok";
          message = _("reads as %(value)s", { value: describe(value) });
        }
      } catch (err) {
        state = "bad";
        message = err.message;
      }
      if (where) message = _("%(where)s: %(error)s", { where: where, error: message });
    }
    input.classList.toggle("bad", state === "bad");
    if (state === "bad") {
      input.setAttribute("aria-invalid", "true");
      input.title = message;
    } else {
      input.removeAttribute("aria-invalid");
      input.removeAttribute("title");
    }
    if (announce && fieldset) {
      var status = fieldset.querySelector(".part-status");
      var firstBad = fieldset.querySelector("input.entry.bad");
      if (state === "bad" || !firstBad) status.textContent = message;
      else status.textContent = firstBad.title;
      status.classList.toggle("bad", state === "bad" || !!firstBad);
    }
    return state;
  }

  function checkAll() {
    var bad = [], empty = 0;
    inputs.forEach(function (input) {
      var state = check(input, false);
      if (state === "bad") bad.push(input);
      else if (state === "empty") empty++;
    });
    parts.forEach(function (fieldset) {
      var firstBad = fieldset.querySelector("input.entry.bad");
      var status = fieldset.querySelector(".part-status");
      status.textContent = firstBad ? firstBad.title : "";
      status.classList.toggle("bad", !!firstBad);
    });
    return { bad: bad, empty: empty };
  }

  // --------------------------------------------------------------- the submission

  function entryValue(input) {
    var text = parse.strip(input.value);
    return text ? text : null;
  }

  /** The answers as the grader reads them: per part a text (scalar) or nested lists. */
  function collect() {
    var answers = {};
    parts.forEach(function (fieldset) {
      var shape = shapeOf(fieldset);
      var boxes = partInputs(fieldset);
      if (shape.length === 0) {
        answers[fieldset.dataset.part] = entryValue(boxes[0]);
        return;
      }
      var build = function (level, offset) {
        var out = [], stride = 1, k;
        for (k = level + 1; k < shape.length; k++) stride *= shape[k];
        for (k = 0; k < shape[level]; k++) {
          out.push(level === shape.length - 1 ? entryValue(boxes[offset + k]) : build(level + 1, offset + k * stride));
        }
        return out;
      };
      answers[fieldset.dataset.part] = build(0, 0);
    });
    var doc = { student: student, variant: variant, answers: answers };
    if (setId) doc.set = setId;
    return doc;
  }

  /** Fill the boxes from a submission's answers; returns the part ids that did not fit. */
  function fill(answers) {
    var misfit = [];
    parts.forEach(function (fieldset) {
      var id = fieldset.dataset.part;
      if (!Object.prototype.hasOwnProperty.call(answers, id)) return;
      var shape = shapeOf(fieldset);
      var flat = [];
      var ok = true;
      var walk = function (value, level) {
        if (level === shape.length) {
          if (value === null || value === undefined) flat.push("");
          else if (typeof value === "number" || typeof value === "string") flat.push(String(value));
          else ok = false;
          return;
        }
        if (!Array.isArray(value) || value.length !== shape[level]) {
          // A part left empty may be a bare null at any level.
          if (value === null) { for (var n = 1, k = level; k < shape.length; k++) n *= shape[k]; while (n--) flat.push(""); return; }
          ok = false;
          return;
        }
        value.forEach(function (v) { walk(v, level + 1); });
      };
      walk(answers[id], 0);
      var boxes = partInputs(fieldset);
      if (!ok || flat.length !== boxes.length) { misfit.push(id); return; }
      boxes.forEach(function (input, k) { input.value = flat[k]; });
    });
    return misfit;
  }

  // --------------------------------------------------------------- local storage

  function store() {
    try {
      window.localStorage.setItem(storageKey, JSON.stringify(collect()));
    } catch (err) { /* storage may be off (private mode): the boxes still work */ }
  }

  function restore() {
    var saved = null;
    try {
      saved = JSON.parse(window.localStorage.getItem(storageKey) || "null");
    } catch (err) { saved = null; }
    if (saved && saved.answers && typeof saved.answers === "object") {
      fill(saved.answers);
      return true;
    }
    return false;
  }

  // --------------------------------------------------------------- save and load

  function say(text, bad) {
    statusLine.textContent = text;
    statusLine.classList.toggle("bad", !!bad);
  }

  function save() {
    var result = checkAll();
    if (result.bad.length) {
      say(_("Boxes that cannot be read as a number (marked in red): %(n)s. Fix or clear them, then save again.",
            { n: result.bad.length }), true);
      result.bad[0].focus();
      return null;
    }
    var doc = collect();
    // When it was saved: among several files for one student, the grader takes the latest.
    doc.saved_at = new Date().toISOString();
    var text = JSON.stringify(doc, null, 2) + "\n";
    var blob = new Blob([text], { type: "application/json" });
    var link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = form.dataset.filename;
    document.body.appendChild(link);
    link.click();
    setTimeout(function () { URL.revokeObjectURL(link.href); link.remove(); }, 1000);
    store();
    var filled = inputs.length - result.empty;
    say(_("Saved %(file)s (%(filled)s of %(total)s boxes filled). Hand in that file.",
          { file: form.dataset.filename, filled: filled, total: inputs.length }), false);
    return doc;
  }

  function load(file) {
    var reader = new FileReader();
    reader.onload = function () {
      var doc;
      try {
        doc = JSON.parse(reader.result);
      } catch (err) {
        say(_("%(file)s is not a saved answer file (not JSON).", { file: file.name }), true);
        return;
      }
      if (!doc || typeof doc !== "object" || !doc.answers || typeof doc.answers !== "object") {
        say(_("%(file)s is not a saved answer file (no answers in it).", { file: file.name }), true);
        return;
      }
      if ((doc.variant && doc.variant !== variant) || (doc.student && doc.student !== student) ||
          (doc.set && setId && doc.set !== setId)) {
        say(_("%(file)s belongs to %(student)s, variant %(variant)s, not to this form (%(this_student)s, variant %(this_variant)s); nothing was loaded.",
              { file: file.name, student: doc.student || "?", variant: doc.variant || "?",
                this_student: student, this_variant: variant }), true);
        return;
      }
      var misfit = fill(doc.answers);
      var result = checkAll();
      store();
      // Whole sentences, one after another (a language without spaces between them uses none).
      var text = [_("Loaded %(file)s.", { file: file.name })];
      if (misfit.length) text.push(_("These parts did not fit their boxes and were left as they were: %(parts)s.", { parts: misfit.join(", ") }));
      if (result.bad.length) text.push(_("Boxes that cannot be read (marked in red): %(n)s.", { n: result.bad.length }));
      text = text.reduce(function (all, next) { return _("%(sentence)s %(next)s", { sentence: all, next: next }); });
      say(text, misfit.length > 0 || result.bad.length > 0);
    };
    reader.onerror = function () { say(_("Could not read %(file)s.", { file: file.name }), true); };
    reader.readAsText(file);
  }

  // --------------------------------------------------------------- wiring

  inputs.forEach(function (input, k) {
    input.addEventListener("input", function () { check(input, true); store(); });
    input.addEventListener("focus", function () { if (input.value) check(input, true); });
    input.addEventListener("blur", function () {
      // "reads as …" is for the box in hand; an unreadable box of the part stays named.
      var fieldset = input.closest("fieldset.part");
      var firstBad = fieldset.querySelector("input.entry.bad");
      var status = fieldset.querySelector(".part-status");
      status.textContent = firstBad ? firstBad.title : "";
      status.classList.toggle("bad", !!firstBad);
    });
    input.addEventListener("keydown", function (event) {
      // Enter moves on like Tab, so a row can be typed without reaching for Tab.
      if (event.key === "Enter") {
        event.preventDefault();
        var next = inputs[k + (event.shiftKey ? -1 : 1)];
        if (next) next.focus();
        else document.getElementById("save-answers").focus();
      }
    });
  });
  form.addEventListener("submit", function (event) { event.preventDefault(); });
  document.getElementById("save-answers").addEventListener("click", save);
  var loader = document.getElementById("load-answers");
  loader.addEventListener("change", function () {
    if (loader.files && loader.files[0]) load(loader.files[0]);
    loader.value = "";
  });

  if (restore()) {
    var restored = checkAll();
    say(restored.bad.length
      ? _("Your earlier work in this browser was restored; boxes that cannot be read (marked in red): %(n)s.", { n: restored.bad.length })
      : _("Your earlier work in this browser was restored."), restored.bad.length > 0);
  }

  window.qkvquizForm = { collect: collect, fill: fill, checkAll: checkAll, save: save, storageKey: storageKey };
})();
