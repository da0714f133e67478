// The jrpc playground: talks JSON-RPC 2.0 to the server over WebSocket,
// builds a form per method from the server's OpenRPC document
// (rpc.discover), and shows requests, responses, the server's own messages
// and a history. Everything is plain DOM: no framework, nothing fetched.
//
// JSON texts are kept as the server wrote them: numbers beyond what a
// JavaScript number holds (ids, 64-bit integers, 1e400) are shown and sent
// digit for digit, never round-tripped through JSON.parse.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const rpcPath = document.querySelector('meta[name="jrpc-rpc-path"]').content || "/";
  const HISTORY_LIMIT = 200;
  const INBOX_LIMIT = 200;

  // ---- JSON text, without losing what JSON.parse would lose -------------

  const WHITESPACE = " \t\n\r";
  const LITERAL = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null/y;
  const NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;
  const INTEGER = /^-?(?:0|[1-9]\d*)$/;

  function skipSpace(text, i) {
    while (i < text.length && WHITESPACE.includes(text[i])) i++;
    return i;
  }

  // The index just past the JSON value that starts at `i` (after spaces).
  // Throws on malformed text; callers check validity with JSON.parse first.
  function skipValue(text, i) {
    i = skipSpace(text, i);
    const c = text[i];
    if (c === '"') {
      for (i++; i < text.length; i++) {
        if (text[i] === "\\") i++;
        else if (text[i] === '"') return i + 1;
      }
      throw new SyntaxError("unterminated string");
    }
    if (c === "{" || c === "[") {
      const close = c === "{" ? "}" : "]";
      i = skipSpace(text, i + 1);
      if (text[i] === close) return i + 1;
      for (;;) {
        if (c === "{") {
          i = skipSpace(text, skipValue(text, i));
          if (text[i] !== ":") throw new SyntaxError("expected :");
          i++;
        }
        i = skipSpace(text, skipValue(text, i));
        if (text[i] === ",") i++;
        else if (text[i] === close) return i + 1;
        else throw new SyntaxError("expected , or " + close);
      }
    }
    LITERAL.lastIndex = i;
    const literal = LITERAL.exec(text);
    if (!literal) throw new SyntaxError("unexpected " + (c || "end"));
    return i + literal[0].length;
  }

  // The members of a JSON object text, as name -> the value's own text.
  function members(text) {
    const found = new Map();
    let i = skipSpace(text, 0);
    if (text[i] !== "{") return found;
    i = skipSpace(text, i + 1);
    while (i < text.length && text[i] !== "}") {
      const nameEnd = skipValue(text, i);
      const name = JSON.parse(text.slice(i, nameEnd));
      const start = skipSpace(text, skipSpace(text, nameEnd) + 1);
      const end = skipValue(text, start);
      found.set(name, text.slice(start, end));
      i = skipSpace(text, end);
      if (text[i] === ",") i = skipSpace(text, i + 1);
    }
    return found;
  }

  // The elements of a JSON array text, each as its own text.
  function elements(text) {
    const found = [];
    let i = skipSpace(text, 0);
    if (text[i] !== "[") return found;
    i = skipSpace(text, i + 1);
    while (i < text.length && text[i] !== "]") {
      const end = skipValue(text, i);
      found.push(text.slice(skipSpace(text, i), end));
      i = skipSpace(text, end);
      if (text[i] === ",") i = skipSpace(text, i + 1);
    }
    return found;
  }

  // `text` without the spaces between tokens.
  function compact(text) {
    let out = "";
    for (let i = 0; i < text.length; ) {
      if (text[i] === '"') {
        const end = skipValue(text, i);
        out += text.slice(i, end);
        i = end;
      } else {
        if (!WHITESPACE.includes(text[i])) out += text[i];
        i++;
      }
    }
    return out;
  }

  // `text` indented two spaces per level; short flat arrays and objects
  // stay on one line. Text that is not JSON comes back as it is.
  function pretty(text) {
    try {
      JSON.parse(text);
    } catch {
      return text;
    }
    let out = "";
    let depth = 0;
    const newline = () => "\n" + "  ".repeat(depth);
    for (let i = 0; i < text.length; ) {
      const c = text[i];
      if (c === '"') {
        const end = skipValue(text, i);
        out += text.slice(i, end);
        i = end;
      } else if (c === "{" || c === "[") {
        const end = skipValue(text, i);
        const flat = compact(text.slice(i, end));
        if (flat.length <= 60 && !/[[{]/.test(flat.slice(1))) {
          out += flat.replace(/("(?:[^"\\]|\\.)*")|([,:])/g, (m, string, mark) =>
            string ? string : mark === "," ? ", " : ": "
          );
          i = end;
        } else {
          depth++;
          out += c + newline();
          i++;
        }
      } else if (c === "}" || c === "]") {
        depth--;
        out += newline() + c;
        i++;
      } else if (c === ",") {
        out += "," + newline();
        i++;
      } else if (c === ":") {
        out += ": ";
        i++;
      } else {
        if (!WHITESPACE.includes(c)) out += c;
        i++;
      }
    }
    return out;
  }

  // A key for matching ids: the id's own JSON text, so that ids beyond
  // what a JavaScript number holds stay apart. `undefined` for no id.
  const idKey = (idText) => (idText === undefined ? undefined : compact(idText));

  // ---- Small DOM helpers -------------------------------------------------

  function element(tag, attributes = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) {
      if (value === false || value === null || value === undefined) continue;
      if (name === "text") node.textContent = value;
      else node.setAttribute(name, value === true ? "" : value);
    }
    for (const child of children) {
      if (child !== null && child !== undefined) node.append(child);
    }
    return node;
  }

  const clock = () => new Date().toLocaleTimeString();

  // ---- State -------------------------------------------------------------

  let socket = null;
  let documentRpc = null; // the OpenRPC document, once loaded
  let selected = null; // the method shown in the form; null = any method
  let nextId = 1;
  let discoverCount = 0;
  let discoverId = null;
  let shown = null; // the history entry shown in the response panel
  const pending = new Map(); // idKey -> entry awaiting its response
  const nullWaiters = []; // raw entries the server may answer with id null
  const history = [];
  let fields = []; // the form's fields for the selected method
  let attempted = false; // whether a send of this form was tried

  // ---- Connection --------------------------------------------------------

  function defaultEndpoint() {
    const asked = new URLSearchParams(location.search).get("server");
    if (asked) return asked;
    return (location.protocol === "https:" ? "wss:" : "ws:") + "//" + location.host + rpcPath;
  }

  function setStatus(state, text) {
    const status = $("status");
    status.dataset.state = state;
    status.textContent = text;
  }

  function connect(url) {
    if (socket) {
      socket.onclose = null;
      socket.onmessage = null;
      socket.close();
      failPending("the playground connected elsewhere");
    }
    documentRpc = null;
    setStatus("connecting", "connecting…");
    let opened;
    try {
      opened = new WebSocket(url);
    } catch (e) {
      setStatus("closed", "cannot connect: " + e.message);
      return;
    }
    socket = opened;
    opened.onopen = () => {
      setStatus("open", "connected");
      discover();
    };
    opened.onmessage = (event) => {
      if (typeof event.data === "string") receive(event.data);
      else event.data.text().then(receive);
    };
    opened.onclose = (event) => {
      if (socket !== opened) return;
      socket = null;
      const why = event.reason ? ": " + event.reason : event.code === 1006 ? " (refused or unreachable)" : "";
      setStatus("closed", "disconnected, code " + event.code + why);
      failPending("the connection closed before the response");
    };
  }

  function failPending(why) {
    for (const entry of new Set([...pending.values(), ...nullWaiters])) {
      if (!entry.done) finish(entry, null, why);
    }
    pending.clear();
    nullWaiters.length = 0;
  }

  function discover() {
    discoverCount++;
    discoverId = "playground-discover-" + discoverCount;
    $("server-info").textContent = "Loading the server's description…";
    socket.send(JSON.stringify({ jsonrpc: "2.0", method: "rpc.discover", id: discoverId }));
  }

  function discovered(response) {
    const note = $("methods-note");
    if (response.error) {
      documentRpc = null;
      $("server-info").textContent = "Connected; the server does not describe itself";
      note.hidden = false;
      note.textContent =
        response.error.code === -32601
          ? "This server does not answer rpc.discover, so its methods are unknown: call any method by name, or write raw JSON."
          : "rpc.discover failed (" + response.error.code + " " + response.error.message + ").";
    } else {
      documentRpc = response.result || {};
      const info = documentRpc.info || {};
      $("server-info").textContent = [info.title, info.version].filter(Boolean).join(" ") +
        (info.description ? " — " + info.description : "");
      note.hidden = true;
    }
    renderMethods();
    const keep = selected && methods().find((m) => m.name === selected.name);
    select(keep || methods()[0] || null, false);
  }

  // ---- Schemas -----------------------------------------------------------

  function methods() {
    const list = (documentRpc && Array.isArray(documentRpc.methods) ? documentRpc.methods : []).filter(
      (m) => m && typeof m.name === "string" && !m.$ref
    );
    return list.slice().sort((a, b) => a.name.localeCompare(b.name));
  }

  function resolve(schema) {
    for (let depth = 0; schema && typeof schema.$ref === "string" && depth < 16; depth++) {
      const match = /^#\/(?:components\/schemas|definitions)\/(.+)$/.exec(schema.$ref);
      const schemas = (documentRpc && documentRpc.components && documentRpc.components.schemas) || {};
      schema = match ? schemas[decodeURIComponent(match[1])] : null;
    }
    return schema && typeof schema === "object" ? schema : {};
  }

  function resolveDescriptor(descriptor) {
    if (descriptor && typeof descriptor.$ref === "string") {
      const match = /^#\/components\/contentDescriptors\/(.+)$/.exec(descriptor.$ref);
      const descriptors = (documentRpc && documentRpc.components && documentRpc.components.contentDescriptors) || {};
      return (match && descriptors[decodeURIComponent(match[1])]) || { name: descriptor.$ref };
    }
    return descriptor || {};
  }

  // How a value of `schema` is entered: text, number, integer, boolean,
  // choice (an enum) or json (anything else).
  function kindOf(schema) {
    schema = resolve(schema);
    if (Array.isArray(schema.enum) && schema.enum.length > 0) return "choice";
    if ("const" in schema) return "choice";
    let type = schema.type;
    if (Array.isArray(type)) {
      const real = type.filter((t) => t !== "null");
      type = real.length === 1 ? real[0] : null;
    }
    if (type === "string") return "text";
    if (type === "number" || type === "integer" || type === "boolean") return type;
    return "json";
  }

  // A short name for a schema's type. Recursive types (a tree whose
  // children are trees) are named by their reference past a few levels.
  function typeName(schema, depth = 0) {
    if (depth > 3 && schema && typeof schema.$ref === "string") return schema.$ref.split("/").pop();
    if (depth > 8) return "…";
    const inner = (s) => typeName(s, depth + 1);
    schema = resolve(schema);
    if (Array.isArray(schema.enum)) return schema.enum.map((v) => JSON.stringify(v)).join(" | ");
    if ("const" in schema) return JSON.stringify(schema.const);
    if (Array.isArray(schema.type)) return schema.type.join(" | ");
    if (schema.type === "array") {
      if (Array.isArray(schema.items)) return "[" + schema.items.map(inner).join(", ") + "]";
      if (schema.items) return inner(schema.items) + "[]";
    }
    if (schema.type) return schema.type;
    if (schema.title) return schema.title;
    for (const any of ["oneOf", "anyOf"]) {
      if (Array.isArray(schema[any])) return schema[any].map(inner).join(" | ");
    }
    return Object.keys(schema).length === 0 ? "any" : "object";
  }

  function isNotification(method) {
    return method && !method.result;
  }

  function signature(method) {
    const params = (method.params || []).map(resolveDescriptor).map((p, i, all) => {
      const variadic = method["x-variadic"] && i === all.length - 1 ? "..." : "";
      return p.name + (p.required ? "" : "?") + ": " + typeName(p.schema) + variadic;
    });
    if (method["x-any-params"]) params.push("...");
    const result = method.result ? resolveDescriptor(method.result) : null;
    return method.name + "(" + params.join(", ") + ")" +
      (result ? " → " + (result.name ? result.name + ": " : "") + typeName(result.schema) : "");
  }

  // ---- Method list -------------------------------------------------------

  function renderMethods() {
    const list = $("method-list");
    const filter = $("filter").value.trim().toLowerCase();
    list.replaceChildren();
    if (!filter || "any method".includes(filter)) list.append(element("li", {}, methodButton(null)));
    for (const method of methods()) {
      const text = (method.name + " " + (method.summary || "")).toLowerCase();
      if (filter && !text.includes(filter)) continue;
      list.append(element("li", {}, methodButton(method)));
    }
  }

  function methodButton(method) {
    const current = selected === method || (selected && method && selected.name === method.name);
    const button = element(
      "button",
      { type: "button", class: "method", "aria-current": current ? "true" : false, "data-method": method ? method.name : "" },
      element("span", { class: "name", text: method ? method.name : "any method" }),
      element("span", {
        class: "summary",
        text: method ? method.summary || (isNotification(method) ? "notification" : "") : "a name and params of your own",
      })
    );
    button.addEventListener("click", () => select(method, true));
    return button;
  }

  function moveInList(event) {
    if (event.key !== "ArrowDown" && event.key !== "ArrowUp") return;
    const buttons = [...$("method-list").querySelectorAll("button")];
    const at = buttons.indexOf(document.activeElement);
    if (at < 0) return;
    event.preventDefault();
    const next = buttons[Math.min(buttons.length - 1, Math.max(0, at + (event.key === "ArrowDown" ? 1 : -1)))];
    next.focus();
  }

  // ---- The form ----------------------------------------------------------

  function select(method, focus) {
    selected = method;
    attempted = false;
    for (const button of $("method-list").querySelectorAll("button")) {
      const mine = (method ? method.name : "") === button.dataset.method;
      if (mine) button.setAttribute("aria-current", "true");
      else button.removeAttribute("aria-current");
    }
    renderDoc(method);
    renderFields(method);
    $("as-notification").checked = isNotification(method) && method !== null;
    showTab("form");
    updatePreview();
    if (focus) {
      const first = $("fields").querySelector("input, select, textarea") || $("send-form");
      (method ? first : $("method-name")).focus();
    }
  }

  function renderDoc(method) {
    const doc = $("method-doc");
    doc.replaceChildren();
    $("call-title").textContent = method ? method.name : "Any method";
    if (!method) {
      doc.append(element("p", { class: "muted", text: "Call a method by name, with params as JSON." }));
      return;
    }
    doc.append(element("p", { class: "signature" }, element("code", { text: signature(method) })));
    if (isNotification(method)) doc.append(element("p", { class: "badge", text: "notification" }));
    if (method.deprecated) doc.append(element("p", { class: "badge warn", text: "deprecated" }));
    if (method.summary) doc.append(element("p", { text: method.summary }));
    if (method.description) doc.append(element("p", { class: "description", text: method.description }));
    const errors = Array.isArray(method.errors) ? method.errors : [];
    if (errors.length > 0) {
      const list = element("ul", { class: "errors" });
      for (const e of errors) list.append(element("li", {}, element("code", { text: String(e.code) }), " " + (e.message || "")));
      doc.append(element("details", {}, element("summary", { text: "Errors it may return" }), list));
    }
  }

  let fieldCount = 0;

  // One field: its inputs (several for a variadic param) and how to read them.
  function makeField(descriptor, variadic) {
    const kind = kindOf(descriptor.schema);
    const schema = resolve(descriptor.schema);
    const id = "field-" + ++fieldCount;
    const box = element("div", { class: "field", "data-param": descriptor.name });
    const label = element(
      "label",
      { for: id },
      element("span", { class: "name", text: descriptor.name }),
      element("span", { class: "type", text: " " + typeName(descriptor.schema) + (variadic ? ", any count" : "") }),
      descriptor.required ? element("span", { class: "required", text: " required" }) : null
    );
    box.append(label);
    if (descriptor.description || descriptor.summary) {
      box.append(element("p", { class: "hint", id: id + "-hint", text: descriptor.description || descriptor.summary }));
    }
    const inputs = element("div", { class: "inputs" });
    box.append(inputs);
    const warning = element("p", { class: "warning", id: id + "-warning", "aria-live": "polite" });
    box.append(warning);
    const field = { descriptor, kind, variadic, inputs: [], warning, box };

    const add = (first) => {
      const input = makeInput(kind, schema, first ? id : id + "-" + field.inputs.length, descriptor);
      input.setAttribute("aria-describedby", id + "-hint " + id + "-warning");
      if (!first) input.setAttribute("aria-label", descriptor.name + " " + (field.inputs.length + 1));
      input.addEventListener("input", updatePreview);
      input.addEventListener("change", updatePreview);
      if (!variadic) {
        inputs.append(input);
      } else {
        const row = element("div", { class: "repeat" }, input);
        const remove = element("button", { type: "button", class: "small", text: "Remove", "aria-label": "Remove this " + descriptor.name });
        remove.addEventListener("click", () => {
          field.inputs.splice(field.inputs.indexOf(input), 1);
          row.remove();
          updatePreview();
        });
        row.append(remove);
        inputs.append(row);
      }
      field.inputs.push(input);
      return input;
    };
    add(true);
    if (variadic) {
      const more = element("button", { type: "button", class: "small", text: "Add " + descriptor.name });
      more.addEventListener("click", () => {
        add(false).focus();
        updatePreview();
      });
      box.append(more);
    }
    return field;
  }

  function makeInput(kind, schema, id, descriptor) {
    if (kind === "boolean" || kind === "choice") {
      const select = element("select", { id, name: descriptor.name });
      select.append(element("option", { value: "", text: descriptor.required ? "— choose —" : "— leave out —" }));
      const values = kind === "boolean" ? [true, false] : "const" in schema ? [schema.const] : schema.enum;
      for (const value of values) {
        const text = JSON.stringify(value);
        select.append(element("option", { value: text, text: typeof value === "string" ? value : text }));
      }
      return select;
    }
    if (kind === "json") {
      return element("textarea", { id, name: descriptor.name, rows: "3", class: "code", spellcheck: "false", placeholder: "JSON" });
    }
    return element("input", {
      id,
      name: descriptor.name,
      type: "text",
      inputmode: kind === "text" ? false : kind === "integer" ? "numeric" : "decimal",
      spellcheck: "false",
      autocomplete: "off",
      placeholder: kind === "text" ? "" : kind,
    });
  }

  // An input's value as JSON text, or null when left empty; with a warning
  // when the text does not fit the schema (sent anyway: the server decides).
  function readInput(kind, input, required) {
    const text = input.value;
    if (kind === "boolean" || kind === "choice") return { json: text || null };
    if (text.trim() === "") {
      if (kind === "text" && required) return { json: '""' };
      return { json: null };
    }
    if (kind === "text") return { json: JSON.stringify(text) };
    const trimmed = text.trim();
    if (kind === "number" || kind === "integer") {
      if (!NUMBER.test(trimmed)) return { json: JSON.stringify(text), warning: "not a number: sent as a string" };
      if (kind === "integer" && !INTEGER.test(trimmed)) return { json: trimmed, warning: "not a whole number" };
      return { json: trimmed };
    }
    try {
      JSON.parse(trimmed);
      return { json: trimmed };
    } catch {
      return { json: JSON.stringify(text), warning: "not valid JSON: sent as a string" };
    }
  }

  function renderFields(method) {
    const box = $("fields");
    box.replaceChildren();
    fields = [];
    $("method-name-row").hidden = method !== null;
    const structure = $("structure");
    const params = method ? (method.params || []).map(resolveDescriptor) : [];
    const byPosition = method && method.paramStructure === "by-position";
    const either = method && (!method.paramStructure || method.paramStructure === "either") && params.length > 0;
    structure.hidden = !either;
    structure.querySelector(byPosition ? 'input[value="by-position"]' : 'input[value="by-name"]').checked = true;
    if (!method || method["x-any-params"]) {
      fields.push(makeField({ name: "params", description: "an array or an object; leave empty to send none", schema: {} }, false));
      fields[0].whole = true;
    } else {
      params.forEach((p, i) => fields.push(makeField(p, method["x-variadic"] && i === params.length - 1)));
      if (params.length === 0) box.append(element("p", { class: "muted", text: "This method takes no params." }));
    }
    for (const field of fields) box.append(field.box);
  }

  function structureNow() {
    if (!selected) return "whole";
    if (selected.paramStructure === "by-position") return "by-position";
    if (selected.paramStructure === "by-name") return "by-name";
    return document.querySelector('input[name="structure"]:checked').value;
  }

  // The request the form describes, as JSON text (numbers as typed).
  function formRequest(id) {
    const method = selected ? selected.name : $("method-name").value;
    let params = null;
    const structure = structureNow();
    const warnings = new Map(fields.map((field) => [field, ""]));
    if (fields.length === 1 && fields[0].whole) {
      const read = readInput("json", fields[0].inputs[0], false);
      params = read.json;
      const value = params === null ? null : JSON.parse(params);
      if (read.warning) warnings.set(fields[0], read.warning);
      else if (params !== null && (typeof value !== "object" || value === null)) {
        warnings.set(fields[0], "params must be an array or an object");
      }
    } else if (fields.length > 0) {
      const values = fields.map((field) => {
        const reads = field.inputs.map((input) => readInput(field.kind, input, field.descriptor.required));
        warnings.set(field, reads.map((r) => r.warning).filter(Boolean).join("; "));
        if (field.variadic) {
          const present = reads.map((r) => r.json).filter((j) => j !== null);
          return { field, many: present };
        }
        // "required" only once a send was tried, not while the form is new.
        if (reads[0].json === null && field.descriptor.required && attempted) warnings.set(field, "required");
        return { field, json: reads[0].json };
      });
      if (structure === "by-position") {
        const items = [];
        for (const v of values) {
          if (v.many) items.push(...v.many);
          else items.push(v.json === null ? "null" : v.json);
        }
        // Trailing optional params left empty are left out.
        let last = values.length - 1;
        while (last >= 0 && !values[last].many && values[last].json === null && !values[last].field.descriptor.required) {
          last--;
          items.pop();
        }
        params = "[" + items.join(",") + "]";
      } else {
        const entries = values
          .filter((v) => (v.many ? v.many.length > 0 : v.json !== null))
          .map((v) => JSON.stringify(v.field.descriptor.name) + ":" + (v.many ? "[" + v.many.join(",") + "]" : v.json));
        params = "{" + entries.join(",") + "}";
      }
    }
    // Written only when changed, so screen readers announce each once.
    for (const [field, warning] of warnings) {
      if (field.warning.textContent !== warning) field.warning.textContent = warning;
    }
    let text = '{"jsonrpc":"2.0","method":' + JSON.stringify(method);
    if (params !== null) text += ',"params":' + params;
    if (id !== null) text += ',"id":' + id;
    return text + "}";
  }

  function updatePreview() {
    const notification = $("as-notification").checked;
    $("preview").textContent = pretty(formRequest(notification ? null : nextId));
  }

  // ---- Tabs --------------------------------------------------------------

  function showTab(which) {
    const form = which === "form";
    $("tab-form").setAttribute("aria-selected", String(form));
    $("tab-raw").setAttribute("aria-selected", String(!form));
    $("tab-form").tabIndex = form ? 0 : -1;
    $("tab-raw").tabIndex = form ? -1 : 0;
    $("form-pane").hidden = !form;
    $("raw-pane").hidden = form;
    if (!form && $("raw").value.trim() === "") copyFormToRaw();
  }

  function copyFormToRaw() {
    $("raw").value = pretty(formRequest($("as-notification").checked ? null : nextId));
  }

  // ---- Sending -----------------------------------------------------------

  function send(text, entry) {
    if (!socket || socket.readyState !== WebSocket.OPEN) {
      setOutcome("error", "Not connected: connect to a server first");
      return false;
    }
    socket.send(text);
    entry.requestText = text;
    entry.sentAt = performance.now();
    entry.time = clock();
    history.unshift(entry);
    if (history.length > HISTORY_LIMIT) history.pop();
    renderHistoryItem(entry);
    show(entry);
    return true;
  }

  function sendForm() {
    attempted = true;
    const notification = $("as-notification").checked;
    while (pending.has(String(nextId))) nextId++;
    const id = notification ? null : nextId;
    const method = selected ? selected.name : $("method-name").value;
    if (!method) {
      setOutcome("error", "Name the method to call");
      $("method-name").focus();
      return;
    }
    const entry = { method, keys: [], done: notification, note: notification ? "notification sent: no response" : undefined };
    if (!notification) entry.keys.push(String(id));
    if (!send(formRequest(id), entry)) return;
    if (!notification) {
      nextId++;
      for (const key of entry.keys) pending.set(key, entry);
    }
    updatePreview();
  }

  function sendRaw() {
    const text = $("raw").value;
    let valid = true;
    try {
      JSON.parse(text);
    } catch {
      valid = false;
    }
    const trimmed = text.trim();
    const isArray = valid && trimmed.startsWith("[");
    const calls = !valid ? [] : isArray ? elements(trimmed) : [trimmed];
    const keys = [];
    let first = null;
    // Malformed JSON, an empty batch, an entry that is not a request and an
    // explicit null id are answered with id null.
    let answeredWithNull = !valid || calls.length === 0;
    for (const call of calls) {
      const parts = members(call);
      const method = parts.get("method");
      const id = parts.get("id");
      if (!call.startsWith("{") || method === undefined || !method.startsWith('"')) answeredWithNull = true;
      else if (first === null) first = JSON.parse(method);
      if (id === undefined) continue;
      if (idKey(id) === "null") answeredWithNull = true;
      else keys.push(idKey(id));
    }
    const method = !valid ? "(malformed JSON)" : isArray ? "batch of " + calls.length : first !== null ? first : "(raw)";
    const entry = { method, keys, batch: isArray && calls.length > 0, done: false };
    if (!send(text, entry)) return;
    for (const key of keys) {
      if (!pending.has(key)) pending.set(key, entry);
      // Form calls take ids after any whole number sent here.
      if (INTEGER.test(key) && Number.isSafeInteger(Number(key)) && Number(key) >= nextId) nextId = Number(key) + 1;
    }
    if (answeredWithNull) {
      nullWaiters.push(entry);
      if (nullWaiters.length > 20) nullWaiters.shift();
    }
    if (keys.length === 0 && !answeredWithNull) {
      entry.done = true;
      entry.note = "notifications only: no response expected";
      updateHistoryItem(entry);
      show(entry);
    }
    updatePreview();
  }

  // ---- Receiving ---------------------------------------------------------

  function receive(text) {
    let message;
    try {
      message = JSON.parse(text);
    } catch {
      toInbox("not JSON", text);
      return;
    }
    if (Array.isArray(message)) {
      const keys = elements(text).map((item) => idKey(members(item).get("id")));
      const entry =
        keys.map((key) => pending.get(key)).find((e) => e && e.batch) ||
        (keys.every((key) => key === "null") ? nullWaiters.find((e) => e.batch && !e.done) : null);
      if (entry) finish(entry, text, null);
      else toInbox("batch", text);
      return;
    }
    if (message && typeof message === "object" && typeof message.method === "string") {
      fromServer(text, message);
      return;
    }
    if (message && typeof message === "object" && ("result" in message || "error" in message)) {
      const key = idKey(members(text).get("id"));
      if (discoverId !== null && key === JSON.stringify(discoverId)) {
        discovered(message);
        return;
      }
      let entry = pending.get(key);
      if (!entry && key === "null") {
        // A whole batch refused at once (too large) is answered by one error.
        entry = nullWaiters.find((e) => !e.batch && !e.done) || nullWaiters.find((e) => !e.done);
      }
      if (entry) finish(entry, text, null);
      else toInbox("response to no call of this page", text);
      return;
    }
    toInbox("message", text);
  }

  function finish(entry, responseText, failure) {
    entry.elapsed = entry.sentAt === undefined ? null : performance.now() - entry.sentAt;
    entry.done = true;
    if (responseText !== null) entry.responseText = responseText;
    else entry.note = failure;
    for (const key of entry.keys) {
      if (pending.get(key) === entry) pending.delete(key);
    }
    const waiting = nullWaiters.indexOf(entry);
    if (waiting >= 0) nullWaiters.splice(waiting, 1);
    entry.response = responseText !== null;
    updateHistoryItem(entry);
    if (shown === entry) show(entry);
  }

  function fromServer(text, message) {
    const isRequest = "id" in message;
    toInbox(isRequest ? "request" : "notification", text, message.method);
    if (isRequest && socket) {
      // A page serves no methods; say so rather than leave the server waiting.
      const id = members(text).get("id");
      socket.send('{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found","data":"the playground serves no methods"},"id":' + id + "}");
    }
  }

  function toInbox(kind, text, method) {
    const inbox = $("inbox");
    const item = element(
      "li",
      {},
      element("span", { class: "time", text: clock() }),
      " ",
      element("span", { class: "kind", text: kind }),
      method ? element("code", { class: "name", text: " " + method }) : null
    );
    const params = method ? members(text).get("params") : text;
    if (params !== undefined) item.append(element("pre", { class: "code", text: pretty(params) }));
    inbox.prepend(item);
    while (inbox.children.length > INBOX_LIMIT) inbox.lastChild.remove();
    $("inbox-count").textContent = String(inbox.children.length);
  }

  // ---- Showing an exchange -----------------------------------------------

  function setOutcome(state, text) {
    const outcome = $("outcome");
    outcome.dataset.state = state;
    outcome.textContent = text;
  }

  function summarize(entry) {
    if (!entry.done) return { state: "waiting", text: "Waiting for the response…", result: "" };
    if (entry.responseText === undefined) return { state: entry.note && entry.note.startsWith("notification") ? "sent" : "error", text: entry.note, result: "" };
    const took = entry.elapsed === null ? "" : " in " + entry.elapsed.toFixed(1) + " ms";
    const response = JSON.parse(entry.responseText);
    if (Array.isArray(response)) {
      const errors = response.filter((r) => r && r.error).length;
      return {
        state: errors ? "error" : "ok",
        text: "Batch: " + response.length + " responses, " + errors + " errors" + took,
        result: "",
      };
    }
    const parts = members(entry.responseText);
    if (response.error) {
      const data = members(parts.get("error") || "").get("data");
      return {
        state: "error",
        text: "Error " + response.error.code + " " + response.error.message + took,
        result: data === undefined ? "" : pretty(data),
      };
    }
    return { state: "ok", text: "Result" + took, result: pretty(parts.get("result") || "null") };
  }

  function show(entry) {
    shown = entry;
    $("exchange-title").textContent = "Response: " + entry.method;
    const summary = summarize(entry);
    setOutcome(summary.state, summary.text);
    $("result").textContent = summary.result;
    $("result").dataset.state = summary.state;
    $("request-sent").textContent = pretty(entry.requestText);
    $("response").textContent =
      entry.responseText !== undefined ? pretty(entry.responseText) : entry.done ? "(none)" : "(waiting…)";
    for (const item of $("history").children) item.classList.toggle("current", item.entry === entry);
  }

  // ---- History -----------------------------------------------------------

  function historyLabel(entry) {
    const summary = summarize(entry);
    let outcome = summary.state === "waiting" ? "…" : summary.state === "ok" ? "ok" : summary.state === "sent" ? "sent" : "error";
    if (entry.responseText !== undefined && summary.state === "ok" && !Array.isArray(JSON.parse(entry.responseText))) {
      const result = compact(members(entry.responseText).get("result") || "null");
      outcome = "→ " + (result.length > 40 ? result.slice(0, 39) + "…" : result);
    } else if (summary.state === "error" && entry.responseText !== undefined) {
      const response = JSON.parse(entry.responseText);
      if (response && response.error) outcome = "→ " + response.error.code;
    }
    return entry.method + " " + outcome;
  }

  function renderHistoryItem(entry) {
    const list = $("history");
    const view = element("button", { type: "button", class: "entry" });
    view.addEventListener("click", () => show(entry));
    const edit = element("button", { type: "button", class: "small", text: "Edit", "aria-label": "Edit the " + entry.method + " request of " + entry.time + " as raw JSON" });
    edit.addEventListener("click", () => {
      $("raw").value = pretty(entry.requestText);
      showTab("raw");
      $("raw").focus();
    });
    const item = element("li", {}, element("span", { class: "time", text: entry.time }), " ", view, " ", edit);
    item.entry = entry;
    entry.item = item;
    entry.view = view;
    list.prepend(item);
    while (list.children.length > HISTORY_LIMIT) list.lastChild.remove();
    $("history-count").textContent = String(list.children.length);
    updateHistoryItem(entry);
  }

  function updateHistoryItem(entry) {
    if (!entry.view) return;
    entry.view.textContent = historyLabel(entry);
    entry.item.dataset.state = summarize(entry).state;
  }

  // ---- Wiring ------------------------------------------------------------

  function start() {
    $("endpoint").value = defaultEndpoint();
    $("connect").addEventListener("submit", (event) => {
      event.preventDefault();
      connect($("endpoint").value.trim());
    });
    $("filter").addEventListener("input", renderMethods);
    $("filter").addEventListener("keydown", (event) => {
      if (event.key === "ArrowDown") {
        event.preventDefault();
        const first = $("method-list").querySelector("button");
        if (first) first.focus();
      }
    });
    $("method-list").addEventListener("keydown", moveInList);
    $("method-name").addEventListener("input", updatePreview);
    $("as-notification").addEventListener("change", updatePreview);
    for (const radio of document.querySelectorAll('input[name="structure"]')) radio.addEventListener("change", updatePreview);
    $("form-pane").addEventListener("submit", (event) => {
      event.preventDefault();
      sendForm();
    });
    $("raw-pane").addEventListener("submit", (event) => {
      event.preventDefault();
      sendRaw();
    });
    $("raw-from-form").addEventListener("click", copyFormToRaw);
    $("tab-form").addEventListener("click", () => showTab("form"));
    $("tab-raw").addEventListener("click", () => showTab("raw"));
    for (const tab of [$("tab-form"), $("tab-raw")]) {
      tab.addEventListener("keydown", (event) => {
        if (event.key === "ArrowLeft" || event.key === "ArrowRight") {
          event.preventDefault();
          const other = tab.id === "tab-form" ? "raw" : "form";
          showTab(other);
          $("tab-" + other).focus();
        }
      });
    }
    $("inbox-clear").addEventListener("click", () => {
      $("inbox").replaceChildren();
      $("inbox-count").textContent = "0";
    });
    $("history-clear").addEventListener("click", () => {
      $("history").replaceChildren();
      history.length = 0;
      $("history-count").textContent = "0";
    });
    document.addEventListener("keydown", (event) => {
      if ((event.ctrlKey || event.metaKey) && event.key === "Enter") {
        event.preventDefault();
        if ($("raw-pane").hidden) sendForm();
        else sendRaw();
        return;
      }
      const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement.tagName);
      if (event.key === "/" && !typing) {
        event.preventDefault();
        $("filter").focus();
      }
    });
    renderMethods();
    select(null, false);
    // A link may name another server (?server=): the user connects to it
    // by choice, never by opening a link.
    const endpoint = $("endpoint").value;
    let sameHost = false;
    try {
      sameHost = new URL(endpoint).host === location.host;
    } catch {
      sameHost = false;
    }
    if (sameHost) connect(endpoint);
    else setStatus("closed", "not connected: press Connect to use this server");
  }

  start();
})();
