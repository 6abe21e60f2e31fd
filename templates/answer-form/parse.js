/* Reading one answer entry in the browser: the grammar of qkvquiz/grade/parse.py, ported.
 *
 * The form checks each box as the student types, so that a box the grader could not read is
 * marked before the answers are saved. Python and this file must agree on every text: the
 * shared table tests/entry_cases.json is run through both (tests/test_entry_cases.py and the
 * browser test). Messages are the Python ones, word for word: each is a msgid of the gettext
 * catalog, marked with _() so that Babel extracts it from here too, and shown in the student's
 * language from the JSON the form carries in its data-messages attribute (qkvquiz/i18n.py).
 *
 *     expr   := term (("+" | "-") term)*
 *     term   := factor (("*" | "/") factor | power)*      // the bare `power` is 2√3, 2π, 2(3)
 *     factor := ("+" | "-") factor | power
 *     power  := atom ("^" factor)?                         // right-associative, e^-1 allowed
 *     atom   := number | constant | function atom | "(" expr ")"
 *
 * Nothing is passed to eval; the text is tokenised and read by recursive descent.
 */
(function (root) {
  "use strict";

  var MAX_TEXT_LENGTH = 200;
  var MAX_NESTING = 20;

  // Characters students type for the same operator; mapped before tokenising.
  var SYNONYMS = {
    "\u2212": "-", "\u2013": "-", "\u00d7": "*", "\u00b7": "*", "\u22c5": "*",
    "\u00f7": "/", "\u2215": "/", "\u2044": "/"
  };
  var SYNONYM_RE = /[\u2212\u2013\u00d7\u00b7\u22c5\u00f7\u2215\u2044]/g;
  // Python's str.isspace() set (JavaScript's \s differs: it has U+FEFF and lacks U+001C-U+001F, U+0085).
  var SPACE = "\t\n\u000b\u000c\r\u001c\u001d\u001e\u001f \u0085\u00a0\u1680" +
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000";
  // A decimal comma needs digits on both sides ("0,25"), so "1, 2" is not read as 1.2.
  var NUMBER = /(?:[0-9]+,[0-9]+|[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?/y;
  // "12,288" may be a decimal comma (12.288) or a thousands separator (12288): refused, not guessed.
  var GROUPED = /^[1-9][0-9]{0,2},[0-9]{3}$/;
  var NAME = /[A-Za-z]+/y;
  var OPERATORS = ["**", "+", "-", "*", "/", "^", "(", ")", "\u221a", "\u03c0", "\u221e"];
  var CONSTANTS = {
    e: Math.E, pi: Math.PI, "\u03c0": Math.PI,
    inf: Infinity, infinity: Infinity, "\u221e": Infinity
  };
  var FUNCTIONS = { sqrt: Math.sqrt, "\u221a": Math.sqrt, exp: Math.exp };
  var NUM = "number", CONST = "constant", FUNC = "function", OP = "operator", END = "end";

  // msgid -> translation in the student's language; none (English) shows the msgid as written.
  var MESSAGES = {};
  if (typeof document !== "undefined") {
    var form = document.getElementById("answers");
    if (form && form.dataset.messages) MESSAGES = JSON.parse(form.dataset.messages);
  }

  /** A message of the catalog in the student's language, its %(name)s placeholders filled. */
  function _(msgid, params) {
    var text = Object.prototype.hasOwnProperty.call(MESSAGES, msgid) ? MESSAGES[msgid] : msgid;
    if (!params) return text;
    return text.replace(/%\(([A-Za-z_]+)\)s|%%/g, function (m, name) {
      if (m === "%%") return "%";
      return Object.prototype.hasOwnProperty.call(params, name) ? String(params[name]) : m;
    });
  }

  function Unreadable(why) { this.why = why; }

  // What a Chinese keyboard types for ASCII: full-width forms (U+FF01 to U+FF5E) and the small
  // minus; "\u3002" is a decimal point only between digits; "\u3001" is refused (ambiguous).
  // The same step as normalize_width in qkvquiz/grade/parse.py.
  function fullWidthToAscii(text) {
    return text.replace(/[\uff01-\uff5e\ufe63]/g, function (c) {
      return c === "\ufe63" ? "-" : String.fromCharCode(c.charCodeAt(0) - 0xfee0);
    });
  }
  function normalizeWidth(text) {
    text = fullWidthToAscii(text);
    if (text.indexOf("\u3001") >= 0) {
      throw new Unreadable(_("\"\u3001\" could separate two entries or mark decimals; write each entry in its own box, with a decimal point (0.5)"));
    }
    text = text.replace(/([0-9])\u3002(?=[0-9])/g, "$1.");
    if (text.indexOf("\u3002") >= 0) {
      throw new Unreadable(_("\"\u3002\" is read as a decimal point only between two digits (0\u30025); write 0.5"));
    }
    return text;
  }

  function isSpace(ch) { return SPACE.indexOf(ch) >= 0; }

  function strip(text) {
    var a = 0, b = text.length;
    while (a < b && isSpace(text.charAt(a))) a++;
    while (b > a && isSpace(text.charAt(b - 1))) b--;
    return text.slice(a, b);
  }

  // Length and cutting in code points, as Python counts them.
  function show(text, limit) {
    limit = limit || 40;
    var chars = Array.from(text);
    return chars.length <= limit ? text : chars.slice(0, limit - 1).join("") + "\u2026";
  }

  function tokenize(text) {
    var tokens = [];
    var i = 0, n = text.length, m, k;
    while (i < n) {
      var ch = text.charAt(i);
      if (isSpace(ch)) { i++; continue; }
      NUMBER.lastIndex = i;
      m = NUMBER.exec(text);
      if (m) {
        if (GROUPED.test(m[0])) {
          var parts = m[0].split(",");
          throw new Unreadable(_("\"%(text)s\" could be %(point)s (decimal comma) or %(joined)s (thousands); write %(point)s or %(joined)s",
            { text: m[0], point: parts[0] + "." + parts[1], joined: parts[0] + parts[1] }));
        }
        var value = Number(m[0].replace(",", "."));
        if (!isFinite(value)) throw new Unreadable(_("\"%(text)s\" is too large", { text: m[0] }));
        tokens.push([NUM, value]);
        i = NUMBER.lastIndex;
        continue;
      }
      NAME.lastIndex = i;
      m = NAME.exec(text);
      if (m) {
        var name = m[0].toLowerCase();
        if (name === "nan") throw new Unreadable(_("NaN means \"not a number\"; write the value you computed"));
        if (Object.prototype.hasOwnProperty.call(CONSTANTS, name)) tokens.push([CONST, CONSTANTS[name]]);
        else if (Object.prototype.hasOwnProperty.call(FUNCTIONS, name)) tokens.push([FUNC, name]);
        else throw new Unreadable(_("unknown name \"%(name)s\"", { name: show(m[0], 20) }));
        i = NAME.lastIndex;
        continue;
      }
      var op = null;
      for (k = 0; k < OPERATORS.length; k++) {
        if (text.startsWith(OPERATORS[k], i)) { op = OPERATORS[k]; break; }
      }
      if (op === null) {
        throw new Unreadable(_("\"%(char)s\" cannot be part of a number", { char: String.fromCodePoint(text.codePointAt(i)) }));
      }
      if (op === "\u03c0" || op === "\u221e") tokens.push([CONST, CONSTANTS[op]]);
      else if (op === "\u221a") tokens.push([FUNC, op]);
      else tokens.push([OP, op === "**" ? "^" : op]);
      i += op.length;
    }
    tokens.push([END, null]);
    return tokens;
  }

  // Refuse results that have no value (∞ − ∞, 0·∞) or that overflowed from finite inputs.
  function checked(value) {
    if (Number.isNaN(value)) throw new Unreadable(_("it works out to \u221e \u2212 \u221e, 0\u00b7\u221e or \u221e/\u221e, which has no value"));
    if (!isFinite(value)) {
      for (var k = 1; k < arguments.length; k++) if (!isFinite(arguments[k])) return value;
      throw new Unreadable(_("the value is too large"));
    }
    return value;
  }

  // math.pow as Python has it (C99): 1^x and (−1)^±∞ are 1, a negative base with a
  // fractional exponent is an error; JavaScript's Math.pow gives NaN for these.
  function pow(base, exponent) {
    if (base === 1 || exponent === 0) return 1;
    if (base === -1 && !isFinite(exponent)) return 1;
    if (base < 0 && isFinite(base) && isFinite(exponent) && !Number.isInteger(exponent)) {
      throw new Unreadable(_("it raises a negative number to a fractional power"));
    }
    return Math.pow(base, exponent);
  }

  /** Why a token cannot stand where it is, in a student's words (the grader's outOfPlace). */
  function outOfPlace(kind, token) {
    if (kind === NUM || kind === CONST) {
      return _("it holds two numbers (a second decimal point, or a space inside a number); write one number per box");
    }
    return _("the \"%(token)s\" is out of place", { token: token });
  }

  function Parser(tokens) { this.tokens = tokens; this.pos = 0; this.depth = 0; }
  Parser.prototype.peek = function () { return this.tokens[this.pos]; };
  Parser.prototype.take = function () { return this.tokens[this.pos++]; };
  Parser.prototype.isOp = function () {
    var t = this.peek();
    if (t[0] !== OP) return false;
    for (var k = 0; k < arguments.length; k++) if (t[1] === arguments[k]) return true;
    return false;
  };
  Parser.prototype.enter = function () {
    // Parentheses, roots, functions, signs and exponents each open a level.
    this.depth++;
    if (this.depth > MAX_NESTING) throw new Unreadable(_("it is nested more than %(levels)s levels deep", { levels: MAX_NESTING }));
  };
  Parser.prototype.parse = function () {
    var value = this.expr();
    var t = this.peek();
    if (t[0] !== END) throw new Unreadable(outOfPlace(t[0], t[1]));
    return value;
  };
  Parser.prototype.expr = function () {
    var value = this.term();
    while (this.isOp("+", "-")) {
      var op = this.take()[1];
      var rhs = this.term();
      value = checked(op === "+" ? value + rhs : value - rhs, value, rhs);
    }
    return value;
  };
  Parser.prototype.term = function () {
    var value = this.factor(), rhs, kind;
    for (;;) {
      if (this.isOp("*", "/")) {
        var op = this.take()[1];
        rhs = this.factor();
        if (op === "*") value = checked(value * rhs, value, rhs);
        else if (rhs === 0) throw new Unreadable(_("it divides by zero"));
        else value = checked(value / rhs, value, rhs);
      } else if ((kind = this.peek()[0]) === CONST || kind === FUNC || this.isOp("(")) {
        rhs = this.power();
        value = checked(value * rhs, value, rhs);
      } else {
        return value;
      }
    }
  };
  Parser.prototype.factor = function () {
    if (this.isOp("+", "-")) {
      var op = this.take()[1];
      this.enter();
      var value = this.factor();
      this.depth--;
      return op === "-" ? -value : value;
    }
    return this.power();
  };
  Parser.prototype.power = function () {
    var base = this.atom();
    if (!this.isOp("^")) return base;
    this.take();
    this.enter();
    var exponent = this.factor();
    this.depth--;
    if (base === 0 && exponent < 0) throw new Unreadable(_("it divides by zero"));
    return checked(pow(base, exponent), base, exponent);
  };
  Parser.prototype.atom = function () {
    var t = this.take(), kind = t[0], token = t[1];
    if (kind === NUM || kind === CONST) return token;
    if (kind === FUNC) {
      this.enter();
      var arg = this.atom();
      this.depth--;
      if ((token === "sqrt" || token === "\u221a") && arg < 0) {
        throw new Unreadable(_("it takes the square root of a negative number"));
      }
      return checked(FUNCTIONS[token](arg), arg);
    }
    if (kind === OP && token === "(") {
      this.enter();
      var value = this.expr();
      this.depth--;
      if (!this.isOp(")")) throw new Unreadable(_("a \"(\" is not closed"));
      this.take();
      return value;
    }
    if (kind === END) throw new Unreadable(_("it ends too early"));
    throw new Unreadable(outOfPlace(kind, token));
  };

  /** Read one entry as the grader does: a float (±Infinity allowed), or throw an Error
   *  whose message is the grader's sentence for the student. */
  function parseEntry(raw) {
    var text = strip(String(raw));
    if (!text) throw new Error(_("cannot read \"\" as a number (the text is empty)"));
    if (Array.from(text).length > MAX_TEXT_LENGTH) {
      throw new Error(_("cannot read \"%(text)s\" as a number (it is longer than %(limit)s characters)",
        { text: show(text), limit: MAX_TEXT_LENGTH }));
    }
    try {
      return new Parser(tokenize(normalizeWidth(text).replace(SYNONYM_RE, function (c) { return SYNONYMS[c]; }))).parse();
    } catch (err) {
      if (err instanceof Unreadable) throw new Error(_("cannot read \"%(text)s\" as a number (%(why)s)", { text: show(text), why: err.why }));
      throw err;
    }
  }

  /** Read a shape written as one text, "2×4", "2 x 4", "[2, 4]" or "(2, 4)", as the grader's
   *  parse_shape_text does: an array of `length` whole numbers ≥ 1, or throw its sentence. */
  var SHAPE_SEPARATORS = "\u00d7xX*,";
  var SHAPE_BRACKETS = { "[": "]", "(": ")" };
  var SHAPE_SPACES = " \t\u00a0\u3000";
  function parseShape(rawText, length) {
    var trimmed = strip(fullWidthToAscii(String(rawText)));
    var body = trimmed;
    if (!body) throw new Error(_("cannot read \"\" as a shape (the text is empty)"));
    if (Array.from(body).length > MAX_TEXT_LENGTH) {
      throw new Error(_("cannot read \"%(text)s\" as a shape (it is longer than %(limit)s characters)",
        { text: show(body), limit: MAX_TEXT_LENGTH }));
    }
    var first = body.charAt(0);
    if (Object.prototype.hasOwnProperty.call(SHAPE_BRACKETS, first)) {
      if (body.charAt(body.length - 1) !== SHAPE_BRACKETS[first] || body.length < 2) {
        throw new Error(_("cannot read \"%(text)s\" as a shape (a bracket is not closed)", { text: show(body) }));
      }
      body = body.slice(1, -1);
    }
    var sizes = [""];
    var shown = show(trimmed);
    var chars = Array.from(body);
    for (var i = 0; i < chars.length; i++) {
      var ch = chars[i];
      if (SHAPE_SEPARATORS.indexOf(ch) >= 0) sizes.push("");
      else if (ch >= "0" && ch <= "9") sizes[sizes.length - 1] += ch;
      else if (SHAPE_SPACES.indexOf(ch) < 0) {
        throw new Error(_("cannot read \"%(text)s\" as a shape (write rows \u00d7 columns, such as 2\u00d74 or [2, 4]; \"%(char)s\" is not a size or a separator)",
          { text: shown, char: ch }));
      }
    }
    if (sizes.some(function (s) { return !s; })) {
      throw new Error(_("cannot read \"%(text)s\" as a shape (a size is missing; write rows \u00d7 columns, such as 2\u00d74 or [2, 4])",
        { text: shown }));
    }
    if (sizes.length !== length) {
      var params = { text: shown, count: sizes.length, length: length };
      throw new Error(sizes.length === 1
        ? _("cannot read \"%(text)s\" as a shape (it has 1 size, expected %(length)s)", params)
        : _("cannot read \"%(text)s\" as a shape (it has %(count)s sizes, expected %(length)s)", params));
    }
    var values = sizes.map(function (s) { return parseInt(s, 10); });
    if (values.some(function (v) { return v < 1; })) {
      throw new Error(_("cannot read \"%(text)s\" as a shape (every size is at least 1)", { text: shown }));
    }
    return values;
  }

  var api = { parseEntry: parseEntry, parseShape: parseShape, strip: strip, gettext: _, MAX_TEXT_LENGTH: MAX_TEXT_LENGTH };
  if (typeof module !== "undefined" && module.exports) module.exports = api;
  else root.qkvquizParse = api;
})(this);
