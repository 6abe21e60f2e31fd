/* The review page of a scan: each doubtful entry's cells as scanned, what was read and why it is
 * in doubt; the person types what the cells say (or keeps the reading) with the keyboard alone.
 *
 * Enter keeps the box's text as the decision (the reading, unless typed over; an empty box: a blank
 * entry) and moves to the next open entry; ArrowUp and ArrowDown move between entries; Tab reaches
 * the entry's "whole page" button, Escape closes the page. A value is checked by parse.js (the
 * grader's grammar) before it is sent, and again by the server, which appends it to the scan's
 * journal before it answers. Done grades again on the confirmed readings. Every sentence is a
 * catalog message marked with _(), shown in the page's language from the form's data-messages.
 */
(function () {
  "use strict";

  var parse = window.qkvquizParse;
  var _ = parse.gettext;
  var list = document.getElementById("items");
  var count = document.getElementById("count");
  var status = document.getElementById("status");
  var done = document.getElementById("done");
  var overlay = document.getElementById("overlay");
  var whole = document.getElementById("whole");
  var outline = document.getElementById("mark");
  var closeButton = document.getElementById("close");
  var items = [], rows = [], returnTo = null;

  function post(path, body) {
    return fetch(path, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
      credentials: "omit", cache: "no-store"
    }).then(function (reply) {
      return reply.json().then(function (doc) {
        if (!reply.ok) throw new Error(doc.error || String(reply.status));
        return doc;
      });
    });
  }

  function text(tag, className, content) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    node.textContent = content;
    return node;
  }

  function shown(value) {
    return value === null ? _("blank") : value;
  }

  function counted() {
    var open = items.filter(function (item) { return !item.decided; }).length;
    count.textContent = _("%(open)s of %(all)s entries still open", { open: open, all: items.length });
  }

  function focusRow(k) {
    if (k < 0 || k >= rows.length) return;
    rows.forEach(function (row, j) { row.li.classList.toggle("current", j === k); });
    rows[k].input.focus();
    rows[k].input.select();
  }

  function nextOpen(from) {
    for (var j = 1; j <= items.length; j++) {
      var k = (from + j) % items.length;
      if (!items[k].decided) return k;
    }
    return -1;
  }

  function showPage(k) {
    returnTo = rows[k].input;
    whole.src = "/view/" + items[k].id;
    // The entry outlined where it lies on its page (its box, as shares of the page).
    var box = items[k].box;
    outline.hidden = box.length !== 4;
    if (box.length === 4) {
      outline.style.left = box[0] * 100 + "%";
      outline.style.top = box[1] * 100 + "%";
      outline.style.width = box[2] * 100 + "%";
      outline.style.height = box[3] * 100 + "%";
    }
    overlay.hidden = false;
    closeButton.focus();
  }

  function closePage() {
    overlay.hidden = true;
    whole.removeAttribute("src");
    if (returnTo) returnTo.focus();
  }

  function mark(k) {
    var item = items[k], row = rows[k];
    row.li.classList.toggle("decided", item.decided);
    row.state.textContent = item.decided ? _("decided: %(value)s", { value: shown(item.value) }) : "";
  }

  function decide(k) {
    var row = rows[k], raw = row.input.value.trim();
    row.error.textContent = "";
    if (raw) {
      try {
        parse.parseEntry(raw);
      } catch (err) {
        row.error.textContent = err.message;
        return;
      }
    }
    post("/api/decide", { id: items[k].id, value: raw || null }).then(function (answer) {
      items[k] = answer;
      mark(k);
      counted();
      var next = nextOpen(k);
      if (next < 0) {
        status.textContent = _("Every entry is decided: press Done to grade again.");
        done.focus();
      } else {
        focusRow(next);
      }
    }).catch(function (err) {
      row.error.textContent = _("The decision was not kept: %(why)s", { why: err.message });
    });
  }

  function row(item, k) {
    var li = document.createElement("li");
    var where = text("p", "where", item.student + " · " + item.part + (item.place ? " · " + item.place : "") +
      " · " + _("page %(page)s", { page: item.page }));
    var img = document.createElement("img");
    img.className = "cells";
    img.src = "/picture/" + item.id;
    img.alt = _("The cells of this entry as scanned");
    var read = text("p", "", _("read: %(value)s", { value: shown(item.read) }));
    var why = text("p", "why", _("why: %(reasons)s", { reasons: item.reasons.join("; ") }));
    li.append(where, img, read, why);
    if (item.alternatives.length) {
      li.append(text("p", "why", _("another likely reading: %(values)s",
        { values: item.alternatives.map(shown).join(", ") })));
    }
    var line = document.createElement("div");
    line.className = "row";
    var input = document.createElement("input");
    input.type = "text";
    input.spellcheck = false;
    input.setAttribute("aria-label", _("What the cells say"));
    input.value = item.decided ? (item.value === null ? "" : item.value) : (item.read === null ? "" : item.read);
    var page = document.createElement("button");
    page.type = "button";
    page.textContent = _("Whole page");
    page.disabled = !item.view;
    var state = text("span", "state", "");
    var error = text("span", "error", "");
    line.append(input, page, state, error);
    li.append(line);
    input.addEventListener("keydown", function (event) {
      if (event.key === "Enter") { event.preventDefault(); decide(k); }
      else if (event.key === "ArrowDown") { event.preventDefault(); focusRow(k + 1); }
      else if (event.key === "ArrowUp") { event.preventDefault(); focusRow(k - 1); }
    });
    input.addEventListener("focus", function () {
      rows.forEach(function (r, j) { r.li.classList.toggle("current", j === k); });
    });
    page.addEventListener("click", function () { showPage(k); });
    return { li: li, input: input, state: state, error: error };
  }

  function load() {
    post("/api/items", {}).then(function (doc) {
      items = doc.items;
      rows = items.map(row);
      rows.forEach(function (r, k) { list.append(r.li); mark(k); });
      counted();
      if (!items.length) {
        status.textContent = _("Nothing is in doubt: press Done to grade again.");
        done.focus();
        return;
      }
      var first = nextOpen(items.length - 1);
      if (first < 0) done.focus(); else focusRow(first);
    }).catch(function (err) {
      status.textContent = _("The entries could not be loaded: %(why)s", { why: err.message });
    });
  }

  done.addEventListener("click", function () {
    done.disabled = true;
    status.textContent = _("Grading again…");
    post("/api/done", {}).then(function (doc) {
      status.textContent = _("Graded again: %(graded)s students, %(decided)s entries decided, %(open)s left as read. You may close this page.",
        { graded: doc.graded, decided: doc.decided, open: doc.open });
    }).catch(function (err) {
      done.disabled = false;
      status.textContent = _("Grading again failed: %(why)s", { why: err.message });
    });
  });
  closeButton.addEventListener("click", closePage);
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && !overlay.hidden) { event.preventDefault(); closePage(); }
  });
  load();
}());
